#!/usr/bin/env bash
# chat_turns.sh — `k3 chat` driven by a stdin script: the second turn prefills
# only its new tokens (the cache keeps the first), and the cached state is
# right (the second answer's first token equals the argmax of `k3 logits` on
# the whole conversation); /clear, /thinking off, Ctrl-C stops an answer
# without leaving, end of input exits cleanly.
set -u
cd "$(dirname "$0")/../.."
K3=${K3:-build/k3}
FIX=${K3_FIXTURES:-$(cd .. && pwd)/shared/fixtures}
export K3_BYTE_TOKENIZER=1 # the shared fixtures have no tiktoken.model: their ids are bytes
FX=$FIX/tiny-bf16
T=$(mktemp -d /tmp/k3-chat-XXXXXX)
trap '[ -n "${KEEP:-}" ] || rm -rf "$T"' EXIT

pass() { echo "PASS $1"; }
fail() {
    echo "FAIL $1"
    shift
    for l in "$@"; do echo "  $l"; done
}
expect_eq() { if [ "$2" = "$3" ]; then pass "$1"; else fail "$1" "got:  $2" "want: $3"; fi; }
# field of the Nth "[k3] turn" line of a kind: turn_field FILE N 'prefilled' -> "97 0 345"
turn_nums() { grep "^\[k3\] turn [0-9]*: prefilled" "$1" | sed -n "$2p" | sed 's/.*prefilled \([0-9]*\) new tokens (cache \([0-9]*\) -> \([0-9]*\)).*/\1 \2 \3/'; }
nth_ids() { grep "^\[k3\] $2 (" "$1" | sed -n "$3p" | sed 's/^[^:]*: //'; }

printf 'Hi there\nsecond question\n' | "$K3" chat --model "$FX" -m 5 --verbose >"$T/out" 2>"$T/err"
rc=$?
expect_eq chat_two_turns_exit "$rc" 0
read -r n1 a1 b1 <<<"$(turn_nums "$T/err" 1)"
read -r n2 a2 b2 <<<"$(turn_nums "$T/err" 2)"
g1=$(nth_ids "$T/err" 'generated ids' 1 | tr ',' '\n' | grep -c .)
expect_eq chat_turn1_from_empty "$a1,$b1" "0,$n1"
# the second turn starts from the first turn's cache (+ the answer's fed tokens)
expect_eq chat_turn2_keeps_cache "$a2" "$((b1 + g1 - 1))"
if [ -n "$n2" ] && [ "$n2" -lt "$n1" ] && [ "$n2" = "$(nth_ids "$T/err" 'prefill ids' 2 | tr ',' '\n' | grep -c .)" ]; then
    pass chat_turn2_prefills_only_new_tokens
else
    fail chat_turn2_prefills_only_new_tokens "turn 1: $n1 tokens, turn 2: $n2 tokens"
fi
# the second prefill starts with the closing of the first answer, never the first user text again
p2=$(nth_ids "$T/err" 'prefill ids' 2)
if [[ "$p2" != *72,105,32,116,104,101,114,101* ]]; then pass chat_turn2_no_first_user_text; else fail chat_turn2_no_first_user_text "$p2"; fi

# the cache is right: replay the whole conversation through k3 logits
p1=$(nth_ids "$T/err" 'prefill ids' 1)
gen1=$(nth_ids "$T/err" 'generated ids' 1)
fed1=$(echo "$gen1" | tr ',' '\n' | head -n $((g1 - 1)) | paste -sd,)
all="$p1${fed1:+,$fed1},$p2"
first2=$(nth_ids "$T/err" 'generated ids' 2 | cut -d, -f1)
if "$K3" logits --model "$FX" --tokens "$all" --out "$T/l.f32" 2>"$T/lerr"; then
    V=1000
    want=$(od -An -v -f -w4 "$T/l.f32" | tail -n $V | awk 'NR == 1 || $1 > m {m = $1; i = NR - 1} END {print i}')
    echo "  (replayed $(echo "$all" | tr , "\n" | grep -c .) tokens: argmax $want, chat gave $first2)"
    expect_eq chat_turn2_matches_full_replay "$first2" "$want"
else
    fail chat_turn2_matches_full_replay "$(cat "$T/lerr")"
fi

