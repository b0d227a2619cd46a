#!/usr/bin/env bash
# fuzz_io.sh — builds the safetensors-header and config.json fuzz targets and runs
# each for a few seconds on seeds made from the tiny fixtures (headers cut to
# their first 4 KB so the fuzzer mutates the JSON, plus the configs).
set -u
cd "$(dirname "$0")/../.."
B=${K3_BUILD:-build}
F=${K3_FIXTURES:-../shared/fixtures}
if ! command -v clang >/dev/null; then
    echo "fuzz_io: clang not installed, skipped"
    exit 0
fi
mkdir -p "$B/fuzz"
JC=$(pkg-config --cflags jansson)
JL=$(pkg-config --libs jansson)
build() { # name, sources...
    local n=$1
    shift
    if clang -std=c11 -D_GNU_SOURCE -g -O1 -Wall -Wextra -Wno-unused-parameter -Werror -Iinclude -Isrc $JC \
        -fsanitize=fuzzer,address,undefined \
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
mkdir -p "$seeds/st" "$seeds/cfg"
for d in "$F"/*/ tests/fixtures/*/; do
    n=$(basename "$d")
    [ -f "$d/config.json" ] && cp "$d/config.json" "$seeds/cfg/$n.json"
    for s in "$d"/*.safetensors; do
        [ -f "$s" ] && head -c 4096 "$s" >"$seeds/st/$n-$(basename "$s")"
    done
    for s in "$d"/*.index.json; do
        [ -f "$s" ] && cp "$s" "$seeds/st/$n-index.json"
    done
done
run() { # name, seed dir
    local out
    out=$("$B/fuzz/$1" -max_total_time=5 -print_final_stats=1 -rss_limit_mb=1024 -max_len=8192 "$2" 2>&1)
    if [ $? -eq 0 ]; then
        echo "PASS ${1}_run ($(grep -o 'stat::number_of_executed_units: [0-9]*' <<<"$out" | cut -d' ' -f2) runs)"
    else
        echo "FAIL ${1}_run"
        tail -30 <<<"$out" | sed 's/^/  /'
    fi
}
build fuzz_safetensors src/io/safetensors.c && run fuzz_safetensors "$seeds/st"
build fuzz_config src/io/config.c && run fuzz_config "$seeds/cfg"
