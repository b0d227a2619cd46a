#!/usr/bin/env bash
# fuzz_targets.sh — every fuzz/fuzz_*.c runs in the suite, under ASan + UBSan.
# Most targets have a script of their own (tests/sh/*fuzz*.sh) that builds them
# from the sources they exercise, with seeds that reach deep code. A target no
# script names (e.g. one just added) is built here by the Makefile's `make fuzz`
# rule (whole library, instrumented) and run on fuzz/seeds/NAME/ if that exists.
# FUZZ_SECONDS applies as in the other scripts (make fuzz-long).
set -u
cd "$(dirname "$0")/../.."
FUZZ_PKGS="jansson libpcre2-8 libmicrohttpd"
. tests/sh/lib/fuzz.bash
fuzz_need_clang fuzz_targets
others=$(ls tests/sh/*fuzz*.sh | grep -v "/fuzz_targets.sh$")
n=0
mine=()
for f in fuzz/fuzz_*.c; do
    name=$(basename "$f" .c)
    n=$((n + 1))
    # named by a script: "fuzz_NAME" literally, or "NAME:" in a loop over targets (fuzz_text.sh)
    # shellcheck disable=SC2086
    if grep -qE "(\b$name\b|[ \"']${name#fuzz_}:)" $others; then continue; fi
    mine+=("$name")
done
for name in "${mine[@]}"; do
    if make -s BUILD="$B" "$B/fuzz/$name" >"$B/fuzz/$name.build.log" 2>&1; then
        echo "PASS ${name}_build"
    else
        tail -20 "$B/fuzz/$name.build.log"
        echo "FAIL ${name}_build"
        continue
    fi
    seeds=fuzz/seeds/$name
    [ -d "$seeds" ] || seeds=$(mktemp -d)
    fuzz_run "$name" "$seeds" -- -max_total_time=5 -max_len=4096
done
echo "PASS fuzz_targets_all_run ($n targets: $((n - ${#mine[@]})) by their own scripts, ${#mine[@]} here${mine[*]:+: ${mine[*]}})"
