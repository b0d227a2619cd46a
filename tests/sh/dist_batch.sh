#!/usr/bin/env bash
# dist_batch.sh — k3_forward_batch under tensor parallelism: `mpirun -np 2
# test_model_batch` on the 4-head fixture checks, on the TP2 group, that a
# mixed batch (prefill chunks riding with decodes, sequences of different
# lengths) gives every sequence the logits of k3_forward alone within 1e-5
# relative and the same greedy continuation (tests/test_model_batch.c; rank 0
# prints the PASS/FAIL lines), with the f32 and then a bf16 latent cache. The
# forward batch travels to the follower ranks of `k3 serve` the same way
# (OP_FORWARD_BATCH, src/dist/replay.c).
# k3-test: alone (MPI ranks fill the cores; beside another test a sanitized run once passed its time limit)
cd "$(dirname "$0")/../.."
. tests/sh/dist_env.sh.inc
T=$K3_BUILD/tests/test_model_batch
out=$(dist_mpirun 2 "$T" tests/fixtures/tp4-bf16 --cache-type bf16 tests/fixtures/tp4-bf16 2>&1)
rc=$?
echo "$out" | grep -E '^(PASS|FAIL)' | sed 's/^\(PASS\|FAIL\) /\1 dist_tp2_/'
if [ $rc != 0 ] || ! grep -q '^PASS' <<<"$out"; then
    echo "FAIL dist_tp2_batch_run (exit $rc)"
    echo "$out" | tail -15 | sed 's/^/  /'
fi
