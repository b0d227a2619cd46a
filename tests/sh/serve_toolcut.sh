#!/usr/bin/env bash
# serve_toolcut.sh — a tool call under every max_tokens (tests/serve/toolcut.mjs):
# whole calls give tool_calls + "tool_calls", a call cut by the limit is
# reported (unterminated arguments, "length"), never dropped.
cd "$(dirname "$0")/../.."
. tests/serve/lib.sh
command -v node >/dev/null || { echo "SKIP serve_toolcut (node is not installed)"; exit 0; }
serve_start --test-mode || { echo "FAIL serve_toolcut_start"; exit 1; }
node tests/serve/toolcut.mjs "$SERVE_URL"
rc=$?
serve_stop || { echo "FAIL serve_toolcut_clean_exit"; exit 1; }
exit $rc
