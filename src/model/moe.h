/* moe.h — the routed-experts stage of the latent MoE (moe.c), exposed for
 * tests and benchmarks. The model calls k3_moe_forward (model.h). */
#ifndef K3_MODEL_MOE_H
#define K3_MODEL_MOE_H

#include "model/model.h"

/* ylat [T, X] = this rank's partial of the routed experts on xin [T, X]
 * (router on x [T, D]): per column block b (rowpar.h) the sum over experts,
 * in ascending expert order and in double, of wt * expert_b(tokens), then the
 * blocks' tree sum. The blocks run in one parallel region. */
void k3_routed_experts(const k3_model *m, const k3_moe_w *w, const float *x, const float *xin,
                       int64_t T, int64_t X, float *ylat);
/* The same arithmetic, one block and one expert after the other with the
 * threaded kernels (the pre-parallel code): the bitwise reference. */
void k3_routed_experts_ref(const k3_model *m, const k3_moe_w *w, const float *x, const float *xin,
                           int64_t T, int64_t X, float *ylat);

/* Experts that get 2..n tokens use the few-token kernel (k3_matmul_few);
 * more tokens use the panel kernel, one token the matvec. 0 turns the
 * few-token kernel off (then the results are bitwise those of k3_matmul).
 * Default 8. Not thread-safe to change while a forward pass runs. */
void k3_moe_set_few_tokens(int n);

#endif
