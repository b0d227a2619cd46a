#!/usr/bin/env bash
# bench_depth_replay.sh — `k3 bench --depth D --fill-threads N` and
# `k3 bench --replay FILE.jsonl` on a fixture: they run and report what they
# did (the fill's thread count in text and JSON, the replay's counts and its
# one prefill per line), and every bad value is a one-line error naming the
# option, with a non-zero exit and no run. No timing is checked: the machines
# are shared. That the fill's state does not depend on its threads, and that
# both replay passes start from bitwise the same state, is
# tests/test_gen_bench_start.c.
set -u
cd "$(dirname "$0")/../.."
K3=${K3:-build/k3}
FIX=${K3_FIXTURES:-$(cd .. && pwd)/shared/fixtures}
FX=$FIX/tiny-bf16
T=$(mktemp -d /tmp/k3-benchdr-XXXXXX)
trap 'rm -rf "$T"' EXIT

. tests/sh/lib/check.bash

field() { grep -o "\"$2\":[^,}]*" "$1" | head -1 | cut -d: -f2 | tr -d '"'; }
positive() { awk -v v="$1" 'BEGIN { exit !(v + 0 > 0) }'; }

# --- depth: the fill's threads, given and by default ---------------------------------------
fill_given() {
    "$K3" bench --model "$FX" -p 4 -n 2 --runs 1 --depth 300 --threads 2 --fill-threads 1 \
        --json >"$T/d.json" 2>"$T/d.err" || { cat "$T/d.err"; return 1; }
    cat "$T/d.json"
    [ "$(field "$T/d.json" fill_threads)" = 1 ] && [ "$(field "$T/d.json" threads)" = 2 ] &&
        [ "$(field "$T/d.json" depth)" = 300 ] && positive "$(field "$T/d.json" fill_s)" &&
        positive "$(field "$T/d.json" decode_tps)" &&
        grep -q 'context 300/300 tokens (.* s, 1 threads)' "$T/d.err"
}
check bench_depth_fill_threads_json fill_given

fill_default() {
    "$K3" bench --model "$FX" -p 4 -n 2 --runs 1 --depth 40 --threads 2 >"$T/d.txt" 2>&1 ||
        { cat "$T/d.txt"; return 1; }
    cat "$T/d.txt"
    grep -q '^depth  *40 tokens of context before the prompt (filled on 2 threads in' "$T/d.txt"
}
check bench_depth_fill_threads_default fill_default

# --- replay: a small corpus in the fixture's byte-level vocabulary -------------------------
phrase='the quick brown fox jumps over the lazy dog; '
printf '{"prompt": "%s%s", "answer": "%s%s"}\n{"prompt": "", "answer": "no repeats: 0123456789"}\n' \
    "$phrase" "$phrase" "$phrase" "$phrase" >"$T/r.jsonl"
replay_json() {
    "$K3" bench --model "$FX" --byte-tokenizer --replay "$T/r.jsonl" --threads 1 -n 40 --spec-max 4 --json \
        >"$T/r.json" 2>&1 || { cat "$T/r.json"; return 1; }
    cat "$T/r.json"
    local k
    for k in replay_plain_tps replay_spec_tps tokens verify_steps accepted prefill_cpu_s; do
        positive "$(field "$T/r.json" "$k")" || { echo "$k not positive"; return 1; }
    done
    [ "$(field "$T/r.json" tokens)" = $((39 + 21)) ] # each answer's tokens after its first
}
check bench_replay_json replay_json

replay_text() {
    "$K3" bench --model "$FX" --byte-tokenizer --replay "$T/r.jsonl" --threads 1 -n 20 >"$T/r.txt" 2>&1 ||
        { cat "$T/r.txt"; return 1; }
    cat "$T/r.txt"
    grep -q '^total ' "$T/r.txt" && grep -q '^prompts: prefilled once per line' "$T/r.txt"
}
check bench_replay_text replay_text

# --- bad values: refused with a message naming the option -----------------------------------
refused() { # pattern, bench args...
    local pat=$1
    shift
    local out rc
    out=$("$K3" bench "$@" </dev/null 2>&1)
    rc=$?
    echo "exit $rc: $out"
    [ $rc -ne 0 ] && [ $rc -lt 128 ] && grep -q -- "$pat" <<<"$out" && ! grep -q '^decode ' <<<"$out"
}
M=(--model "$FX" -p 4 -n 2 --runs 1)
check bench_err_fill_threads_zero refused "--fill-threads expects an integer 1..4096" "${M[@]}" --depth 8 --fill-threads 0
check bench_err_fill_threads_word refused "--fill-threads expects an integer" "${M[@]}" --depth 8 --fill-threads two
check bench_err_fill_threads_huge refused "--fill-threads expects an integer 1..4096" "${M[@]}" --depth 8 --fill-threads 99999999999
check bench_err_fill_threads_no_value refused "unknown or incomplete option '--fill-threads'" "${M[@]}" --depth 8 --fill-threads
check bench_err_fill_threads_no_depth refused "--fill-threads N fills the context of --model DIR --depth D" "${M[@]}" --fill-threads 2
check bench_err_fill_threads_depth_0 refused "--fill-threads N fills the context" "${M[@]}" --depth 0 --fill-threads 2
check bench_err_fill_threads_batch refused "not with --batch" "${M[@]}" --depth 8 --fill-threads 2 --batch 2
check bench_err_depth_negative refused "--depth expects an integer >= 0" "${M[@]}" --depth -5
check bench_err_threads_huge refused "--threads expects an integer 1..4096" "${M[@]}" --threads 100000

printf '{"prompt": "a", "answer": "bc"}\nnot json\n' >"$T/bad.jsonl"
printf '{"prompt": "a", "answer": 7}\n' >"$T/num.jsonl"
printf '{"prompt": "a", "answer": "b"}\n' >"$T/short.jsonl"
printf '{"prompt": "", "answer": "abc"}\n' >"$T/empty.jsonl"
: >"$T/none.jsonl"
R=(--model "$FX" --byte-tokenizer --threads 1)
check bench_err_replay_no_file refused "cannot open" "${R[@]}" --replay "$T/missing.jsonl"
check bench_err_replay_bad_json refused "bad.jsonl:2:" "${R[@]}" --replay "$T/bad.jsonl"
check bench_err_replay_answer_type refused '"answer" must be a string' "${R[@]}" --replay "$T/num.jsonl"
check bench_err_replay_short_answer refused "short.jsonl:1: \"answer\" has 1 token, a replay needs at least 2" "${R[@]}" --replay "$T/short.jsonl"
check bench_err_replay_no_lines refused "no lines" "${R[@]}" --replay "$T/none.jsonl"
check bench_err_replay_no_model refused "--replay needs --model DIR" --replay "$T/r.jsonl"
check bench_err_replay_no_value refused "unknown or incomplete option '--replay'" "${R[@]}" --replay
check bench_err_replay_spec_max refused "--spec-max expects an integer 1..16" "${R[@]}" --replay "$T/r.jsonl" --spec-max 17
check bench_err_replay_n refused "-n expects an integer 2.." "${R[@]}" --replay "$T/r.jsonl" -n 1
check bench_err_replay_unknown refused "unknown or incomplete option '--depth'" "${R[@]}" --replay "$T/r.jsonl" --depth 8
check bench_err_verify_cost_empty_prompt refused "the prompt is empty" "${R[@]}" --replay "$T/empty.jsonl" --verify-cost 2 --rounds 1
