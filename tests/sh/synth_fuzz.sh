#!/usr/bin/env bash
# synth_fuzz.sh — builds the gen-layer fuzz targets (synthetic config builder,
# generate/chat flag parser) and runs each briefly on small seeds.
set -u
cd "$(dirname "$0")/../.."
F=${K3_FIXTURES:-../shared/fixtures}
. tests/sh/lib/fuzz.bash
fuzz_need_clang synth_fuzz
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
# the llama-cli / mlx_lm spellings, -m with a directory, bounds
printf '\000-n\0004\000-c\00016\000-s\0003\000-t\0001\000-f\000/dev/null\000--system-prompt\000s' >"$seeds/opts/c"
printf '\000-m\000/tmp\000--repeat-penalty\0001.1\000--repeat-last-n\00070000\000--ignore-chat-template' >"$seeds/opts/d"
printf '\000--spec-cost\0001.5,2,2.5e0\000--spec-max\0003\000--spec-cost\0001,,x' >"$seeds/opts/e"
fuzz_build fuzz_synth_config src/gen/synth_config.c src/io/config.c &&
    fuzz_run fuzz_synth_config "$seeds/cfg" -- -runs=3000 -max_len=4096
fuzz_build fuzz_gen_opts src/gen/gen_opts.c src/gen/sampler.c src/gen/spec_cost.c src/model/cache_type.c &&
    fuzz_run fuzz_gen_opts "$seeds/opts" -- -runs=3000 -max_len=4096
