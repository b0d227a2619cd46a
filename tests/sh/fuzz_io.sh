#!/usr/bin/env bash
# fuzz_io.sh — builds the safetensors-header and config.json fuzz targets and runs
# each for a few seconds on seeds made from the tiny fixtures (headers cut to
# their first 4 KB so the fuzzer mutates the JSON, plus the configs).
set -u
cd "$(dirname "$0")/../.."
F=${K3_FIXTURES:-../shared/fixtures}
. tests/sh/lib/fuzz.bash
fuzz_need_clang fuzz_io
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
fuzz_build fuzz_safetensors src/io/safetensors.c && fuzz_run fuzz_safetensors "$seeds/st" -- -max_total_time=5 -max_len=8192
fuzz_build fuzz_config src/io/config.c && fuzz_run fuzz_config "$seeds/cfg" -- -max_total_time=5 -max_len=8192
