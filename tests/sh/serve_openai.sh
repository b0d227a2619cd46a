#!/usr/bin/env bash
# serve_openai.sh — the official `openai` npm client (tests/npm) against a
# real `k3 serve`: chat, stream, tools (tests/serve/openai_client.mjs).
cd "$(dirname "$0")/../.."
. tests/serve/lib.sh
if ! bash tests/npm/setup.sh >/dev/null 2>&1 && [ ! -d tests/npm/node_modules/openai ]; then
    echo "FAIL serve_openai_setup (npm install of tests/npm failed)"
    exit 1
fi
serve_start --test-mode --api-key test-key || { echo "FAIL serve_openai_start"; exit 1; }
node tests/serve/openai_client.mjs "$SERVE_URL"
rc=$?
serve_stop || { echo "FAIL serve_openai_clean_exit"; exit 1; }
exit $rc
