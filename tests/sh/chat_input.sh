#!/usr/bin/env bash
# chat_input.sh — how `k3 chat` reads messages (cli/lineedit.c): several lines
# per message (a trailing backslash, or """ blocks) from a pipe; on a terminal
# (a pseudo-terminal from `script`) line editing and history through libedit:
# Left-arrow + insert edits the line, Up-arrow brings the last message back,
# and the history is saved to K3_HISTORY. The checks read the prefill ids (the
# fixture's ids are bytes), so they do not depend on how the terminal echoes.
set -u
cd "$(dirname "$0")/../.."
K3=${K3:-build/k3}
FIX=${K3_FIXTURES:-$(cd .. && pwd)/shared/fixtures}
FX=$FIX/tiny-bf16
T=$(mktemp -d /tmp/k3-chatin-XXXXXX)
trap 'rm -rf "$T"' EXIT
export K3_BYTE_TOKENIZER=1
pass() { echo "PASS $1"; }
fail() {
    echo "FAIL $1"
    shift
    for l in "$@"; do echo "  $l"; done
}
# the user text of each turn, as byte ids: ...role="user"<|sep|> TEXT <|close|>message
user_ids() { grep '^\[k3\] prefill ids' "$1" | grep -o '114,111,108,101,61,34,117,115,101,114,34,749,[0-9,]*,748,109,101,115,115,97,103,101' |
    sed 's/^114,111,108,101,61,34,117,115,101,114,34,749,//; s/,748,109,101,115,115,97,103,101$//'; }

printf 'a\\\nb\n"""\nc\n\nd\n"""\nlast\n' | "$K3" chat --model "$FX" -m 1 --verbose >"$T/out" 2>"$T/err"
rc=$?
got=$(user_ids "$T/err" | paste -sd' ')
if [ $rc = 0 ] && [ "$got" = "97,10,98 99,10,10,100 108,97,115,116" ]; then
    pass chat_multiline_messages
else
    fail chat_multiline_messages "rc=$rc" "got:  $got" "want: 97,10,98 99,10,10,100 108,97,115,116"
fi

if ! command -v script >/dev/null; then
    fail chat_line_editing "util-linux 'script' is needed for a pseudo-terminal"
    exit 0
fi
# "helo", Left, "l", Enter -> "hello"; Up, Enter -> "hello" again; /exit
export K3_HISTORY=$T/history
printf 'helo\033[Dl\r\033[A\r/exit\r' |
    script -qec "$K3 chat --model $FX -m 1 --verbose 2>$T/tty.err" /dev/null >"$T/tty.out"
rc=$?
got=$(user_ids "$T/tty.err" | paste -sd' ')
if [ $rc = 0 ] && [ "$got" = "104,101,108,108,111 104,101,108,108,111" ]; then
    pass chat_line_editing_and_history
else
    fail chat_line_editing_and_history "rc=$rc" "got:  $got" "want: 104,101,108,108,111 104,101,108,108,111"
fi
if grep -qx hello "$T/history"; then pass chat_history_saved; else fail chat_history_saved "$(cat "$T/history" 2>&1)"; fi
