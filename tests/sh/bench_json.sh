#!/usr/bin/env bash
# bench_json.sh — every line `k3 bench --json` prints is one valid JSON object
# (python3's json module parses it), whatever bytes the paths it names hold:
# the model directory is a symlink, and the replay file a copy, whose names
# hold a quote, a backslash, a newline, a control byte and bytes that are not
# UTF-8. Covered: the model run (with --depth), --batch, --replay,
# --verify-cost, --attention, --kernels and --bandwidth. The model's path
# comes back as text with each non-UTF-8 byte spelled \xHH; its valid part is
# kept exactly. No timing is checked.
set -u
cd "$(dirname "$0")/../.."
K3=${K3:-build/k3}
FIX=${K3_FIXTURES:-$(cd .. && pwd)/shared/fixtures}
T=$(mktemp -d /tmp/k3-benchjson-XXXXXX)
trap 'rm -rf "$T"' EXIT
. tests/sh/lib/check.bash

WEIRD=$'q"b\\s\nn\x01c\xff\xfeu'
ln -s "$FIX/tiny-bf16" "$T/m-$WEIRD"
M="$T/m-$WEIRD"
printf '{"prompt": "the fox and the fox", "answer": "and the fox and the fox"}\n' >"$T/r-$WEIRD.jsonl"
R="$T/r-$WEIRD.jsonl"

# json_lines FILE NLINES [KEY=EXPECTED-MODEL-PREFIX]: every line an object, NLINES of them; the
# "model" and "replay" fields, where present, hold the weird name as text.
json_lines() {
    python3 - "$@" <<'PY'
import json, sys
path, want = sys.argv[1], int(sys.argv[2])
lines = open(path, "rb").read().decode("utf-8").splitlines()  # invalid UTF-8 would raise
assert len(lines) == want, f"{len(lines)} lines, want {want}"
weird = 'q"b\\s\nn\x01c\\xff\\xfeu'  # the bytes 0xff 0xfe come back as the text \xff\xfe
for ln in lines:
    o = json.loads(ln)
    assert isinstance(o, dict), ln
    for k in ("model", "replay"):
        if k in o:
            assert o[k].endswith(weird) or o[k].endswith(weird + ".jsonl"), (k, o[k])
print("ok", len(lines), "lines")
PY
}

run_json() { # lines expected, k3 bench args...
    local n=$1
    shift
    "$K3" bench "$@" --json >"$T/out.json" 2>"$T/err.txt" || { cat "$T/err.txt"; return 1; }
    cat "$T/out.json"
    json_lines "$T/out.json" "$n"
}

check bench_json_model_path run_json 1 --model "$M" -p 4 -n 2 --runs 1 --threads 1 --depth 8
check bench_json_batch_path run_json 2 --model "$M" -p 4 -n 2 --runs 1 --threads 1 --batch 2
check bench_json_replay_path run_json 1 --model "$M" --byte-tokenizer --replay "$R" --threads 1 -n 8 --spec-max 2
check bench_json_verify_cost_path run_json 2 --model "$M" --verify-cost 2 --rounds 1 --threads 1
check bench_json_attention run_json 2 --model "$M" -p 4 -n 2 --runs 1 --threads 1 --attention 64 --quick
check bench_json_kernels_bandwidth run_json 13 --kernels --quick --threads 1 -p 4

# the replay file's errors name it with the bytes spelled out: one printable line
printf '{"prompt": 1, "answer": "ab"}\n' >"$R"
replay_error_named() {
    local rc
    "$K3" bench --model "$M" --byte-tokenizer --replay "$R" --draft-only >"$T/e.txt" 2>&1
    rc=$?
    echo "exit $rc: $(cat "$T/e.txt")"
    [ $rc = 1 ] && [ "$(wc -l <"$T/e.txt")" = 1 ] && ! LC_ALL=C grep -q $'[\x01-\x1f\x80-\xff]' "$T/e.txt" &&
        grep -qF 'r-q"b\s\x0an\x01c\xff\xfeu.jsonl:1: "prompt" must be a string, not a number' "$T/e.txt"
}
check bench_json_replay_error replay_error_named
