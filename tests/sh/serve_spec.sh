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
# a cost table under which no draft pays: decoded plainly, the same tokens
serve_start --spec ngram --spec-cost 1000000 --test-mode || { echo "FAIL serve_spec_start_costly"; exit 1; }
python3 tests/serve/spec.py "$SERVE_URL" costly || rc=1
serve_stop || { echo "FAIL serve_spec_clean_exit_costly"; rc=1; }
# a bad --spec-cost is refused at the start, naming the flag and the item
for bad in "1,x" "" "0" "1,,2" "nan" "1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17"; do
    for cmd in serve generate; do
        out=$(build/k3 $cmd --model "$K3_FIXTURES/tiny-bf16" --byte-tokenizer --spec-cost "$bad" \
            --prompt x 2>&1 </dev/null)
        st=$?
        if [ $st -ne 0 ] && [ $st -lt 128 ] && grep -q -- "--spec-cost: " <<<"$out"; then
            echo "PASS spec_cost_refused_${cmd}_${bad:0:8}"
        else
            echo "FAIL spec_cost_refused_${cmd}_${bad:0:8} (rc $st: $out)"
            rc=1
        fi
    done
done
exit $rc
