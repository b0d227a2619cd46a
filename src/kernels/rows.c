/* rows.c — what the decode kernels share (avx2.h): k3_parallel_rows, which
 * hands 16-row blocks to a kernel's row-range worker, on the calling thread
 * or over the OpenMP threads in contiguous shares with stealing (steal.h),
 * and the per-group sums of x that every affine kernel's bias term needs.
 * A leaf under the kernel files, so that none of them calls another for
 * these. */
#include "kernels/avx2.h"
#include "kernels/avx2_decode.h"
#include "kernels/runtime.h"
#include "kernels/steal.h"

#include <omp.h>

/* Serial below this many weights: a parallel region costs more than it saves. */
#define K3_PAR_MIN_WEIGHTS 32768
/* Weight bytes a thread claims at a time from a shared product (steal.h). */
#define K3_CLAIM_BYTES 65536

void k3_parallel_rows(const k3_rows_ctx *c, k3_rows_fn fn) {
    const int64_t R = c->W->rows, nb = (R + 15) / 16;
    if (R * c->W->cols < K3_PAR_MIN_WEIGHTS || k3_kernels_serial()) {
        fn(c, 0, R); /* the same per-row code as any split */
        return;
    }
    const int nt = omp_get_max_threads();
    if (nt > K3_STEAL_MAX || nb >= ((int64_t)1 << 32)) {
#pragma omp parallel for schedule(static)
        for (int64_t b = 0; b < nb; b++) fn(c, b * 16, b * 16 + 16 < R ? b * 16 + 16 : R);
        return;
    }
    /* contiguous shares of 16-row blocks, stolen from the back when a thread
     * is done (steal.h), claimed K3_CLAIM_BYTES of weights at a time */
    k3_wmat one = *c->W;
    one.rows = 1;
    const uint64_t bb = 16 * k3_wmat_bytes(&one);
    const int64_t per = bb && bb < K3_CLAIM_BYTES ? (int64_t)(K3_CLAIM_BYTES / bb) : 1;
    k3_steal st;
    k3_steal_init(&st, nt, nb, NULL);
#pragma omp parallel
    {
        const int tid = omp_get_thread_num();
        int64_t b, got;
        while ((b = k3_steal_next(&st, tid, per, &got)) >= 0)
            fn(c, b * 16, (b + got) * 16 < R ? (b + got) * 16 : R);
    }
}

/* Per-group sums of x, needed for the bias term of every affine row. */
K3_AVX2 void k3_avx2_group_sums(const float *x, int64_t K, int G, float *xsum) {
    for (int64_t g = 0; g < K / G; g++) {
        __m256 a = _mm256_setzero_ps();
        for (int j = 0; j < G; j += 8) a = _mm256_add_ps(a, _mm256_loadu_ps(x + g * G + j));
        xsum[g] = k3_hsum256(a);
    }
}
