/* bench_batch.h — `k3 bench --batch B` (bench_batch.c). */
#ifndef K3_CLI_BENCH_BATCH_H
#define K3_CLI_BENCH_BATCH_H

/* Batched decode for B = 1, 2, 4, ... maxB (only maxB when only is set): table (or JSON lines)
 * on stdout. 0 or 1. */
int k3_bench_batch(const char *dir, int threads, int maxB, int only, long P, long N, long runs,
                   int json);

#endif
