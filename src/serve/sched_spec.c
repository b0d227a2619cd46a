/* sched_spec.c — speculative decoding in the serve scheduler: drafts for a
 * job's decode item, and taking a verify item's rows in order afterwards
 * (sched_spec.h). */
#include "serve/sched_spec.h"

#include <stdlib.h>
#include <string.h>

#include "base/mem.h"
#include "gen/constrain.h"
#include "gen/draft.h"
#include "gen/gen_opts.h"
#include "gen/sampler.h"
#include "gen/spec.h"

typedef struct serve_spec serve_spec;

struct serve_spec {
    k3_drafter *d;
    int kmax;
    int64_t pushed;                /* tokens of prompt + generated the drafter has */
    int32_t row[K3_DRAFT_MAX + 1]; /* the verify item's tokens: pending, then drafts */
    float *logits;                 /* [(kmax + 1), vocab], from the first drafts on */
    double *probs;                 /* [vocab] scratch of the sampling rule (NULL when greedy) */
    int32_t x;                     /* the draft at the row being taken, or -1 */
};

int serve_spec_kmax(const serve_req *q, int server_kmax, const k3_model *m) {
    if (q->speculative == 0 || !k3_model_can_speculate(m)) return 0;
    if (q->speculative == 1 && !server_kmax) return K3_GEN_SPEC_MAX;
    return server_kmax;
}

void serve_spec_start(serve_job *j, int kmax, const double *cost) {
    if (kmax <= 0) return;
    serve_spec *sp = k3_xcalloc(1, sizeof *sp);
    sp->kmax = kmax > K3_DRAFT_MAX ? K3_DRAFT_MAX : kmax;
    sp->d = k3_drafter_new(sp->kmax);
    k3_drafter_set_cost(sp->d, cost);
    sp->x = -1; /* the buffers come with the first drafts: many requests never draft */
    j->spec = sp;
}

void serve_spec_end(serve_job *j) {
    serve_spec *sp = j->spec;
    if (!sp) return;
    k3_drafter_free(sp->d);
    free(sp->logits);
    free(sp->probs);
    free(sp);
    j->spec = NULL;
}

/* The drafter learns the tokens it has not seen: the prompt once, then each
 * generated token (the pending one included, so drafts continue after it). */
static void sync_tokens(serve_spec *sp, const serve_job *j) {
    for (; sp->pushed < j->n_prompt + j->n_gen; sp->pushed++) {
        int64_t i = sp->pushed;
        k3_drafter_push(sp->d, i < j->n_prompt ? j->prompt[i] : j->gen[i - j->n_prompt]);
    }
}

/* How many of the first k drafts are token ids of the model (a test-mode
 * forced id may not be; the drafter repeats what it saw). */
static int64_t valid_ids(const int32_t *d, int64_t k, int vocab) {
    int64_t n = 0;
    while (n < k && d[n] >= 0 && d[n] < vocab) n++;
    return n;
}

int64_t serve_spec_draft(serve_job *j, k3_batch_item *it, int64_t room, int vocab) {
    serve_spec *sp = j->spec;
    if (!sp || j->closing) return 0;
    sync_tokens(sp, j);
    int64_t k = k3_drafter_propose(sp->d, sp->row + 1);
    int64_t left = (int64_t)j->req.max_tokens - j->n_gen - 1; /* the step emits k + 1 at most */
    if (k > left) k = left;
    if (k > room) k = room;
    k = valid_ids(sp->row + 1, k, vocab);
    if (k > 0 && j->constraint) /* drafts the grammar refuses could never be kept */
        k = k3_constraint_fits(j->constraint, sp->row + 1, (int)k);
    if (k <= 0) return 0;
    if (!sp->logits) {
        sp->logits = k3_xmalloc(sizeof(float) * (size_t)(sp->kmax + 1) * (size_t)vocab);
        if (j->req.temperature > 0) sp->probs = k3_xmalloc(sizeof(double) * (size_t)vocab);
    }
    sp->row[0] = j->pending;
    *it = (k3_batch_item){
        .seq = j->seq, .tokens = sp->row, .n = 1 + k, .logits = sp->logits, .verify = 1};
    return k;
}

int32_t serve_spec_sample(serve_job *j, int vocab) {
    serve_spec *sp = j->spec;
    if (!sp || sp->x < 0 || !sp->probs) /* no draft here, or greedy: y == x decides */
        return k3_sampler_sample(j->sampler, j->logits);
    return k3_spec_sample(j->sampler, j->logits, sp->x, sp->probs, vocab);
}

int serve_spec_verified(serve_sched *s, serve_job *j, const k3_batch_item *it, int vocab,
                        serve_spec_emit_fn emit, k3_buf *b, serve_spec_counts *c) {
    serve_spec *sp = j->spec;
    const int64_t k = it->n - 1;
    int64_t r = 0;
    c->verify_steps++;
    c->drafted += (uint64_t)k;
    for (;; r++) { /* row r: the choice after row[r] */
        int32_t x = r < k ? sp->row[1 + r] : -1;
        sp->x = x;
        memcpy(j->logits, sp->logits + r * vocab, sizeof(float) * (size_t)vocab);
        c->emitted++;
        if (emit(s, j, b)) return 1; /* finished: j may be gone, its sequence with it */
        sp->x = -1;
        if (x < 0 || j->gen[j->n_gen - 1] != x) break;
        c->accepted++;
        if (j->closing) break; /* the kept draft was a stop token: it rides next step */
    }
    return k3_seq_spec_commit(j->seq, 1 + r) ? -1 : 0;
}
