#!/usr/bin/env bash
# serve_spec.sh — speculative decoding in `k3 serve` (tests/serve/spec.py):
# greedy answers with drafts equal plain greedy answers token for token
# (with and without repetition, json_schema, stops, a stream, concurrent
# streams), "speculative" per request, /metrics counters. Nothing is timed.
cd "$(dirname "$0")/../.."
. tests/serve/lib.sh
rc=0
serve_start --spec ngram --spec-max 6 --test-mode || { echo "FAIL serve_spec_start"; exit 1; }
python3 tests/serve/spec.py "$SERVE_URL" on || rc=1
python3 tests/serve/spec.py "$SERVE_URL" forced || rc=1
python3 tests/serve/spec.py "$SERVE_URL" bad || rc=1
serve_stop || { echo "FAIL serve_spec_clean_exit"; rc=1; }
# the prompt cache off: a stop token ends the job at once (no closing step)
serve_start --spec off --cache-mb 0 || { echo "FAIL serve_spec_start_off"; exit 1; }
python3 tests/serve/spec.py "$SERVE_URL" off || rc=1
serve_stop || { echo "FAIL serve_spec_clean_exit_off"; rc=1; }
exit $rc
