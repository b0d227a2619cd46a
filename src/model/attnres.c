/* attnres.c — Block Attention Residuals mixing (spec §2.3): per token, softmax
 * over candidates of (c_j . w) / rms(c_j), then the weighted sum of the raw
 * (un-normalized) candidates.
 *
 * The fast mix reduces c_j . w and c_j . c_j in double lanes over fixed chunks
 * of ATTNRES_CHUNK columns and adds the chunk sums in chunk order, so the
 * logits are the same whichever thread computed which chunk. Many tokens:
 * threads split the tokens. One token (decode): threads split the chunks of D
 * for the sums and for the weighted sum, and every thread forms the same
 * softmax from the shared chunk sums. Both give the bits of one thread. */
#include "base/par.h"
#include "kernels/kernels.h"
#include "model/model.h"

#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#define ATTNRES_MAX 4096
#define ATTNRES_CHUNK 256 /* columns per partial sum: fixed, never the thread count */

void k3_attnres_mix_ref(float *const *R, int n, const float *p, const float *w, int64_t T,
                        int64_t D, double eps, float *out) {
    if (n == 0) {
        memcpy(out, p, sizeof(float) * (size_t)(T * D));
        return;
    }
#pragma omp parallel for schedule(static)
    for (int64_t t = 0; t < T; t++) {
        double logit[ATTNRES_MAX + 1], mx = -INFINITY, sum = 0;
        for (int j = 0; j <= n; j++) {
            const float *v = (j < n ? R[j] : p) + t * D;
            double dot = 0, ss = 0;
            for (int64_t d = 0; d < D; d++) {
                dot += (double)v[d] * w[d];
                ss += (double)v[d] * v[d];
            }
            logit[j] = dot / sqrt(ss / (double)D + eps);
            mx = logit[j] > mx ? logit[j] : mx;
        }
        for (int j = 0; j <= n; j++) sum += (logit[j] = exp(logit[j] - mx));
        float *o = out + t * D;
        for (int64_t d = 0; d < D; d++) {
            double a = 0;
            for (int j = 0; j <= n; j++) a += logit[j] * (double)(j < n ? R[j] : p)[t * D + d];
            o[d] = (float)(a / sum);
        }
    }
}

/* Softmax weights of the n+1 candidates from their chunk sums part[j][c][2]. */
static void weights_from_sums(const double *part, int n, int nc, int64_t D, double eps,
                              double *wt) {
    double mx = -INFINITY, sum = 0;
    for (int j = 0; j <= n; j++) {
        double dot = 0, ss = 0;
        for (int c = 0; c < nc; c++) {
            dot += part[(j * nc + c) * 2];
            ss += part[(j * nc + c) * 2 + 1];
        }
        wt[j] = dot / sqrt(ss / (double)D + eps);
        mx = wt[j] > mx ? wt[j] : mx;
    }
    for (int j = 0; j <= n; j++) sum += (wt[j] = exp(wt[j] - mx));
    for (int j = 0; j <= n; j++) wt[j] /= sum;
}

static int64_t chunk_end(int c, int64_t D) {
    int64_t e = (int64_t)(c + 1) * ATTNRES_CHUNK;
    return e < D ? e : D;
}

/* The chunk sums of candidate row v (kernels/vmath.h) into part[c][2]. */
static void chunk_sums(const float *v, const float *w, int c, int64_t D, double *part) {
    const int64_t d0 = (int64_t)c * ATTNRES_CHUNK;
    k3_vdot_sumsq_d(v + d0, w + d0, chunk_end(c, D) - d0, &part[0], &part[1]);
}

/* Token t entirely on the calling thread; part has (n+1)*nc*2 doubles. The
 * n+1 candidates are the block snapshots and the partial sum, in order. */
static void mix_token(const float *const *cand, int n, const float *w, int64_t t, int64_t D,
                      double eps, double *part, double *wt, float *out) {
    int nc = (int)((D + ATTNRES_CHUNK - 1) / ATTNRES_CHUNK);
    for (int j = 0; j <= n; j++)
        for (int c = 0; c < nc; c++) chunk_sums(cand[j] + t * D, w, c, D, &part[(j * nc + c) * 2]);
    weights_from_sums(part, n, nc, D, eps, wt);
    k3_vmix_d(cand, n + 1, t * D, wt, D, out + t * D);
}

