#!/usr/bin/env bash
# dist_subcommands.sh — subcommands other than logits under mpirun: rank 0 runs
# the subcommand and does all I/O, ranks 1..N-1 follow its model calls
# (src/dist/replay.h). generate on the built-in tiny model must produce the
# same token ids with -np 2 tensor parallel, with K3_PIPELINE=1 and with
# K3_PIPELINE_STAGES=2 -np 4 (TP2 x PP2) as in one
# process (and with --cache-type bf16, which the followers get with the load,
# the ids of a one-process bf16 run); bench must run and report; serve must answer a greedy completion
# with the same text as a single-process server, and all ranks end on SIGTERM.
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

ids() { grep -E '^\[k3\] (prompt|generated) ids' "$1"; }

"$K3" generate -p "Hello there" -m 10 --verbose >/dev/null 2>"$TMP/g1.err"
ids "$TMP/g1.err" >"$TMP/ids1"
for variant in tp2 pp2 tp2xpp2; do
    np=2
    if [ "$variant" = pp2 ]; then export K3_PIPELINE=1; fi
    if [ "$variant" = tp2xpp2 ]; then export K3_PIPELINE_STAGES=2 && np=4; fi
    dist_mpirun "$np" "$K3" generate -p "Hello there" -m 10 --verbose >"$TMP/out" 2>"$TMP/g2.err"
    rc=$?
    unset K3_PIPELINE K3_PIPELINE_STAGES
    ids "$TMP/g2.err" >"$TMP/ids2"
    if [ "$rc" -eq 0 ] && [ -s "$TMP/ids1" ] && cmp -s "$TMP/ids1" "$TMP/ids2" &&
        grep -q '^Generation: 10 tokens' "$TMP/out"; then
        echo "PASS dist_generate_${variant}_same_tokens"
    else
        echo "FAIL dist_generate_${variant}_same_tokens (exit $rc)"
        diff "$TMP/ids1" "$TMP/ids2" | head -5 | sed 's/^/  /'
        tail -5 "$TMP/g2.err" | sed 's/^/  /'
    fi
done

"$K3" generate -p "Hello there" -m 10 --verbose --cache-type bf16 >/dev/null 2>"$TMP/b1.err"
ids "$TMP/b1.err" >"$TMP/bids1"
dist_mpirun 2 "$K3" generate -p "Hello there" -m 10 --verbose --cache-type bf16 >/dev/null 2>"$TMP/b2.err"
rc=$?
ids "$TMP/b2.err" >"$TMP/bids2"
if [ "$rc" -eq 0 ] && [ -s "$TMP/bids1" ] && cmp -s "$TMP/bids1" "$TMP/bids2"; then
    echo "PASS dist_generate_tp2_bf16_cache_same_tokens"
else
    echo "FAIL dist_generate_tp2_bf16_cache_same_tokens (exit $rc)"
    diff "$TMP/bids1" "$TMP/bids2" | head -5 | sed 's/^/  /'
    tail -5 "$TMP/b2.err" | sed 's/^/  /'
fi

dist_mpirun 2 "$K3" bench --model tests/fixtures/tp4-bf16 -p 8 -n 4 --runs 1 >"$TMP/bench" 2>&1
rc=$?
if [ "$rc" -eq 0 ] && grep -q '^decode ' "$TMP/bench" && grep -q 'tensor-parallel slice 1 of 2' "$TMP/bench"; then
    echo "PASS dist_bench_tp2"
else
    echo "FAIL dist_bench_tp2 (exit $rc)"
    tail -8 "$TMP/bench" | sed 's/^/  /'
fi

# serve: start, wait for the port, ask, compare with one process
serve_text() { # np (1 = plain), -> prints the completion text
    local np=$1
    dist_serve_start "$np" 60 100 "$TMP/serve$np.log"
    local port=$PORT
    curl -s -m 30 "http://127.0.0.1:$port/v1/completions" -H 'Content-Type: application/json' \
        -d '{"prompt":"Hello","max_tokens":8,"temperature":0}' | grep -o '"text":"[^"]*"'
    # two chats with one system prompt: the first stores a snapshot at the
    # system prompt's end inside its prefill step (k3_batch_item.snap, on every
    # rank), the second starts from it
    local chat='{"max_tokens":8,"temperature":0,"chat_template_kwargs":{"thinking":false},"messages":[{"role":"system","content":"You answer in few words."},{"role":"user","content":"%s"}]}'
    for q in Hi Bye; do
        # shellcheck disable=SC2059
        curl -s -m 30 "http://127.0.0.1:$port/v1/chat/completions" -H 'Content-Type: application/json' \
            -d "$(printf "$chat" "$q")" | grep -o '"content":"[^"]*"\|"cached_tokens":[0-9]*'
    done
    dist_serve_stop "$TMP/serve$np.rc"
}
t1=$(serve_text 1)
t2=$(serve_text 2)
# SIGTERM to mpirun is forwarded to the ranks; all of them must be gone by now,
# not killed by the 60 s timeout (124/137), i.e. the followers did not hang.
src=$(cat "$TMP/serve2.rc" 2>/dev/null)
if [ -n "$t1" ] && [ "$t1" = "$t2" ] && [ "$src" != 124 ] && [ "$src" != 137 ]; then
    echo "PASS dist_serve_tp2_same_completion ($t2)"
else
    echo "FAIL dist_serve_tp2_same_completion (one process: '$t1', -np 2: '$t2', exit $src)"
    tail -8 "$TMP/serve2.log" | sed 's/^/  /'
fi
