#!/usr/bin/env bash
# synth_fuzz.sh — builds the gen-layer fuzz targets (synthetic config builder,
# generate/chat flag parser) and runs each briefly on small seeds.
set -u
cd "$(dirname "$0")/../.."
B=${K3_BUILD:-build}
F=${K3_FIXTURES:-../shared/fixtures}
if ! command -v clang >/dev/null; then
    echo "synth_fuzz: clang not installed, skipped"
    exit 0
fi
mkdir -p "$B/fuzz"
JC=$(pkg-config --cflags jansson)
JL=$(pkg-config --libs jansson)
build() { # name, sources...
    local n=$1
    shift
    if clang -std=c11 -D_GNU_SOURCE -g -O1 -Iinclude -Isrc $JC -fsanitize=fuzzer,address,undefined \
        "fuzz/$n.c" "$@" src/base/*.c $JL -lm -o "$B/fuzz/$n" \
        >"$B/fuzz/$n.build.log" 2>&1; then
        echo "PASS ${n}_build"
        return 0
    fi
    tail -20 "$B/fuzz/$n.build.log"
    echo "FAIL ${n}_build"
    return 1
}
seeds=$(mktemp -d)
trap 'rm -rf "$seeds"' EXIT
mkdir -p "$seeds/cfg" "$seeds/opts"
i=0
for c in "$F"/*/config.json ../shared/bench/k3-bench-config.json; do
    [ -f "$c" ] || continue
    { printf '\001'; cat "$c"; } >"$seeds/cfg/$i.json"
    i=$((i + 1))
done
printf '\002{"hidden_size": 128, "linear_attn_config": {"num_heads": 4}}' >"$seeds/cfg/flat.json"
printf '\000--temp\0000.7\000--top-k\00040\000--stop\000ab\000-m\0008' >"$seeds/opts/a"
printf '\001--thinking\000off\000--seed\00012\000--verbose' >"$seeds/opts/b"
run() { # name, seed dir
    local log="$B/fuzz/$1.run.log"
    if "$B/fuzz/$1" -runs=3000 -max_len=4096 "$2" >"$log" 2>&1; then
        echo "PASS ${1}_run"
    else
        tail -30 "$log"
        echo "FAIL ${1}_run"
    fi
}
build fuzz_synth_config src/gen/synth_config.c src/io/config.c && run fuzz_synth_config "$seeds/cfg"
build fuzz_gen_opts src/gen/gen_opts.c src/gen/sampler.c && run fuzz_gen_opts "$seeds/opts"
