#!/usr/bin/env bash
# dist_spec.sh — speculative decoding under tensor parallelism: `k3 serve`
# on the built-in tiny model with -np 2 answers a greedy completion whose
# drafts are kept and rejected (four tokens biased so the answer loops) with
# the same text as one process decoding plainly ("speculative": false), and
# its /metrics count kept drafts: the verify items and their commits reach
# the follower (src/model/follow.c). Nothing is timed.
# k3-test: alone (MPI ranks fill the cores; beside another test a sanitized run once passed its time limit)
cd "$(dirname "$0")/../.."
. tests/sh/dist_env.sh.inc
TMP=$(mktemp -d)
SERVER=
cleanup() {
    [ -n "$SERVER" ] && kill -TERM "$SERVER" 2>/dev/null
    rm -rf "$TMP"
}
trap cleanup EXIT
BODY='{"prompt":"x","max_tokens":48,"temperature":0,"logit_bias":{"300":100,"301":100,"302":100,"303":100},"speculative":%s}'

answer() { # np, speculative -> the completion text, then the kept drafts
    local np=$1 spec=$2
    dist_serve_start "$np" 90 150 "$TMP/serve$np.log"
    local port=$PORT
    # shellcheck disable=SC2059
    curl -s -m 60 "http://127.0.0.1:$port/v1/completions" -H 'Content-Type: application/json' \
        -d "$(printf "$BODY" "$spec")" | grep -o '"text":"[^"]*"'
    curl -s -m 10 "http://127.0.0.1:$port/metrics" | grep '^k3_spec_accepted_tokens_total' | grep -o '[0-9]*$'
    dist_serve_stop "$TMP/serve$np.rc"
}
plain=$(answer 1 false)
spec=$(answer 2 true)
src=$(cat "$TMP/serve2.rc" 2>/dev/null)
kept=$(tail -1 <<<"$spec")
if [ -n "$plain" ] && [ "$(head -1 <<<"$plain")" = "$(head -1 <<<"$spec")" ] && [ "${kept:-0}" -gt 0 ] &&
    [ "$src" != 124 ] && [ "$src" != 137 ]; then
    echo "PASS dist_spec_tp2_greedy_equals_plain ($kept drafts kept)"
else
    echo "FAIL dist_spec_tp2_greedy_equals_plain (one process plain: '$plain', -np 2 speculative: '$spec', exit $src)"
    tail -8 "$TMP/serve2.log" | sed 's/^/  /'
fi
