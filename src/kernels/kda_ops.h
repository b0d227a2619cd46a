/* kda_ops.h — the recurrent ops of Kimi Delta Attention: the causal short
 * conv of a group of channels and the gated delta-rule state step of one
 * head. Each has a scalar reference (K3_KERNELS=ref) and an AVX2 version
 * (kda_ops_avx2.c) chosen at run time.
 *
 * The conv: the vector version (8 channels, kernel 4, the release value)
 * keeps the reference's double products and sums in the same order, so it
 * gives the reference's bits. The step: both keep S in f32 and accumulate
 * the two dot products of each row (S k after the decay, S q after the
 * update) in double; they differ only in the order of those double sums and
 * in the update S += delta k being one FMA rounding in the vector step (two
 * roundings in the reference). */
#ifndef K3_KERNELS_KDA_OPS_H
#define K3_KERNELS_KDA_OPS_H

#include <stdint.h>

/* The causal conv of n adjacent channels over T tokens, in place: z[t*ld + c]
 * (c < n) becomes sum_j w[c*K + j] * input(t - K + 1 + j), accumulated in
 * double, where the K-1 inputs before t = 0 are state[j*sld + c] (oldest
 * first; updated to the last K-1 inputs). */
void k3_conv_channels(float *z, int64_t T, int64_t ld, int64_t n, const float *w, int K,
                      float *state, int64_t sld);
/* The reference: one channel at a time. */
void k3_conv_channels_ref(float *z, int64_t T, int64_t ld, int64_t n, const float *w, int K,
                          float *state, int64_t sld);

/* Largest dk the vector step takes (its k and q are widened to double on the
 * stack); larger heads use the reference. */
#define K3_KDA_VEC_MAX_DK 512

/* One gated delta-rule step for one head: S [dv, dk] row-major (row i = value
 * index); per row, S_i *= alpha, delta = beta (v_i - S_i . k), S_i += delta k,
 * y_i = S_i . q. The vector step where it applies, else the reference. */
void k3_kda_step(float *S, int dk, int dv, const float *q, const float *k, const float *v,
                 const float *alpha, float beta, float *y);
/* The scalar reference. */
void k3_kda_step_ref(float *S, int dk, int dv, const float *q, const float *k, const float *v,
                     const float *alpha, float beta, float *y);

#endif
