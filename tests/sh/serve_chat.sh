#!/usr/bin/env bash
# serve_chat.sh — the chat output fixtures (content, streaming, reasoning,
# tool call), stop strings, finish reasons and the prompt-cache hit, checked
# by tests/serve/fixtures.mjs against a real `k3 serve --test-mode`.
cd "$(dirname "$0")/../.."
. tests/serve/lib.sh
serve_start --test-mode || { echo "FAIL serve_chat_start"; exit 1; }
node tests/serve/fixtures.mjs "$SERVE_URL" "$(serve_model)"
rc=$?
serve_stop || { echo "FAIL serve_chat_clean_exit"; exit 1; }
exit $rc
