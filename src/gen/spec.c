/* spec.c — speculative decode steps and the sampling rule (see spec.h). */
#include "gen/spec.h"

#include "base/err.h"
#include "base/mem.h"

#include <math.h>
#include <stdlib.h>

k3_spec *k3_spec_new(int kmax, int vocab) {
    k3_spec *sp = k3_xcalloc(1, sizeof *sp);
    sp->kmax = kmax < 0 ? 0 : kmax > K3_DRAFT_MAX ? K3_DRAFT_MAX : kmax;
    sp->V = vocab;
    sp->d = sp->kmax ? k3_drafter_new(sp->kmax) : NULL;
    sp->logits = k3_xmalloc(sizeof(float) * (size_t)(sp->kmax + 1) * (size_t)vocab);
    sp->reject_at = -1;
    return sp;
}

void k3_spec_free(k3_spec *sp) {
    if (!sp) return;
    k3_drafter_free(sp->d);
    free(sp->logits);
    free(sp);
}

void k3_spec_set_cost(k3_spec *sp, const k3_model *m, const double *cost) {
    if (!sp->d) return;
    double own[K3_DRAFT_MAX + 1];
    if (!cost) k3_spec_cost_default(m, own);
    k3_drafter_set_cost(sp->d, cost ? cost : own);
}

/* Bytes a step of t tokens reads, given what m's info says of its experts. */
static double step_bytes(const k3_model *m, const k3_model_info *in, int t) {
    double E = in->experts, k = in->experts_per_token, expert = (double)in->expert_bytes;
    double dense = (double)k3_model_active_bytes(m) - expert * k;
    double uni = E > 0 ? E * (1 - pow(1 - k / E, t)) : 0;
    return dense + expert * uni;
}

void k3_spec_cost_default(const k3_model *m, double *cost) {
    k3_model_info in;
    k3_model_get_info(m, &in);
    double plain = step_bytes(m, &in, 1);
    cost[0] = 1;
    for (int k = 1; k <= K3_DRAFT_MAX; k++)
        cost[k] = step_bytes(m, &in, 1 + k) / plain + K3_SPEC_STEP_COST + K3_SPEC_ROW_COST * k;
}

void k3_spec_push(k3_spec *sp, int32_t id) {
    if (sp->d) k3_drafter_push(sp->d, id);
}

/* The step's last token y: the drafter learns it, take sees it. */
static int finish(k3_spec *sp, int32_t y, k3_spec_take_fn take, void *ctx, int32_t *next) {
    k3_spec_push(sp, y);
    *next = y;
    return take(ctx, y);
}

/* No drafts: one plain decode step. */
static int plain_step(k3_spec *sp, k3_seq *s, int32_t id, k3_spec_choose_fn choose,
                      k3_spec_take_fn take, void *ctx, int32_t *next, int *stop) {
    if (k3_forward(s, &id, 1, sp->logits, 0)) return -1;
    int32_t y = choose(ctx, sp->logits, -1);
    if (y < 0) return -1;
    *stop = finish(sp, y, take, ctx, next);
    return 0;
}

int k3_spec_step(k3_spec *sp, k3_seq *s, int32_t id, k3_spec_choose_fn choose, k3_spec_take_fn take,
                 void *ctx, int32_t *next, int *stop) {
    *stop = 0;
    sp->steps++;
    int k = sp->d ? k3_drafter_propose(sp->d, sp->row + 1) : 0;
    if (!k) return plain_step(sp, s, id, choose, take, ctx, next, stop);
    sp->row[0] = id;
    if (k3_forward_spec(s, sp->row, 1 + k, sp->logits)) return -1;
    sp->verify_steps++;
    sp->by_k[k]++;
    sp->drafted += k;
    int j = 0; /* drafts kept */
    int32_t y = -1;
    for (; j <= k; j++) {
        int32_t x = j < k ? sp->row[1 + j] : -1;
        y = choose(ctx, sp->logits + (size_t)j * (size_t)sp->V, x);
        if (y < 0) {
            k3_seq_spec_commit(s, 1 + j);
            return -1;
        }
        if (x < 0 || y != x || j == sp->reject_at) break;
        k3_spec_push(sp, x);
        sp->accepted++;
        if (take(ctx, x)) { /* stopped at a kept draft: it is the last token, unfed */
            *next = x;
            *stop = 1;
            return k3_seq_spec_commit(s, 1 + j);
        }
    }
    if (k3_seq_spec_commit(s, 1 + j)) return -1;
    *stop = finish(sp, y, take, ctx, next);
    return 0;
}

double k3_spec_residual(const double *p, int vocab, int32_t x, double *r) {
    double rest = 0;
    for (int i = 0; i < vocab; i++) rest += i == x ? 0 : p[i];
    for (int i = 0; i < vocab; i++) r[i] = i == x || rest <= 0 ? 0 : p[i] / rest;
    return rest;
}

/* A uniform double in [0, 1) from the sampler's generator. */
static double unit(k3_sampler *smp) {
    return (double)(k3_sampler_next_u64(smp) >> 11) * 0x1p-53;
}

int32_t k3_spec_sample(k3_sampler *smp, const float *logits, int32_t x, double *probs, int vocab) {
    if (x < 0) return k3_sampler_sample(smp, logits);
    if (!k3_sampler_probs(smp, logits, probs))
        return k3_seterr("sampler: every logit is NaN or -inf");
    if (unit(smp) < probs[x]) return x;
    double rest = k3_spec_residual(probs, vocab, x, probs);
    if (rest <= 0) return x; /* p(x) = 1 to rounding: nothing else can be drawn */
    double u = unit(smp), cum = 0;
    int32_t last = -1;
    for (int i = 0; i < vocab; i++) {
        if (probs[i] <= 0) continue;
        last = i;
        cum += probs[i];
        if (u < cum) return i;
    }
    return last; /* u beyond the rounded total: the last candidate */
}

double k3_spec_step_bytes(const k3_model *m, int t) {
    k3_model_info in;
    k3_model_get_info(m, &in);
    return step_bytes(m, &in, t);
}
