/* plan.h — the memory one sequence needs at a given context, computed before
 * any is allocated, so that `--ctx-size` is checked against RAM and the
 * prompt cache's budget when the server starts, not when a long request
 * runs out of memory halfway. */
#ifndef K3_MODEL_PLAN_H
#define K3_MODEL_PLAN_H

#include "k3.h"

#include <stdint.h>

/* The longest context k3 plans for (K3's trained one). */
#define K3_CTX_MAX 1048576

/* Bytes one sequence holds at ctx tokens: its state block (every KDA layer's
 * conv and S, constant) plus each MLA layer's latent cache, r + rope values
 * per token (f32, or bf16 with --cache-type bf16), at the capacity it grows
 * to (it doubles from 64 tokens: the first 64 * 2^k >= ctx). Layers of this
 * rank only. */
uint64_t k3_seq_plan_bytes(const k3_model *m, int64_t ctx);

/* 0 when one sequence at ctx fits in avail bytes (0: MemAvailable now) and,
 * when cache_budget > 0, in the prompt cache's budget (a snapshot of it must
 * fit); otherwise -1 + k3_seterr with the figures and the option to change. */
int k3_seq_plan_check(const k3_model *m, int64_t ctx, uint64_t cache_budget, uint64_t avail);

#endif
