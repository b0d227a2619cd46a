#!/usr/bin/env bash
# cli_flags.sh — the command line as users of llama-cli and mlx_lm.generate type
# it (issue 12): --version; the other tools' flag spellings and underscores give
# the same run as k3's own; -m DIR; one-line errors for unknown flags in every
# subcommand; bounds (--repetition-context-size, --ctx-size); a write error is a
# failure (> /dev/full); Ctrl-C during the prompt ends `k3 generate` at once
# with exit 130 (no race: SIGINT arrives blocked and pending, and k3 unblocks
# it when the prefill starts).
set -u
cd "$(dirname "$0")/../.."
K3=${K3:-build/k3}
FIX=${K3_FIXTURES:-$(cd .. && pwd)/shared/fixtures}
FX=$FIX/tiny-bf16
T=$(mktemp -d /tmp/k3-cliflags-XXXXXX)
trap 'rm -rf "$T"' EXIT

pass() { echo "PASS $1"; }
fail() {
    echo "FAIL $1"
    shift
    for l in "$@"; do echo "  $l"; done
}
expect_eq() { if [ "$2" = "$3" ]; then pass "$1"; else fail "$1" "got:  $2" "want: $3"; fi; }
ids_of() { sed -n "s/^\[k3\] $1 ([0-9]*): //p" "$2"; }
gen() { # out-file, args... (the fixture's ids are bytes)
    local out=$1
    shift
    "$K3" generate --model "$FX" --byte-tokenizer --verbose "$@" >"$out" 2>&1
}

v=$("$K3" --version)
if [[ "$v" == "k3 "*"(git "* ]]; then pass cli_version; else fail cli_version "$v"; fi

# --- other tools' spellings = k3's own (same prompt ids and generated ids) ---
same() { # name, "k3 args", "alias args"
    gen "$T/a" $2
    gen "$T/b" $3
    local a b
    a="$(ids_of 'prompt ids' "$T/a") / $(ids_of 'generated ids' "$T/a")"
    b="$(ids_of 'prompt ids' "$T/b") / $(ids_of 'generated ids' "$T/b")"
    if [ "$a" = "$b" ] && [ "$a" != " / " ]; then pass "$1"; else fail "$1" "$2: $a" "$3: $b"; fi
}
printf 'Hi_there' >"$T/prompt.txt"
same cli_n_is_max_tokens "--prompt hi --max-tokens 3" "--prompt hi -n 3"
same cli_underscores "--prompt hi --max-tokens 3 --no-chat-template" "--prompt hi --max_tokens 3 --no_chat_template"
same cli_s_is_seed "--prompt hi -m 4 --temp 0.9 --seed 7" "--prompt hi -m 4 --temp 0.9 -s 7"
same cli_t_is_threads "--prompt hi -m 3 --threads 1" "--prompt hi -m 3 -t 1"
same cli_f_is_file "--prompt Hi_there -m 3" "-f $T/prompt.txt -m 3"
# an underscore in a value stays as written (only flag names are rewritten): H i _ t h
if [[ "$(ids_of 'prompt ids' "$T/b")" == *,72,105,95,116,104,* ]]; then pass cli_values_keep_underscores; else fail cli_values_keep_underscores "$(ids_of 'prompt ids' "$T/b")"; fi
same cli_system_prompt "--prompt hi -m 2 --system be_brief" "--prompt hi -m 2 --system-prompt be_brief"
same cli_ignore_chat_template "--prompt hi -m 2 --no-chat-template" "--prompt hi -m 2 --ignore-chat-template"
same cli_repeat_penalty "--prompt hi -m 4 --repetition-penalty 1.5 --repetition-context-size 8" "--prompt hi -m 4 --repeat-penalty 1.5 --repeat-last-n 8"

# -m DIR: llama-cli's model flag is taken as --model (k3's -m N is --max-tokens)
"$K3" generate -m "$FX" --byte-tokenizer --prompt hi -n 2 --verbose >"$T/m" 2>&1
rc=$?
if [ $rc = 0 ] && grep -q 'taking the directory as --model' "$T/m" && [ "$(ids_of 'generated ids' "$T/m" | tr , '\n' | grep -c .)" = 2 ]; then
    pass cli_m_dir_is_model
else
    fail cli_m_dir_is_model "rc=$rc" "$(head -3 "$T/m")"
fi

