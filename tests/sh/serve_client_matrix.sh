#!/usr/bin/env bash
# serve_client_matrix.sh — the structured-output helpers of the official JS
# clients (openai, ai + @ai-sdk/openai, @langchain/openai, @anthropic-ai/sdk)
# on the random model with sampling and no test hooks; every answer must
# parse in the client and validate (tests/serve/client_matrix.mjs).
cd "$(dirname "$0")/../.."
. tests/serve/lib.sh
command -v node >/dev/null || { echo "PASS serve_client_matrix_skipped (node is not installed)"; exit 0; }
if ! bash tests/npm/setup.sh >/dev/null 2>&1 || [ ! -d tests/npm/node_modules/@anthropic-ai/sdk ]; then
    echo "FAIL serve_client_matrix_setup (npm install of tests/npm failed)"
    exit 1
fi
serve_start || { echo "FAIL serve_client_matrix_start"; exit 1; }
node tests/serve/client_matrix.mjs "$SERVE_URL"
rc=$?
serve_stop || { echo "FAIL serve_client_matrix_clean_exit"; exit 1; }
exit $rc
