#!/usr/bin/env bash
# serve_responses_api.sh — the official openai npm client on the stored side of
# the Responses API (retrieve, delete, inputItems.list with pagination; other
# keys' ids not found) and reasoning_effort's one set of values on chat and
# Responses, against a real `k3 serve` with two API keys
# (tests/serve/responses_store.mjs).
cd "$(dirname "$0")/../.."
. tests/serve/lib.sh
command -v node >/dev/null || { echo "PASS serve_responses_api_skipped (node is not installed)"; exit 0; }
[ -d tests/npm/node_modules/openai ] || { echo "FAIL serve_responses_api_setup (tests/npm/node_modules/openai missing)"; exit 1; }
serve_start --test-mode --api-key key-a --api-key key-b || { echo "FAIL serve_responses_api_start"; exit 1; }
node tests/serve/responses_store.mjs "$SERVE_URL"
rc=$?
serve_stop || { echo "FAIL serve_responses_api_clean_exit"; exit 1; }
exit $rc
