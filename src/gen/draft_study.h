/* draft_study.h — what the drafter keeps on a forced answer, and what any
 * n-gram drafter could keep, without a model (k3 bench --replay --draft-only).
 *
 * In the replay benchmark the target's choice at every position is forced
 * to the answer's next token, so which drafts are kept depends only on the
 * drafter and the text. k3_draft_study_run feeds the drafter exactly as a
 * speculative replay pass does and counts its steps. k3_draft_study_depth
 * gives each answer token the longest context m for which the m tokens
 * before it, followed by it, occurred earlier in prompt + answer: a drafter
 * matching m-grams can propose that token only where its depth is >= m.
 * k3_draft_study_oracle spends verify steps optimally on those tokens: the
 * least cost any n-gram drafter matching >= m tokens could reach. Costs are
 * in plain steps: cost[k] is a verify step with k drafts, cost[0] = 1. */
#ifndef K3_GEN_DRAFT_STUDY_H
#define K3_GEN_DRAFT_STUDY_H

#include "gen/draft.h"
#include "gen/replay.h"
#include "gen/spec_cost.h"

#include <stddef.h>
#include <stdint.h>

/* Depths are counted up to this context length. */
#define K3_STUDY_DEPTH_MAX 8

/* The drafter's steps over answer[1..na) after prompt[0..np) and answer[0],
 * as k3_replay_pass_run with spec_max kmax and the verify costs cost (NULL:
 * the drafter's default) counts them (times left 0). */
void k3_draft_study_run(const int32_t *prompt, size_t np, const int32_t *answer, size_t na,
                        int kmax, const double *cost, k3_replay_pass *r);

/* depth[i] for each answer token (0..K3_STUDY_DEPTH_MAX; 0 also for a token
 * never seen before). Linear time and memory. */
void k3_draft_study_depth(const int32_t *prompt, size_t np, const int32_t *answer, size_t na,
                          uint8_t *depth);

/* The cost in plain steps of a pass's steps: plain steps at 1 and verify
 * steps at cost[k]. */
double k3_draft_study_cost(const k3_replay_pass *r, const double *cost);

/* The least cost of decoding answer[1..na) when a verify step of k <= kmax
 * drafts may draft only tokens of depth >= m and keeps all it drafts; its
 * steps into *best. */
double k3_draft_study_oracle(const uint8_t *depth, size_t na, int m, int kmax, const double *cost,
                             k3_replay_pass *best);

/* A verify-cost table (k3 bench --cost NAME=c1,...,cn): c[k] plain steps for
 * a verify step of k drafts, c[0] = 1. */
typedef struct {
    char name[24]; /* 1..23 printable ASCII characters, no spaces */
    double c[K3_DRAFT_MAX + 1];
    int n; /* c[1..n] given, 1 <= n <= K3_DRAFT_MAX */
} k3_study_cost;

/* Parse "NAME=c1,c2,...,cn" (arg: any bytes, NUL-terminated): plain decimal
 * numbers in K3_SPEC_COST_MIN..K3_SPEC_COST_MAX (gen/spec_cost.h, the one
 * parser of cost lists), no spaces, no empty item. 0, or -1 + k3_errmsg quoting the part
 * that is wrong. */
int k3_study_cost_parse(const char *arg, k3_study_cost *out);

#endif
