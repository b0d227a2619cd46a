/* spec.h — speculative decoding from the context: one decode step that feeds
 * the pending token with the drafter's proposals through one verify pass
 * (k3_forward_spec), keeps the tokens the target model itself would have
 * chosen, and rolls the sequence back to them (k3_seq_spec_commit).
 *
 * The choice at each row is the caller's (choose): greedy, the sampling rule
 * below, or a forced answer (the replay benchmark). A draft is kept when the
 * choice at its row equals it; the first row whose choice differs, or the row
 * after the last draft, gives the step's last token. So the emitted tokens
 * are those plain decoding with the same choices emits, and each is handed to
 * take() in order, which may stop generation at any of them.
 *
 * Sampling (k3_spec_sample): a draft x is accepted with probability p(x)
 * under the sampler's processed distribution p (penalties, filters,
 * temperature); on rejection the token is drawn from p with x removed and
 * renormalized. Then P(token = t) = p(x)[t = x] + (1 - p(x)) r(t) = p(t):
 * the distribution of plain sampling, exactly. */
#ifndef K3_GEN_SPEC_H
#define K3_GEN_SPEC_H

#include "gen/draft.h"
#include "gen/spec_cost.h"
#include "gen/sampler.h"
#include "k3.h"

#include <stdint.h>

/* The token chosen at a row with these logits; draft is the drafted token at
 * that row or -1. */
typedef int32_t (*k3_spec_choose_fn)(void *ctx, const float *logits, int32_t draft);
/* A token is emitted; non-zero stops generation there (that token is then
 * the last one, not fed to the sequence). */
typedef int (*k3_spec_take_fn)(void *ctx, int32_t id);

typedef struct k3_spec {
    k3_drafter *d; /* NULL: plain decoding */
    int kmax, V;
    float *logits; /* [(kmax + 1), V] */
    int32_t row[K3_DRAFT_MAX + 1];
    int64_t steps, verify_steps;    /* decode steps, those with drafts */
    int64_t drafted, accepted;      /* draft tokens proposed, kept */
    int64_t by_k[K3_DRAFT_MAX + 1]; /* verify steps by their number of drafts */
    int reject_at; /* test hook: >= 0 rejects the draft at this row whatever the choice */
} k3_spec;

/* kmax 0: plain decoding through the same loop. */
k3_spec *k3_spec_new(int kmax, int vocab);
void k3_spec_free(k3_spec *sp);
/* The verify costs the drafter weighs (k3_drafter_set_cost): cost[k] for
 * k = 0..K3_DRAFT_MAX in plain steps; NULL: m's (k3_spec_cost_default). */
void k3_spec_set_cost(k3_spec *sp, const k3_model *m, const double *cost);

/* A model's default cost table, deterministic (never timed): a verify step
 * of k drafts reads the weights of its 1 + k tokens (the dense ones once,
 * the union of the routed experts they pick: k3_spec_step_bytes, over a
 * plain step's), plus K3_SPEC_STEP_COST of a plain step for taking the
 * verify path at all and K3_SPEC_ROW_COST per draft for the rows' compute.
 * Both constants are the bench preset's at 1 thread on this VM
 * (bench/RESULTS.md): `k3 bench --verify-cost 8` gave 2.09 2.22 2.73 3.31
 * 3.83 3.69 4.32 4.73 for k = 1..8 (wall; bytes 1.20 .. 2.05), and replay
 * passes whose verify steps were mostly of one draft measured 1.93-2.0 CPU.
 * The real slice at 2 threads measured 1.09-1.18 for one draft and 0.04-0.10
 * per draft beyond its bytes, so there the default drafts less than it could
 * (never more): pass the measured table (`--spec-cost`) to use it fully. */
#define K3_SPEC_STEP_COST 0.4
#define K3_SPEC_ROW_COST 0.3
void k3_spec_cost_default(const k3_model *m, double *cost);
/* Bytes of weights a step of t tokens reads when each token picks top_k of
 * the routed experts uniformly and independently (the expected union). */
double k3_spec_step_bytes(const k3_model *m, int t);

/* A token of the sequence's context (prompt, and the first sampled token). */
void k3_spec_push(k3_spec *sp, int32_t id);

/* One step from the pending token id (already taken, not yet fed): feeds it
 * (with drafts), emits one or more tokens through take, sets *next to the
 * last one emitted (not fed) and *stop if take stopped. 0 or -1 + k3_errmsg. */
int k3_spec_step(k3_spec *sp, k3_seq *s, int32_t id, k3_spec_choose_fn choose, k3_spec_take_fn take,
                 void *ctx, int32_t *next, int *stop);

/* The distribution left after rejecting x: r = p without x, renormalized
 * (r[x] = 0). Returns 1 - p(x), the mass r was scaled from (0: none left,
 * r all zero). */
double k3_spec_residual(const double *p, int vocab, int32_t x, double *r);

/* The sampling rule for a draft x (x < 0: plain k3_sampler_sample). probs
 * is scratch of vocab doubles. The token, or -1 + k3_errmsg. */
int32_t k3_spec_sample(k3_sampler *smp, const float *logits, int32_t x, double *probs, int vocab);

#endif
