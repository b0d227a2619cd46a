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

# More requests than --parallel: the rest wait in the queue and still complete.
serve_start --test-mode --cache-mb 0 --parallel 3 || { echo "FAIL serve_concurrency_start_queue"; exit 1; }
node tests/serve/concurrency.mjs "$SERVE_URL" 12 | sed 's/^\(PASS\|FAIL\) concurrency_/\1 queued_/'
[ "${PIPESTATUS[0]}" = 0 ] || rc=1
serve_stop || { echo "FAIL serve_concurrency_clean_exit_queue"; exit 1; }
exit $rc
