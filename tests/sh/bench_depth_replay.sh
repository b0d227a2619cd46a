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

# --- every error of the corpus reader and the --cost parser, through the CLI ---------------
# (each message exactly in tests/test_gen_replay_file.c; here: the exit status, 1 for a bad
# file, 2 for a bad option, and that the message reaches stderr naming file, line and field)
refused_rc() { # status, fixed string, bench args...
    local want=$1 pat=$2
    shift 2
    local out rc
    out=$("$K3" bench "$@" </dev/null 2>&1)
    rc=$?
    echo "exit $rc: $out"
    [ $rc = "$want" ] && grep -qF -- "$pat" <<<"$out" && [ "$(wc -l <<<"$out")" = 1 ]
}
D=(--model "$FX" --byte-tokenizer --draft-only)
printf '\n  \r\n' >"$T/blank.jsonl"
printf '{"prompt": "a", "answer": "bc"}\r\n\r\n[1]\r\n' >"$T/array.jsonl"
printf '{"answer": "bc"}\n' >"$T/noprompt.jsonl"
printf '{"prompt": "a", "answer": "\xff"}\n' >"$T/utf8.jsonl"
printf '{"prompt": "a", "answer": "bc", "n": 1e999}\n' >"$T/huge.jsonl"
printf '{"prompt": "a\000", "answer": "bc"}\n' >"$T/nul.jsonl"
printf '{"prompt": "a\\u0000b", "answer": "c\\u0000"}\n' >"$T/nulesc.jsonl"
check bench_err_replay_blank_only refused_rc 1 "blank.jsonl: no lines" "${D[@]}" --replay "$T/blank.jsonl"
check bench_err_replay_not_object refused_rc 1 "array.jsonl:3: a line must be a JSON object" "${D[@]}" --replay "$T/array.jsonl"
check bench_err_replay_missing_field refused_rc 1 'noprompt.jsonl:1: missing "prompt" (a string)' "${D[@]}" --replay "$T/noprompt.jsonl"
check bench_err_replay_bad_utf8 refused_rc 1 "utf8.jsonl:1: unable to decode byte 0xff" "${D[@]}" --replay "$T/utf8.jsonl"
check bench_err_replay_huge_number refused_rc 1 "huge.jsonl:1: real number overflow" "${D[@]}" --replay "$T/huge.jsonl"
check bench_err_replay_raw_nul refused_rc 1 "nul.jsonl:1: control character 0x0" "${D[@]}" --replay "$T/nul.jsonl"
check bench_err_replay_directory refused_rc 1 "cannot read (a directory" "${D[@]}" --replay "$T"
check bench_err_replay_missing_draft refused_rc 1 "missing.jsonl: cannot open: No such file" "${D[@]}" --replay "$T/missing.jsonl"
check bench_err_replay_short_draft refused_rc 1 'short.jsonl:1: "answer" has 1 token' "${D[@]}" --replay "$T/short.jsonl"
nul_escape_ok() { # \u0000 is text, a byte: strlen would make both 1 token
    "$K3" bench "${D[@]}" --replay "$T/nulesc.jsonl" --spec-max 2 | tee /dev/stderr |
        grep -q '^line 1: 2 answer tokens after a 3-token prompt'
}
check bench_replay_nul_escape nul_escape_ok
# --spec-cost with fewer costs than --spec-max: taken as generate and serve take it (drafts
# beyond the table are never sent), where bench used to refuse it; the copy of the phrase
# sends 4 drafts a step with a cheap table of 4, at most 2 with a table of 2
spec_cost_sends() { # table, a k it sends, the ks it must not send (none: "")
    local out
    out=$("$K3" bench "${D[@]}" --replay "$T/r.jsonl" --spec-max 4 --spec-cost "$1" 2>&1) ||
        { echo "$out"; return 1; }
    echo "$out"
    grep -q "verify steps by k:.* $2:" <<<"$out" || return 1
    [ -z "$3" ] || ! grep -Eq "verify steps by k:.* [$3]:" <<<"$out"
}
check bench_replay_spec_cost_full spec_cost_sends 1.01,1.02,1.03,1.04 4 ""
check bench_replay_spec_cost_short spec_cost_sends 1.01,1.02 2 34
C=("${D[@]}" --replay "$T/r.jsonl" --spec-max 2)
check bench_err_cost_no_name refused_rc 2 "--cost expects NAME=c1,c2,... (NAME 1..23 printable" "${C[@]}" --cost =1,2
check bench_err_cost_space_name refused_rc 2 "got 'a b=1,2'" "${C[@]}" --cost 'a b=1,2'
check bench_err_cost_trailing_comma refused_rc 2 "--cost a: cost 3: expected a number (costs > 0, 1e-06..1e+06), got ''" "${C[@]}" --cost a=1,2,
check bench_err_cost_inf refused_rc 2 "--cost a: cost 1: expected a number" "${C[@]}" --cost a=inf,2
check bench_err_cost_tiny refused_rc 2 "got '1e-9'" "${C[@]}" --cost a=1,1e-9
check bench_err_cost_17 refused_rc 2 "--cost a: more than 16 costs" "${C[@]}" --cost a=1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17
check bench_err_cost_tables refused_rc 2 "at most 4 --cost tables" "${C[@]}" --cost a=1,2 --cost b=1,2 --cost c=1,2 --cost d=1,2 --cost e=1,2
check bench_err_cost_short_list refused_rc 1 "--cost a gives 1 costs, --spec-max 2 needs 2" "${C[@]}" --cost a=1.5
