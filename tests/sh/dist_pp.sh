#!/usr/bin/env bash
# dist_pp.sh — pipeline parallelism end to end: `mpirun -np 2|3 k3 logits
# --pipeline` (layer ranges per rank; the hidden state and the AttnRes block
# summaries handed from stage to stage) must give the single-process logits for
# prefill, decode and chunked modes (the sanitizer phase runs each mode once);
# more ranks than layers (4 on the 3-layer tp4-moe) work, the surplus stage
# holding no layers; each stage logs its layer range; a stage
# that fails to load (only the last rank holds layer 0 of tp4-bad-layer0) makes
# every rank exit with its message instead of hanging.
# k3-test: alone (MPI ranks fill the cores; beside another test a sanitized run once passed its time limit)
cd "$(dirname "$0")/../.."
. tests/sh/dist_env.sh.inc
CMP=$K3_BUILD/tests/test_dist_cmp
TMP=$(mktemp -d)
DIST_FIXTURES="tp4-bf16 tp4-moe"
[ "${K3_SAN:-0}" = 1 ] && DIST_FIXTURES=tp4-bf16 # the sanitizer phase is ~10x slower
trap 'rm -rf "$TMP"' EXIT

# Every run counts its traffic (K3_DIST_STATS) and keeps its log, so the log
# and traffic checks below read the runs of the comparison loop instead of
# starting the same ranks again.
runs() { # fixture: the (mode, ranks) pairs it is run with
    if [ "${K3_SAN:-0}" = 1 ]; then # the sanitizer phase: each mode and rank count once
        echo prefill:3 decode:3 chunked:5:2
    else
        local mode
        for mode in prefill decode chunked:5; do echo "$mode:2 $mode:3"; done
        # more ranks than layers (3): stage 0 holds none and only makes the
        # logits; stage 1 holds the last layer and hands it on
        [ "$1" = tp4-moe ] && echo decode:4
    fi
}
for fx in $DIST_FIXTURES; do
    F=tests/fixtures/$fx
    dist_tokens "$F" "$TMP/expected-$fx.f32"
    T=$DIST_T
    for run in $(runs "$fx"); do
        np=${run##*:} mode=${run%:*}
        m=${mode/:/}
        [ -f "$TMP/pp1-$fx-$m.f32" ] ||
            "$K3" logits --model "$F" --tokens "$T" --out "$TMP/pp1-$fx-$m.f32" --mode "$mode" 2>"$TMP/err" ||
            cat "$TMP/err"
        rm -f "$TMP/pp.f32"
        log="$TMP/log-$fx-$m-$np"
        K3_DIST_STATS=1 dist_mpirun "$np" "$K3" logits --pipeline --model "$F" --tokens "$T" --out "$TMP/pp.f32" \
            --mode "$mode" >"$log" 2>&1 || tail -5 "$log"
        if out=$("$CMP" "$TMP/pp.f32" "$TMP/pp1-$fx-$m.f32" 1e-5 1e-6 "PP$np vs 1 rank" 2>&1); then
            echo "PASS dist_pp${np}_${fx}_${m} ($out)"
        else
            echo "FAIL dist_pp${np}_${fx}_${m} ($out)"
        fi
    done
done

log=$TMP/log-tp4-bf16-prefill-3
if grep -q '\[rank 2/3\] pipeline stage 2 of 3: layers 0..2 of 7, embedding' "$log" &&
    grep -q '\[rank 1/3\] pipeline stage 1 of 3: layers 3..4 of 7' "$log" &&
    grep -q '\[rank 0/3\] pipeline stage 0 of 3: layers 5..6 of 7, output mix' "$log"; then
    echo "PASS dist_pp_stages_log_their_layers"
else
    echo "FAIL dist_pp_stages_log_their_layers"
    sed 's/^/  /' "$log"
fi
if [ "${K3_SAN:-0}" != 1 ]; then
    log=$TMP/log-tp4-moe-decode-4
    if grep -q '\[rank 1/4\] pipeline stage 1 of 4: layers 2..2 of 3, [0-9]' "$log" &&
        grep -q '\[rank 0/4\] pipeline stage 0 of 4: no layers (4 stages, 3 layers), output mix' "$log"; then
        echo "PASS dist_pp_surplus_stages_log_no_layers"
    else
        echo "FAIL dist_pp_surplus_stages_log_no_layers"
        sed 's/^/  /' "$log"
    fi
fi

# only stage 1 (layers 0..1) loads the broken layer 0; stage 0 must not wait forever
DIST_TIMEOUT=60 dist_mpirun 2 "$K3" logits --pipeline --model tests/fixtures/tp4-bad-layer0 --tokens 1,2,3 \
    --out "$TMP/bad.f32" >"$TMP/log" 2>&1
rc=$?
n=$(grep -c 'rank 1: loading tests/fixtures/tp4-bad-layer0: .*A_log.*padding tail is not zero' "$TMP/log")
if [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] && [ "$n" -eq 2 ] && [ ! -e "$TMP/bad.f32" ]; then
    echo "PASS dist_pp_failed_stage_stops_all_ranks"
else
    echo "FAIL dist_pp_failed_stage_stops_all_ranks (exit $rc, $n of 2 ranks printed rank 1's message)"
    sed 's/^/  /' "$TMP/log" | tail -12
fi

# pipeline traffic (the decode run above): stage boundaries of tp4-bf16 over 3
# ranks are layers 3 and 5; the hand-off carries (AttnRes blocks + 1) x D
# floats per token: 2x64 and 3x64, one message per token and link.
log=$TMP/log-tp4-bf16-decode-3
dist_tokens tests/fixtures/tp4-bf16 "$TMP/unused.f32"
n=$(tr ',' '\n' <<<"$DIST_T" | grep -c .)
if grep -q "\[rank 2/3\] comm: 0 all-reduce calls, 0 all-reduce bytes, $n p2p calls, $((512 * n)) p2p bytes" "$log" &&
    grep -q "\[rank 1/3\] comm: .* $((2 * n)) p2p calls, $((1280 * n)) p2p bytes" "$log" &&
    grep -q "\[rank 0/3\] comm: .* $n p2p calls, $((768 * n)) p2p bytes" "$log"; then
    echo "PASS dist_pp_bytes_per_token (512 B after layer 2, 768 B after layer 4, per token; $n tokens)"
else
    echo "FAIL dist_pp_bytes_per_token"
    grep comm "$log" | sed 's/^/  /'
fi
