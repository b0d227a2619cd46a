/* sched_spec.h — speculative decoding inside the continuous-batching
 * scheduler (sched.c).
 *
 * A decoding job with speculation on keeps an n-gram drafter over its own
 * tokens (prompt, then everything generated; gen/draft.h). When the batch is
 * built, the job's item becomes a verify item (k3_batch_item.verify): the
 * pending token plus up to k drafts, in the same k3_forward_batch call as the
 * other jobs' decodes and prompt chunks, with logits for every row. After the
 * step the rows are taken in order, each through the scheduler's ordinary
 * per-token path (sampling with penalties and logit_bias, the grammar mask,
 * stops, max_tokens, EOS, output parsing): a draft is kept while the token
 * chosen at its row equals it; the first row that differs, or the row after
 * the last draft, gives the step's last token. Then the sequence keeps the
 * rows that were used (k3_seq_spec_commit). So the emitted tokens are those
 * plain decoding with the same choices emits; greedy output equals plain
 * greedy output token for token, and sampling uses the rule of gen/spec.h,
 * which keeps the distribution of plain sampling.
 *
 * Drafts are cut to what the step may still emit (max_tokens), to the step's
 * token room, and under a grammar (json_schema, tool arguments) at the first
 * draft the grammar refuses from its present state; the grammar itself only
 * advances over the tokens emitted. */
#ifndef K3_SERVE_SCHED_SPEC_H
#define K3_SERVE_SCHED_SPEC_H

#include <stdint.h>

#include "base/buf.h"
#include "k3.h"
#include "serve/sched.h"

/* What speculation did, summed into the scheduler's counters. */
typedef struct {
    uint64_t verify_steps; /* verify items stepped */
    uint64_t drafted;      /* draft tokens fed */
    uint64_t accepted;     /* draft tokens kept (not counted: a draft the job ended on) */
    uint64_t emitted;      /* tokens emitted by verify items (accepted + their last tokens) */
} serve_spec_counts;

/* The drafts per step for a request: the server's server_kmax (0: off),
 * unless the request says "speculative": false (0) or true (the server's,
 * or k3 generate's default K3_GEN_SPEC_MAX when the server's is off); 0 on
 * a model that cannot speculate (pipeline parallel). */
int serve_spec_kmax(const serve_req *q, int server_kmax, const k3_model *m);

/* Start speculation for a job (kmax 0: none); the job then has j->spec,
 * whose drafter weighs the verify costs cost[0..K3_DRAFT_MAX] (the engine's
 * spec_cost). */
void serve_spec_start(serve_job *j, int kmax, const double *cost);
/* Free the job's speculation state (job_finish). */
void serve_spec_end(serve_job *j);

/* Make j's decode item `it` (one pending token) a verify item when the
 * drafter has drafts, within room more tokens. Returns the drafts added. */
int64_t serve_spec_draft(serve_job *j, k3_batch_item *it, int64_t room, int vocab);

/* The token the sampler draws from j->logits: plain sampling, or the
 * speculative rule for the draft at the row being taken. */
int32_t serve_spec_sample(serve_job *j, int vocab);

/* The scheduler's per-token path: j->logits hold a row's logits; choose,
 * emit, and return 1 when the job left (it may be freed), else 0. */
typedef int (*serve_spec_emit_fn)(serve_sched *s, serve_job *j, k3_buf *b);

/* After the step: take the verify item's rows through emit, then keep the
 * rows used. Returns 1 when the job left, 0 when it goes on, -1 + k3_errmsg
 * when the sequence could not be rolled back (the caller fails the job). */
int serve_spec_verified(serve_sched *s, serve_job *j, const k3_batch_item *it, int vocab,
                        serve_spec_emit_fn emit, k3_buf *b, serve_spec_counts *c);

#endif
