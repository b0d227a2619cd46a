#!/usr/bin/env bash
# bench_smoke.sh — `k3 bench` runs and reports sane numbers (no timing thresholds:
# the machines are shared, so only presence and positivity are checked).
set -u
K3=${K3:-build/k3}
FIX=${K3_FIXTURES:-../shared/fixtures}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
pass() { echo "PASS $1"; }
fail() { echo "FAIL $1${2:+ ($2)}"; }

positive() { awk -v v="$1" 'BEGIN { exit !(v + 0 > 0) }'; }
field() { grep -o "\"$2\":[^,}]*" "$1" | head -1 | cut -d: -f2 | tr -d '"'; }

if "$K3" bench --model "$FIX/tiny-bf16" -p 5 -n 3 --runs 3 --threads 2 --quick --json >"$TMP/m.json" 2>"$TMP/m.err"; then
    ok=1
    for k in prefill_tps decode_tps peak_rss_bytes active_bytes_per_token bandwidth_bytes_per_s roofline \
        decode_wall_s_per_token decode_cpu_s_per_token; do
        v=$(field "$TMP/m.json" "$k")
        positive "${v:-0}" || { ok=0; echo "  $k = '$v'"; }
    done
    [ "$(field "$TMP/m.json" threads)" = 2 ] || ok=0
    [ $ok = 1 ] && pass bench_model_json || fail bench_model_json "$(cat "$TMP/m.json")"
else
    fail bench_model_json "$(tail -1 "$TMP/m.err")"
fi

# the roofline's working set is at least the bytes per token, and says what it was
ge() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a + 0 >= b + 0 && a + 0 > 0) }'; }
ws=$(field "$TMP/m.json" bandwidth_working_set_bytes)
ge "${ws:-0}" "$(field "$TMP/m.json" active_bytes_per_token)" && [ "$(field "$TMP/m.json" bandwidth_over)" = buffer ] &&
    pass bench_bw_working_set || fail bench_bw_working_set "ws=$ws $(cat "$TMP/m.json")"
if "$K3" bench --model "$FIX/tiny-f32-sharded" -p 3 -n 2 --runs 1 --threads 2 --bw-over weights --json >"$TMP/w.json" 2>"$TMP/w.err" &&
    [ "$(field "$TMP/w.json" bandwidth_over)" = "weight files" ] &&
    ge "$(field "$TMP/w.json" bandwidth_working_set_bytes)" "$(field "$TMP/w.json" active_bytes_per_token)" &&
    positive "$(field "$TMP/w.json" bandwidth_bytes_per_s)"; then
    pass bench_bw_over_weight_files
else
    fail bench_bw_over_weight_files "$(cat "$TMP/w.json" "$TMP/w.err")"
fi

if "$K3" bench --model "$FIX/tiny-mxfp4" -p 3 -n 2 --runs 1 --quick >"$TMP/t.txt" 2>&1 &&
    grep -q '^roofline' "$TMP/t.txt" && grep -q '^decode' "$TMP/t.txt"; then
    pass bench_model_text
else
    fail bench_model_text "$(tail -2 "$TMP/t.txt")"
fi

if "$K3" bench --kernels --quick --threads 1 -p 7 >"$TMP/k.txt" 2>&1 &&
    [ "$(grep -c '^| ' "$TMP/k.txt")" -ge 13 ] && grep -q 'affine3/64' "$TMP/k.txt" &&
    grep -q '^memory read bandwidth' "$TMP/k.txt"; then
    pass bench_kernels_table
else
    fail bench_kernels_table "$(tail -2 "$TMP/k.txt")"
fi

K3_KERNELS=ref "$K3" bench --model "$FIX/tiny-bf16" -p 2 -n 1 --runs 1 --quick >"$TMP/r.txt" 2>&1
grep -q '(ref kernels' "$TMP/r.txt" && pass bench_ref_mode || fail bench_ref_mode "$(head -1 "$TMP/r.txt")"

expect_error() { # name, pattern, args...
    local name=$1 pat=$2
    shift 2
    "$K3" bench "$@" >"$TMP/e.txt" 2>&1
    local rc=$?
    if [ "$rc" -ne 0 ] && [ "$rc" -lt 128 ] && grep -q -- "$pat" "$TMP/e.txt"; then
        pass "bench_err_$name"
    else
        fail "bench_err_$name" "rc $rc: $(head -1 "$TMP/e.txt")"
    fi
}
expect_error no_mode "usage"
expect_error bad_threads "integer" --kernels --threads 0
expect_error bad_p "integer" --model "$FIX/tiny-bf16" -p x
expect_error missing_model "config.json" --model "$TMP/nope"
expect_error unknown_opt "unknown" --frobnicate
expect_error bad_bw_over "auto, buffer or weights" --model "$FIX/tiny-bf16" --bw-over disk

# --draft-only: the drafter over a replay file without the model (only a
# tokenizer: byte-level here). A copied file gives several tokens a step and
# the drafter never beats the bound it prints beside itself; bad --cost lists
# are refused.
python3 -c "
import json; c = json.load(open('$FIX/tiny-bf16/config.json')); c['k3_tokenizer'] = 'byte-level'
json.dump(c, open('$TMP/config.json', 'w'))"
COST="c=1.5,2,2.5,3,3.5,4,4.5,5"
if "$K3" bench --model "$TMP" --replay bench/replay/code-edit.jsonl --draft-only -n 400 --cost "$COST" \
    >"$TMP/d.txt" 2>&1; then
    tps=$(grep -o 'drafter: [0-9.]*' "$TMP/d.txt" | head -1 | cut -d' ' -f2)
    read -r mine best <<<"$(awk '$1 == "c" { print $2, $5 }' "$TMP/d.txt" | head -1 | tr -d x)"
    if ge "${tps:-0}" 3 && ge "${best:-0}" "${mine:-9}"; then
        pass bench_draft_only_copy
    else
        fail bench_draft_only_copy "tokens/step '$tps', drafter '$mine' best '$best'"
    fi
else
    fail bench_draft_only_copy "$(tail -1 "$TMP/d.txt")"
fi
expect_error draft_cost_short "gives 2 costs" --model "$TMP" --replay bench/replay/code-edit.jsonl \
    --draft-only --cost a=1,2
expect_error draft_cost_bad "costs > 0" --model "$TMP" --replay bench/replay/code-edit.jsonl \
    --draft-only --cost a=1,-2