# --- one line for an unknown flag, in every subcommand ---
for cmd in generate chat serve logits tokenize detokenize render bench quantize synth; do
    "$K3" $cmd --no-such-flag x </dev/null >"$T/u.out" 2>"$T/u.err"
    rc=$?
    if [ $rc = 2 ] && [ "$(wc -l <"$T/u.err")" = 1 ] && grep -q -- "--no-such-flag" "$T/u.err" &&
        grep -q -- "k3 $cmd --help" "$T/u.err" && [ ! -s "$T/u.out" ]; then
        pass "cli_unknown_flag_one_line_$cmd"
    else
        fail "cli_unknown_flag_one_line_$cmd" "rc=$rc" "$(head -3 "$T/u.err")"
    fi
done
"$K3" frobnicate >/dev/null 2>"$T/u.err"
rc=$?
if [ $rc = 2 ] && [ "$(wc -l <"$T/u.err")" = 1 ] && grep -q 'k3 --help' "$T/u.err"; then pass cli_unknown_command_one_line; else fail cli_unknown_command_one_line "rc=$rc"; fi

# --- bounds ---
err_has() { # name, message fragment, args...
    local name=$1 want=$2
    shift 2
    local err rc
    err=$("$@" 2>&1 >/dev/null </dev/null)
    rc=$?
    if [ $rc -ne 0 ] && [ $rc -lt 128 ] && grep -qF -- "$want" <<<"$err"; then pass "$name"; else fail "$name" "rc=$rc" "$err"; fi
}
err_has cli_rep_context_bounded "must be in 0..65536" "$K3" generate --repetition-context-size 2000000000
err_has cli_rep_context_bounded_chat "must be in 0..65536" "$K3" chat --repeat-last-n 100000
err_has cli_m_not_a_number "the model directory is --model DIR" "$K3" generate -m "$T/nothing-here"
err_has cli_ctx_size_prompt "more than --ctx-size 4" "$K3" generate --model "$FX" --byte-tokenizer --no-chat-template --prompt "Hi there" -c 4
gen "$T/c" --no-chat-template --prompt "Hi there" -m 50 --ctx-size 11 # 8 prompt tokens
expect_eq cli_ctx_size_limits_answer "$(ids_of 'generated ids' "$T/c" | tr , '\n' | grep -c .)" 3
printf 'one\ntwo\n' | "$K3" chat --model "$FX" --byte-tokenizer -m 2 -c 360 >"$T/chat" 2>&1 # turn 1: 346 + 2
if grep -q 'would pass --ctx-size 360 tokens' "$T/chat"; then pass cli_ctx_size_chat; else fail cli_ctx_size_chat "$(tail -3 "$T/chat")"; fi

# --- a failed write is a failure ---
if [ -w /dev/full ]; then
    "$K3" generate --model "$FX" --byte-tokenizer --prompt hi -m 2 >/dev/full 2>"$T/full"
    rc=$?
    if [ $rc = 1 ] && grep -q 'writing the output failed' "$T/full"; then pass cli_generate_dev_full; else fail cli_generate_dev_full "rc=$rc" "$(cat "$T/full")"; fi
    for c in "tokenize" "detokenize" "--version" "bench --help"; do
        echo 72 | "$K3" $c >/dev/full 2>"$T/full"
        rc=$?
        n=cli_dev_full_$(echo "$c" | tr -dc 'a-z')
        if [ $rc = 1 ] && grep -q 'writing the output failed' "$T/full"; then pass "$n"; else fail "$n" "rc=$rc" "$(cat "$T/full")"; fi
    done
    echo /help | "$K3" chat --model "$FX" --byte-tokenizer -m 2 >/dev/full 2>"$T/full"
    rc=$?
    if [ $rc = 1 ] && grep -q 'writing the output failed' "$T/full"; then pass cli_chat_dev_full; else fail cli_chat_dev_full "rc=$rc" "$(cat "$T/full")"; fi
fi

# --- Ctrl-C during the prompt: exit 130 at once, no statistics ---
python3 - "$K3" generate --model "$FX" --byte-tokenizer --prompt "$(printf 'a long prompt %.0s' $(seq 200))" -m 5 >"$T/int.out" 2>"$T/int.err" <<'PY'
import os, signal, subprocess, sys
signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
p = subprocess.Popen(sys.argv[1:])
os.kill(p.pid, signal.SIGINT)  # pending in k3 until its prefill starts
p.wait(timeout=600)
sys.exit(p.returncode if p.returncode >= 0 else 128 - p.returncode)
PY
rc=$?
if [ $rc = 130 ] && grep -q 'interrupted during the prompt' "$T/int.err" && ! grep -q '^Generation:' "$T/int.out"; then
    pass cli_ctrl_c_in_prompt_exits_130
else
    fail cli_ctrl_c_in_prompt_exits_130 "rc=$rc" "$(tail -2 "$T/int.err")" "$(tail -2 "$T/int.out")"
fi
