#!/usr/bin/env bash
# dist_comm.sh — the MPI wrapper (src/dist/dist.c) under mpirun -np 2 and -np 4:
# all-reduce sums, identical bits on every rank, byte counters, pipeline
# send/recv, broadcast and failure agreement (tests/test_dist_comm.c).
# k3-test: alone (MPI ranks fill the cores; beside another test a sanitized run once passed its time limit)
cd "$(dirname "$0")/../.."
. tests/sh/dist_env.sh.inc
T=$K3_BUILD/tests/test_dist_comm
for np in 2 4; do
    out=$(dist_mpirun "$np" "$T" 2>&1)
    rc=$?
    n=$(grep -c '^PASS ' <<<"$out")
    if [ "$rc" -eq 0 ] && [ "$n" -eq 3 ] && ! grep -q '^FAIL' <<<"$out"; then
        echo "PASS dist_comm_np$np"
    else
        echo "FAIL dist_comm_np$np (exit $rc, $n of 3 checks passed)"
        echo "$out" | tail -20 | sed 's/^/  /'
    fi
done
