/* replay.h — the replay benchmark of speculative decoding (k3 bench --replay).
 *
 * Random weights cannot write realistic text, so acceptance is measured on
 * real text: a prompt is prefilled, then an answer is generated with the
 * model's choice at every position forced to the answer's next token. Every
 * other part is the real path: the drafter, the verify forward and its cost,
 * the rollback. Run once with plain decoding and once speculatively, the two
 * passes emit the same tokens and their times compare like for like. */
#ifndef K3_GEN_REPLAY_H
#define K3_GEN_REPLAY_H

#include "k3.h"

#include <stddef.h>
#include <stdint.h>

typedef struct k3_replay_pass {
    double s;                    /* decode time (after the prefill and the first token) */
    int64_t tokens;              /* tokens decoded in that time */
    int64_t steps, verify_steps; /* forward steps, those with drafts */
    int64_t drafted, accepted;
    int64_t by_k[17];           /* verify steps by their number of drafts (gen/spec.h) */
    double verify_s, plain_s;   /* time in verify steps, in plain steps */
    double cpu_s, verify_cpu_s; /* process CPU time of the decode and of its verify steps: the
                                   work, less sensitive than wall time to a loaded machine */
    uint64_t digest; /* with digest asked for: a hash of the bytes of every logits row the
                        forced choice saw, in order (equal states give equal digests) */
} k3_replay_pass;

/* A line's two passes and the one prefill they share. */
typedef struct k3_replay_line {
    k3_replay_pass plain, spec;
    double prefill_s, prefill_cpu_s; /* the prompt's prefill, wall and process CPU time */
} k3_replay_line;

/* A new sequence that has read prompt[0..np) (np may be 0): the state a
 * pass starts from. NULL + k3_errmsg. */
k3_seq *k3_replay_prefill(k3_model *m, const int32_t *prompt, size_t np);

/* One pass from a copy of start, a sequence of m that has read exactly
 * prompt[0..np) (start itself is not changed), over answer[0..na) (na >= 2)
 * with at most spec_max drafts per step (0: plain), chosen by the verify
 * costs cost[0..K3_DRAFT_MAX] (NULL: the model's, k3_spec_cost_default). digest: also hash the
 * logits (r->digest; a few operations per logit inside the timed steps, so
 * off when timing). 0 or -1 + k3_errmsg. */
int k3_replay_pass_run(k3_model *m, const k3_seq *start, const int32_t *prompt, size_t np,
                       const int32_t *answer, size_t na, int spec_max, const double *cost,
                       int digest, k3_replay_pass *r);

/* A whole line: the prompt prefilled once, then the plain pass and the
 * speculative one (spec_max drafts) from copies of that one state, so both
 * start from bitwise the same caches and the prefill is paid once. */
int k3_replay_line_run(k3_model *m, const int32_t *prompt, size_t np, const int32_t *answer,
                       size_t na, int spec_max, const double *cost, int digest,
                       k3_replay_line *out);

/* Verify cost: after prefilling prompt, the median time of a verify pass of
 * 1 + k rows (k = 1..kmax, keeping one row) over that of a plain step,
 * rounds interleaved; cost[k] for k = 0..kmax (cost[0] = 1), by wall time and
 * (cpu) by process CPU time. */
int k3_replay_verify_cost(k3_model *m, const int32_t *prompt, size_t np, int kmax, int rounds,
                          double *cost, double *cpu);

/* Of the bytes one token reads, those of its routed experts. */
double k3_replay_routed_bytes(const k3_model *m);

#endif