# /clear and /thinking off
printf 'one\n/clear\ntwo\n/thinking off\nthree\n' | "$K3" chat --model "$FX" -m 3 --verbose >"$T/out2" 2>"$T/err2"
read -r _ a_after_clear _ <<<"$(turn_nums "$T/err2" 2)"
expect_eq chat_clear_empties_cache "$a_after_clear" 0
if grep -q '^\[conversation cleared\]$' "$T/out2"; then pass chat_clear_acknowledged; else fail chat_clear_acknowledged "$(cat "$T/out2")"; fi
p3=$(nth_ids "$T/err2" 'prefill ids' 3)
# byte-level fixture: ... <|open|> r e s p o n s e <|sep|>
if [[ "$p3" == *,747,114,101,115,112,111,110,115,101,749 ]]; then pass chat_thinking_off_opens_response; else fail chat_thinking_off_opens_response "$p3"; fi
p2b=$(nth_ids "$T/err2" 'prefill ids' 2)
if [[ "$p2b" == *,747,116,104,105,110,107,749 ]]; then pass chat_thinking_on_by_default; else fail chat_thinking_on_by_default "$p2b"; fi

# Ctrl-C stops the current answer, the chat goes on. No race with the model:
# k3 starts with SIGINT blocked and already pending (as a Ctrl-C that came
# early); chat unblocks SIGINT when an answer starts, so the signal lands in
# the first answer, which stops before its first token whatever the model
# would say; the second turn is answered normally.
python3 - "$K3" chat --model "$FX" -m 4 --verbose >"$T/out3" 2>"$T/err3" <<'PY'
import os, signal, subprocess, sys
signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
p = subprocess.Popen(sys.argv[1:], stdin=subprocess.PIPE)
os.kill(p.pid, signal.SIGINT)  # pending in k3 until its first answer starts
p.communicate(b"talk for a long time\nsecond question\n/thinking off\n/exit\n", timeout=600)
sys.exit(p.returncode if p.returncode >= 0 else 128 - p.returncode)
PY
rc=$?
if [ $rc = 0 ] && [ "$(grep -c '\[stopped\]' "$T/out3")" = 1 ] && grep -q '^\[thinking off\]$' "$T/out3" &&
    grep -q '^\[k3\] turn 1: generated 0 tokens' "$T/err3" && grep -q '^\[k3\] turn 2: generated [1-9]' "$T/err3"; then
    pass chat_ctrl_c_stops_answer_only
else
    fail chat_ctrl_c_stops_answer_only "rc=$rc" "$(tail -3 "$T/err3")" "$(grep -c stopped "$T/out3") [stopped] lines"
fi

# Ctrl-C inside a long prompt (more than one 512-token prefill piece) stops the
# prefill between pieces; the half-fed message cannot be continued, so the
# conversation starts over (the next turn prefills from an empty cache).
long=$(printf 'talk for a long time %.0s' $(seq 30))
python3 - "$K3" chat --model "$FX" -m 2 --verbose >"$T/out5" 2>"$T/err5" "$long" <<'PY'
import os, signal, subprocess, sys
signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
p = subprocess.Popen(sys.argv[1:-1], stdin=subprocess.PIPE)
os.kill(p.pid, signal.SIGINT)  # pending in k3 until its first answer starts
p.communicate(sys.argv[-1].encode() + b"\nsecond\n", timeout=600)
sys.exit(p.returncode if p.returncode >= 0 else 128 - p.returncode)
PY
rc=$?
read -r n1 _ _ <<<"$(turn_nums "$T/err5" 1)"
read -r _ a2 _ <<<"$(turn_nums "$T/err5" 2)"
if [ $rc = 0 ] && grep -q '^\[stopped during the prompt; the conversation starts over\]$' "$T/out5" &&
    [ "$n1" = 512 ] && [ "$a2" = 0 ]; then
    pass chat_ctrl_c_inside_long_prompt
else
    fail chat_ctrl_c_inside_long_prompt "rc=$rc, turn 1 prefilled '$n1', turn 2 from cache '$a2'" "$(head -3 "$T/out5")"
fi

# bad flags
"$K3" chat --model "$FX" --prompt x </dev/null >/dev/null 2>"$T/err4"
rc=$?
if [ $rc -ne 0 ] && grep -q 'k3 chat' "$T/err4"; then pass chat_rejects_prompt_flag; else fail chat_rejects_prompt_flag "rc=$rc"; fi