/* mix_one_split: one token, chunks of D split over the threads (the decode
 * step), from this many candidate floats ((n + 1) x D) on: below it the mix is a few
 * microseconds on one thread, less than the region's start and its three
 * barriers (each a futex call in libgomp). Same bits either way: the chunk
 * sums and each output element do not depend on the split. */
#define ONE_SPLIT_MIN 65536

static void mix_one_split(const float *const *cand, int n, const float *w, int64_t D, double eps,
                          float *out) {
    int nc = (int)((D + ATTNRES_CHUNK - 1) / ATTNRES_CHUNK);
    double part[2 * 64 * 32]; /* (n+1) * nc <= 2048: checked by the caller */
#pragma omp parallel
    {
        double wt[64];
#pragma omp for schedule(static)
        for (int k = 0; k < (n + 1) * nc; k++) chunk_sums(cand[k / nc], w, k % nc, D, &part[k * 2]);
        weights_from_sums(part, n, nc, D, eps, wt); /* after the for's barrier: same on all */
#pragma omp for schedule(static)
        for (int c = 0; c < nc; c++) {
            const int64_t d0 = (int64_t)c * ATTNRES_CHUNK;
            k3_vmix_d(cand, n + 1, d0, wt, chunk_end(c, D) - d0, out + d0);
        }
    }
}

/* The tokens of mix_tokens, shared by the threads of a region or, called
 * outside one, all on the calling thread (the orphaned `omp for`). */
static void mix_token_rows(const float *const *cand, int n, const float *w, int64_t T, int64_t D,
                           double eps, float *out) {
    int nc = (int)((D + ATTNRES_CHUNK - 1) / ATTNRES_CHUNK);
    double part_s[2 * 64 * 32], wt_s[64];
    double *part = part_s, *wt = wt_s;
    double *heap = NULL;
    if ((n + 1) * nc > 64 * 32 || n + 1 > 64) { /* bigger than any K3 config: heap */
        heap = malloc(sizeof(double) * (size_t)((n + 1) * nc * 2 + n + 1));
        part = heap;
        wt = heap + (n + 1) * nc * 2;
    }
#pragma omp for schedule(static)
    for (int64_t t = 0; t < T; t++) mix_token(cand, n, w, t, D, eps, part, wt, out);
    free(heap);
}

static void mix_tokens(const float *const *cand, int n, const float *w, int64_t T, int64_t D,
                       double eps, float *out) {
    if (k3_par_direct(T * D * (n + 1) >= 32768)) { /* no region of one thread (base/par.h) */
        mix_token_rows(cand, n, w, T, D, eps, out);
        return;
    }
#pragma omp parallel
    mix_token_rows(cand, n, w, T, D, eps, out);
}

void k3_attnres_mix(float *const *R, int n, const float *p, const float *w, int64_t T, int64_t D,
                    double eps, float *out) {
    if (n == 0) {
        if (out != p) memcpy(out, p, sizeof(float) * (size_t)(T * D));
        return;
    }
    if (k3_kernels_active() == K3_KERNELS_REF) {
        k3_attnres_mix_ref(R, n, p, w, T, D, eps, out);
        return;
    }
    const float *cand[ATTNRES_MAX + 1]; /* the blocks, then the partial sum */
    for (int j = 0; j < n; j++) cand[j] = R[j];
    cand[n] = p;
    int nc = (int)((D + ATTNRES_CHUNK - 1) / ATTNRES_CHUNK);
    if (T == 1 && n + 1 <= 64 && (n + 1) * nc <= 64 * 32 &&
        k3_par_worth((n + 1) * D >= ONE_SPLIT_MIN))
        mix_one_split(cand, n, w, D, eps, out);
    else
        mix_tokens(cand, n, w, T, D, eps, out);
}
