#!/usr/bin/env bash
# serve_transcripts.sh — the bytes every API answers (chat completions,
# completions, Anthropic Messages, Responses; streamed and whole) for forced
# outputs equal the recorded transcripts (tests/serve/transcripts.txt, ids and
# times masked). A change that means to alter them rewrites the file with
# K3_TRANSCRIPTS_UPDATE=1 and shows the difference in its commit.
cd "$(dirname "$0")/../.."
. tests/serve/lib.sh
serve_start --test-mode || { echo "FAIL serve_transcripts_start"; exit 1; }
got="$SERVE_TMP/transcripts.txt"
python3 tests/serve/transcripts.py "$SERVE_URL" "$got" || { echo "FAIL serve_transcripts_run"; exit 1; }
if [ -n "${K3_TRANSCRIPTS_UPDATE:-}" ]; then cp "$got" tests/serve/transcripts.txt; fi
check serve_transcripts_cases test "$(grep -c '^### ' "$got")" -ge 30
check serve_transcripts_bytes_unchanged diff -u tests/serve/transcripts.txt "$got"
serve_stop || { echo "FAIL serve_transcripts_clean_exit"; exit 1; }
