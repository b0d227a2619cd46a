#!/usr/bin/env bash
# serve_concurrency.sh — 50 concurrent streaming clients, a third of them
# disconnecting early, against a real `k3 serve` (tests/serve/concurrency.mjs).
# The prompt cache is off here so that memory has a fixed baseline.
cd "$(dirname "$0")/../.."
. tests/serve/lib.sh
serve_start --test-mode --cache-mb 0 || { echo "FAIL serve_concurrency_start"; exit 1; }
node tests/serve/concurrency.mjs "$SERVE_URL" 50
rc=$?
n=$(grep -c "finish=cancelled" "$SERVE_LOG")
# 17 of the 50 (every third) disconnect in each of the two rounds
check serve_concurrency_cancel_logged test "$n" -eq 34
serve_stop || { echo "FAIL serve_concurrency_clean_exit"; exit 1; }
exit $rc
