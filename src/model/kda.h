/* kda.h — the variants of the KDA delta-rule step (kda.c), exposed for tests.
 *
 * k3_kda_step (model.h) picks one at run time: the AVX2 step where the CPU
 * has AVX2+FMA and K3_KERNELS is not "ref", the scalar reference otherwise.
 * Both keep S in f32 and accumulate the two dot products of each row (S k
 * after the decay, S q after the update) in double; they differ only in the
 * order of those double sums and in the update S += delta k being one FMA
 * rounding in the vector step (two roundings in the reference). */
#ifndef K3_MODEL_KDA_H
#define K3_MODEL_KDA_H

/* Largest dk the vector step takes (its k and q are widened to double on the
 * stack); larger heads use the reference. */
#define K3_KDA_VEC_MAX_DK 512

/* The scalar reference: S [dv, dk] row-major (row i = value index). */
void k3_kda_step_ref(float *S, int dk, int dv, const float *q, const float *k, const float *v,
                     const float *alpha, float beta, float *y);
/* The AVX2+FMA step; call only where k3_cpu_has_avx2() and dk <= K3_KDA_VEC_MAX_DK. */
void k3_kda_step_avx2(float *S, int dk, int dv, const float *q, const float *k, const float *v,
                      const float *alpha, float beta, float *y);

#endif
