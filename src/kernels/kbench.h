/* kbench.h — kernel micro-benchmarks for `k3 bench --kernels`.
 *
 * Times k3_matvec (decode: weights streamed from memory, reported as GB/s of
 * weights and GFLOP/s) and k3_matmul with T tokens (prefill: GFLOP/s) for
 * every weight format, on synthetic weights, with the current OpenMP threads. */
#ifndef K3_KERNELS_KBENCH_H
#define K3_KERNELS_KBENCH_H

#include "quant/wmat.h"

#include <stdint.h>

typedef struct {
    char name[32];     /* "bf16", "affine4/64", ... */
    double mv_gbs;     /* matvec: weight bytes read per second / 1e9 */
    double mv_cpu_gbs; /* matvec: weight bytes per CPU second of all threads / 1e9 (per core) */
    double mv_gflops;  /* matvec: 2*rows*cols / s / 1e9 */
    double mm_gflops;  /* matmul with T tokens */
    uint64_t mv_bytes; /* weight bytes of the matvec matrix */
} k3_kbench_row;

/* Benchmark one format (bits/group for affine; ignored otherwise) with a
 * matvec matrix of about mv_bytes of weights and a rows x cols matmul with T
 * tokens. Returns 0 or -1 + k3_seterr (out of memory). */
int k3_kbench_format(k3_wfmt fmt, int bits, int group, uint64_t mv_bytes, int64_t mm_rows,
                     int64_t mm_cols, int64_t T, int reps, k3_kbench_row *out);

#endif
