/* sched.c — the continuous-batching worker and job bookkeeping (sched.h).
 *
 * One worker thread owns the model. Each step it admits queued jobs (up to
 * max_active), retires cancelled ones, starts new ones (prompt-cache lookup),
 * then builds one k3_forward_batch: every decoding job's pending token
 * (rotating which ones when there are more than max_batch), then prompt
 * chunks of the prefilling jobs in arrival order within max_step_tokens.
 * The first snapshot mark (end of a message in the rendered prompt, or the
 * prompt's end) in a chunk is taken inside the step (k3_batch_item.snap:
 * the state is written straight into a new sequence the cache keeps); a
 * chunk ends at the next mark after that, which the cache copies after the
 * step. The whole prompt is stored with its last logits, so an identical
 * repeat prefills nothing. After a turn that ended on a stop token, the stop
 * token rides in the next step and prompt + answer + stop is stored too (the
 * cache takes the sequence itself). Copies (a chunk's second mark, or a
 * restore from a hit) are queued, and the next step waits for those it
 * needs, making them on the worker's threads (pcache.h): a copy moves one
 * sequence state where a step reads every weight, so waiting for it costs
 * the others less than a step left out costs the job.
 * While it has no job the worker faults in the model's state reserve (k3.h),
 * a piece at a time, so a burst's copies land in blocks already touched. */
#include "serve/sched.h"

#include <errno.h>
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/err.h"
#include "base/mem.h"
#include "base/utf8safe.h"
#include "gen/constrain.h"
#include "gen/sampler.h"
#include "k3.h"
#include "serve/engine.h"
#include "serve/limits.h"
#include "serve/logprobs.h"
#include "serve/pcache.h"
#include "serve/sched_spec.h"
#include "text/xtml.h"

#include <jansson.h>

struct serve_sched {
    serve_engine *eng;
    serve_sched_opts o;
    serve_pcache *cache;
    pthread_t thread;
    pthread_mutex_t mu; /* guards queue, stop, stats */
    pthread_cond_t cv;
    serve_job *queue_head, *queue_tail;
    int n_queued, stop;
    serve_job **active; /* worker-private list, in arrival order */
    int n_active;
    int n_paused; /* jobs left out of this step for backpressure */
    serve_sched_stats st;
    unsigned long long seq_no;
    int rr;               /* rotation of the decodes when more than max_batch */
    int refill;           /* the state reserve may be short (worker, under mu) */
    k3_batch_item *items; /* one step's batch [max_batch] */
    serve_job **item_job; /* and whose item each is */
};

/* ---------------- scheduler state ---------------- */

static void stats_add(serve_sched *s, uint64_t *field, uint64_t v) {
    pthread_mutex_lock(&s->mu);
    *field += v;
    pthread_mutex_unlock(&s->mu);
}

/* Release the worker's hold on a job: free its model state, publish results. */
static void job_finish(serve_sched *s, serve_job *j, const char *finish, k3_buf *b) {
    j->usage.completion_tokens = (int)j->n_gen;
    if (j->output_ready)
        j->finish_reason = serve_output_end(&j->output, finish, &j->usage, b);
    else
        j->finish_reason = finish;
    serve_output_free(&j->output);
    j->output_ready = 0;
    free(j->gen);
    j->gen = NULL;
    free(j->marks);
    j->marks = NULL;
    if (j->seq) k3_seq_free(j->seq);
    if (j->sampler) k3_sampler_free(j->sampler);
    serve_spec_end(j);
    k3_free(j->logits);
    j->seq = NULL;
    j->sampler = NULL;
    j->logits = NULL;
    j->t_done = k3_now();
    serve_job_emit(j, b, 1);
    pthread_mutex_lock(&s->mu);
    s->st.requests_done++;
    pthread_mutex_unlock(&s->mu);
    serve_job_release(j);
}

/* Engine failure mid-request: a 500 for non-streamed requests; a stream
 * gets an SSE error event (what OpenAI sends) and [DONE]. */
static void job_fail(serve_sched *s, serve_job *j, k3_buf *b) {
    k3_utf8_snprintf(j->error, sizeof j->error, K3_UTF8_CTRL, "%s", k3_errmsg());
    fprintf(stderr, "k3 serve: generation failed: %s\n", j->error);
    serve_err e;
    serve_err_set(&e, 500, "server_error", NULL, "engine_error", "%s", j->error);
    j->output_ready = 0; /* the error replaces the rest of the response */
    serve_job_error_body(j, &e, b);
    job_finish(s, j, "error", b);
}

static k3_sampler *make_sampler(const serve_req *q, int vocab) {
    k3_sampler_params p = k3_sampler_defaults();
    p.temp = (float)q->temperature;
    p.top_k = q->top_k;
    p.top_p = (float)q->top_p;
    p.min_p = (float)q->min_p;
    p.rep_penalty = (float)q->repetition_penalty;
    p.presence_penalty = (float)q->presence_penalty;
    p.frequency_penalty = (float)q->frequency_penalty;
    p.bias = q->logit_bias;
    p.n_bias = q->n_logit_bias;
    p.seed = q->has_seed ? q->seed : (uint64_t)time(NULL) ^ (uint64_t)(uintptr_t)q;
    return k3_sampler_new(&p, vocab);
}

/* Snapshot marks: after every end-of-message token of the prompt (the end
 * of the system prompt and of each message as rendered) beyond what the
 * cache already gave, and the whole prompt. */
static void set_marks(serve_sched *s, serve_job *j, int64_t matched) {
    int32_t eom = s->eng->xtml.ctrl_id[K3_XC_EOM];
    j->marks = k3_xmalloc(sizeof *j->marks * (size_t)(j->n_prompt + 1));
    j->n_marks = j->next_mark = 0;
    if (!s->o.cache_budget) return;
    for (int64_t i = matched; i + 1 < j->n_prompt; i++)
        if (j->prompt[i] == eom) j->marks[j->n_marks++] = i + 1;
    j->marks[j->n_marks++] = j->n_prompt;
}

/* First step of a job: sequence (from the prompt cache when possible),
 * sampler, output pipeline, the stream's role chunk. A whole-prompt hit
 * brings the prompt's last logits: the job decodes at once. */
static int job_start(serve_sched *s, serve_job *j, k3_buf *b) {
    int64_t matched = 0;
    j->t_start = k3_now();
    j->logits = k3_alloc(sizeof(float) * (size_t)s->eng->vocab);
    if (!j->logits) return k3_seterr("out of memory");
    j->sampler = make_sampler(&j->req, s->eng->vocab);
    if (!j->sampler) return -1;
    for (int64_t i = 0; i < j->n_prompt; i++) k3_sampler_accept(j->sampler, j->prompt[i]);
    pthread_mutex_lock(&s->mu);
    unsigned long long no = ++s->seq_no;
    pthread_mutex_unlock(&s->mu);
    if (serve_output_init(&j->output, s->eng, &j->req, j->prompt, j->n_prompt, no, &j->render))
        return -1;
    j->output_ready = 1;
    /* last, as nothing may fail while the copier fills the sequence */
    j->seq = serve_pcache_lookup_async(s->cache, j->cache_scope, j->cache_scope_len, j->prompt,
                                       j->n_prompt, j->logits, &matched, &j->copy);
    if (!j->seq) j->seq = k3_seq_new(s->eng->model);
    j->n_fed = matched;
    j->usage.cached_tokens = (int)matched;
    j->usage.prompt_tokens = (int)j->n_prompt;
    set_marks(s, j, matched);
    serve_spec_start(j, serve_spec_kmax(&j->req, s->eng->spec_max, s->eng->model),
                     s->eng->spec_cost);
    serve_output_begin(&j->output, b);
    return 0;
}

/* The closing step fed the stop token: store prompt + answer + stop, which
 * is what the client's next turn renders as history. The cache takes the
 * sequence itself: the job is done with it. */
static void store_turn(serve_sched *s, serve_job *j) {
    int64_t n = j->n_prompt + j->n_gen;
    int32_t *ids = k3_xmalloc(sizeof *ids * (size_t)n);
    memcpy(ids, j->prompt, sizeof *ids * (size_t)j->n_prompt);
    memcpy(ids + j->n_prompt, j->gen, sizeof *ids * (size_t)j->n_gen);
    serve_pcache_insert_take(s->cache, j->cache_scope, j->cache_scope_len, ids, n, j->seq, NULL);
    j->seq = NULL;
    free(ids);
}

static int32_t next_token(serve_sched *s, serve_job *j) {
    if (j->forced) /* test mode: forced ids, then the stop token */
        return j->n_gen < j->n_forced ? j->forced[j->n_gen] : s->eng->stop_ids[0];
    if (!j->constraint) return serve_spec_sample(j, s->eng->vocab);
    /* structured output: only tokens that keep the output valid (and closable
     * within max_tokens) may be sampled */
    double t0 = k3_now();
    int allowed = k3_constraint_mask(j->constraint, j->logits, j->req.max_tokens - (int)j->n_gen);
    j->t_constrain += k3_now() - t0;
    if (allowed == 0) return s->eng->stop_ids[0];
    int32_t id = serve_spec_sample(j, s->eng->vocab);
    t0 = k3_now();
    if (k3_constraint_accept(j->constraint, id))
        fprintf(stderr, "k3 serve: constrained decoding: token %d does not fit the grammar\n", id);
    j->t_constrain += k3_now() - t0;
    return id;
}

/* j->logits are those of its last token: sample, emit, and either finish
 * (returns 1, the job is released) or keep the token for the next step. */
static int on_logits(serve_sched *s, serve_job *j, k3_buf *b) {
    int32_t id = next_token(s, j);
    if (j->n_gen == 0) j->t_first_token = k3_now();
    /* generated ids are kept for the end-of-turn snapshot */
    j->gen = k3_xrealloc(j->gen, sizeof(int32_t) * (size_t)(j->n_gen + 1));
    j->gen[j->n_gen++] = id;
    if (serve_engine_is_stop(s->eng, id)) {
        /* closed early to fit max_tokens: the answer was cut, say so */
        int cut = j->constraint && k3_constraint_budget_cut(j->constraint);
        if (s->o.cache_budget) { /* the stop token rides in the next step (store_turn) */
            j->closing = 1;
            j->close_reason = cut ? "length" : "stop";
            j->pending = id;
            j->decoding = 1;
            return 0;
        }
        job_finish(s, j, cut ? "length" : "stop", b);
        return 1;
    }
    if (j->req.logprobs)
        serve_output_logprob(
            &j->output,
            serve_logprob_entry(s->eng->tok, j->logits, s->eng->vocab, id, j->req.top_logprobs), b);
    int stopped = serve_output_token(&j->output, id, b);
    if (b->n) serve_job_emit(j, b, 0);
    if (stopped) {
        job_finish(s, j, "stop", b);
        return 1;
    }
    if (j->n_gen >= j->req.max_tokens || (j->deadline > 0 && k3_now() > j->deadline)) {
        job_finish(s, j, "length", b);
        return 1;
    }
    if (id < 0 || id >= s->eng->vocab) { /* test mode can force one: fail this job alone */
        k3_seterr("token id %d is out of range [0, %d)", id, s->eng->vocab);
        job_fail(s, j, b);
        return 1;
    }
    k3_sampler_accept_generated(j->sampler, id);
    j->pending = id;
    j->decoding = 1;
    return 0;
}

/* A cancelled job leaves: a stream just ends; a waiting non-stream client
 * (shutdown) gets a 503. */
static void job_cancel_now(serve_sched *s, serve_job *j, k3_buf *b) {
    j->output_ready = 0;
    if (!j->req.stream) {
        serve_err e;
        serve_err_set(&e, 503, "server_error", NULL, "cancelled",
                      "The request was cancelled (the server is shutting down).");
        serve_job_error_body(j, &e, b);
    }
    job_finish(s, j, "cancelled", b);
}

/* ---------------- the worker ---------------- */

/* The worker was idle and a request came: wait (under mu) until
 * batch_window_s after its arrival, or until a full set of jobs queues.
 * Clients that start together reach the server a few ms apart (8 streaming
 * clients on a 2-core machine: 0.5-10 ms, as the connection threads parse,
 * render and tokenize in turn); without the wait the first requests run a
 * step alone and the later ones wait for the whole of it (bench preset:
 * 80-380 ms; at K3's real size seconds). A request to an idle server pays
 * the window once; one that finds the server busy joins the next step. */
static void gather_burst(serve_sched *s) {
    double until = s->queue_head->t_submit + s->o.batch_window_s;
    while (!s->stop && s->n_queued < s->o.max_active) {
        double left = until - k3_now();
        if (left <= 0) break;
        struct timespec ts;
        serve_abs_deadline(&ts, left);
        if (pthread_cond_timedwait(&s->cv, &s->mu, &ts) == ETIMEDOUT) break;
    }
}

/* Move queued jobs into the active set; wait while there is nothing to do.
 * Returns 0 when the worker should exit. */
static int admit(serve_sched *s, int *stopping) {
    pthread_mutex_lock(&s->mu);
    s->st.active = s->n_active;
    int idle = s->n_active == 0 && !s->queue_head;
    while (!s->stop && !s->queue_head && s->n_active == 0) {
        if (s->refill) { /* idle: fault in the state reserve, a block at a time */
            pthread_mutex_unlock(&s->mu);
            int added = k3_model_state_refill(s->eng->model);
            pthread_mutex_lock(&s->mu);
            s->refill = added;
            continue;
        }
        pthread_cond_wait(&s->cv, &s->mu);
    }
    s->refill = 1; /* this round may take blocks */
    if (idle && s->queue_head && s->o.batch_window_s > 0) gather_burst(s);
    while (s->queue_head && s->n_active < s->o.max_active) {
        serve_job *j = s->queue_head;
        s->queue_head = j->next;
        if (!s->queue_head) s->queue_tail = NULL;
        s->n_queued--;
        j->next = NULL;
        s->active[s->n_active++] = j;
    }
    s->st.active = s->n_active;
    s->st.queued = s->n_queued;
    int go = !s->stop || s->n_active || s->queue_head;
    *stopping = s->stop;
    pthread_mutex_unlock(&s->mu);
    return go;
}

/* Issue 12 limits for a started job: a prompt past its --timeout deadline
 * ends with 504 (checked before each chunk); a stream whose client left
 * more than max_unread bytes untaken sits out this step (backpressure; the
 * idle timeout or --timeout ends it). Returns 1 when the job left. */
static int job_limits(serve_sched *s, serve_job *j, k3_buf *b) {
    if (!j->decoding && j->n_fed < j->n_prompt && serve_job_prefill_expired(j, k3_now())) {
        j->output_ready = 0;
        serve_job_timeout_body(j, s->o.timeout_s, b);
        job_finish(s, j, "timeout", b);
        return 1;
    }
    j->paused = j->req.stream && serve_job_unread_over(j, s->o.max_unread);
    if (j->paused && j->deadline > 0 && k3_now() > j->deadline) {
        job_finish(s, j, "length", b); /* a reader stalled past --timeout */
        return 1;
    }
    s->n_paused += j->paused;
    return 0;
}

/* Retire cancelled jobs, start new ones (a whole-prompt cache hit decodes
 * at once). Slots of jobs that left become NULL. */
static void prepare(serve_sched *s, int stopping, k3_buf *b) {
    s->n_paused = 0;
    for (int i = 0; i < s->n_active; i++) {
        serve_job *j = s->active[i];
        if (!j) continue;
        b->n = 0;
        j->paused = 1;                         /* until it is known to take part */
        serve_pcache_wait(s->cache, &j->copy); /* a snapshot of its seq at a mark */
        if (stopping) serve_job_cancel(j);
        if (serve_job_cancelled(j)) {
            if (j->closing) /* its answer is complete: only the turn's snapshot is skipped */
                job_finish(s, j, j->close_reason, b);
            else
                job_cancel_now(s, j, b);
            s->active[i] = NULL;
            continue;
        }
        if (!j->seq) {
            if (job_start(s, j, b)) {
                job_fail(s, j, b);
                s->active[i] = NULL;
                continue;
            }
            if (b->n) serve_job_emit(j, b, 0);
            serve_pcache_wait(s->cache, &j->copy); /* restoring from the cache */
        }
        /* the prompt is consumed (its last chunk, or a whole-prompt hit): sample */
        if (!j->decoding && j->n_fed == j->n_prompt && on_logits(s, j, b)) {
            s->active[i] = NULL;
            continue;
        }
        b->n = 0;
        if (job_limits(s, j, b)) s->active[i] = NULL;
    }
}

/* Whether an earlier item of this step (of nb) takes a snapshot of the same
 * ids as j's first `mark` prompt ids, in j's scope, with logits exactly when
 * j's would have them (at a prompt's end): a burst of requests with one new
 * system prompt stores it once, as the copies did (the cache keeps the first
 * and would free the others). */
static int snapped_in_step(const serve_sched *s, int nb, const serve_job *j, int64_t mark) {
    for (int k = 0; k < nb; k++) {
        const serve_job *o = s->item_job[k];
        if (!s->items[k].snap || o->n_fed + s->items[k].snap_at != mark ||
            (mark == o->n_prompt) != (mark == j->n_prompt) ||
            o->cache_scope_len != j->cache_scope_len)
            continue;
        if ((!j->cache_scope_len || !memcmp(o->cache_scope, j->cache_scope, j->cache_scope_len)) &&
            !memcmp(o->prompt, j->prompt, sizeof *j->prompt * (size_t)mark))
            return 1;
    }
    return 0;
}

/* The item for j's next prompt chunk of at most `room` tokens. The first
 * snapshot mark in the chunk is taken inside the step (k3_batch_item.snap)
 * and stored by after_step without a copy (at the prompt's end with its last
 * logits). The chunk ends at the next mark after that, or earlier; a mark
 * that ends a chunk already holding a snapshot is copied after the step. */
static k3_batch_item prompt_item(serve_sched *s, int nb, serve_job *j, int64_t room) {
    int64_t n = j->n_prompt - j->n_fed;
    if (n > s->o.prefill_chunk) n = s->o.prefill_chunk;
    if (n > room) n = room;
    k3_batch_item it = {.seq = j->seq, .tokens = j->prompt + j->n_fed};
    int mk = j->next_mark;
    if (mk < j->n_marks && j->marks[mk] <= j->n_fed + n) { /* after_step stores it */
        const int64_t at = j->marks[mk++];
        it.snap_at = at - j->n_fed;
        /* none when the cache would drop it (too large, or stored already) */
        if (!snapped_in_step(s, nb, j, at) &&
            serve_pcache_would_keep(s->cache, j->cache_scope, j->cache_scope_len, j->prompt, at,
                                    j->seq, at == j->n_prompt))
            it.snap = k3_seq_new(s->eng->model);
    }
    if (mk < j->n_marks && j->n_fed + n > j->marks[mk])
        n = j->marks[mk] - j->n_fed; /* stop at the (next) snapshot mark */
    it.n = n;
    it.logits = j->n_fed + n == j->n_prompt ? j->logits : NULL;
    return it;
}

/* The next step's batch: decodes first (all of them when they fit; one
 * token each), then prompt chunks in arrival order. While a prompt waits,
 * one item and one token stay free for it, so prefills always advance. */
static int build_batch(serve_sched *s) {
    int nb = 0, max_b = s->o.max_batch;
    int64_t tokens = 0, max_t = s->o.max_step_tokens;
    int waiting = 0, ndec = 0;
    for (int i = 0; i < s->n_active; i++)
        if (s->active[i] && !s->active[i]->paused) s->active[i]->decoding ? ndec++ : waiting++;
    int dec_b = max_b - (waiting > 0), dec_t = (int)(max_t - (waiting > 0));
    if (ndec > dec_b || ndec > dec_t) s->rr++;
    int64_t drafts = dec_t - (ndec < dec_b ? ndec : dec_b); /* room left by the decodes */
    for (int k = 0; k < s->n_active; k++) {
        serve_job *j = s->active[(k + s->rr) % s->n_active];
        if (!j || j->paused || !j->decoding || nb >= dec_b || tokens >= dec_t) continue;
        s->items[nb] = (k3_batch_item){
            .seq = j->seq, .tokens = &j->pending, .n = 1, .logits = j->closing ? NULL : j->logits};
        int64_t d = drafts > 0 ? serve_spec_draft(j, &s->items[nb], drafts, s->eng->vocab) : 0;
        drafts -= d;
        tokens += 1 + d;
        s->item_job[nb++] = j;
    }
    for (int i = 0; i < s->n_active && nb < max_b && tokens < max_t; i++) {
        serve_job *j = s->active[i];
        if (!j || j->paused || j->decoding) continue;
        s->items[nb] = prompt_item(s, nb, j, max_t - tokens);
        tokens += s->items[nb].n;
        s->item_job[nb++] = j;
    }
    return nb;
}

/* A verify item's rows through on_logits (sched_spec.h). 1 when j left. */
static int spec_verified(serve_sched *s, serve_job *j, const k3_batch_item *it, k3_buf *b) {
    serve_spec_counts c = {0};
    int rc = serve_spec_verified(s, j, it, s->eng->vocab, on_logits, b, &c);
    pthread_mutex_lock(&s->mu);
    s->st.decode_tokens += c.emitted;
    s->st.spec_steps += c.verify_steps;
    s->st.spec_drafted += c.drafted;
    s->st.spec_accepted += c.accepted;
    pthread_mutex_unlock(&s->mu);
    if (rc >= 0) return rc;
    job_fail(s, j, b);
    return 1;
}

/* After a step: advance prompts (snapshots at marks), sample decodes. */
static void after_step(serve_sched *s, int nb, k3_buf *b) {
    for (int k = 0; k < nb; k++) {
        serve_job *j = s->item_job[k];
        b->n = 0;
        if (!j->decoding) {
            int64_t n = s->items[k].n;
            if (s->items[k].snap_at) { /* its first mark, taken in the step: no copy */
                int64_t at = j->n_fed + s->items[k].snap_at;
                if (s->items[k].snap) /* else none was built: see prompt_item */
                    serve_pcache_insert_take(s->cache, j->cache_scope, j->cache_scope_len,
                                             j->prompt, at, s->items[k].snap,
                                             at == j->n_prompt ? j->logits : NULL);
                j->next_mark++;
            }
            j->n_fed += n;
            j->n_prefilled += n;
            stats_add(s, &s->st.prefill_tokens, (uint64_t)n);
            int last = j->n_fed == j->n_prompt;
            if (j->next_mark < j->n_marks && j->marks[j->next_mark] == j->n_fed) {
                j->next_mark++; /* the next step waits for the copy (prepare) */
                serve_pcache_insert_async(s->cache, j->cache_scope, j->cache_scope_len, j->prompt,
                                          j->n_fed, j->seq, last ? j->logits : NULL, &j->copy);
            }
            continue; /* the last chunk's logits are sampled in prepare */
        }
        if (j->closing) { /* the stop token is in: store the turn, finish */
            store_turn(s, j);
            job_finish(s, j, j->close_reason, b);
            for (int i = 0; i < s->n_active; i++)
                if (s->active[i] == j) s->active[i] = NULL;
            continue;
        }
        if (s->items[k].verify) { /* a pending token with drafts: take its rows */
            if (spec_verified(s, j, &s->items[k], b))
                for (int i = 0; i < s->n_active; i++)
                    if (s->active[i] == j) s->active[i] = NULL;
            continue;
        }
        stats_add(s, &s->st.decode_tokens, 1);
        if (on_logits(s, j, b))
            for (int i = 0; i < s->n_active; i++)
                if (s->active[i] == j) s->active[i] = NULL;
    }
}

static void step_failed(serve_sched *s, int nb, k3_buf *b) {
    for (int k = 0; k < nb; k++) {
        serve_job *j = s->item_job[k];
        b->n = 0;
        k3_seq_free(s->items[k].snap); /* half made */
        for (int i = 0; i < s->n_active; i++)
            if (s->active[i] == j) s->active[i] = NULL;
        job_fail(s, j, b);
    }
}

/* Nothing could be stepped (every job paused for backpressure): sleep until
 * a submission or 5 ms instead of spinning. */
static void wait_paused(serve_sched *s) {
    struct timespec ts;
    serve_abs_deadline(&ts, 0.005);
    pthread_mutex_lock(&s->mu);
    if (!s->queue_head) pthread_cond_timedwait(&s->cv, &s->mu, &ts);
    pthread_mutex_unlock(&s->mu);
}

static void *worker_main(void *arg) {
    serve_sched *s = arg;
    k3_buf b = {0};
    int stopping = 0;
    /* OpenMP's thread count is a per-thread setting: the one k3_model_load
     * made applies to the thread that loaded, not to this one */
    if (s->eng->threads > 0) omp_set_num_threads(s->eng->threads);
    pthread_mutex_lock(&s->mu);
    s->st.threads = omp_get_max_threads();
    pthread_cond_broadcast(&s->cv); /* serve_sched_new waits for it */
    pthread_mutex_unlock(&s->mu);
    while (admit(s, &stopping)) {
        serve_pcache_reap(s->cache);
        prepare(s, stopping, &b);
        int nb = build_batch(s);
        if (nb) {
            pthread_mutex_lock(&s->mu);
            s->st.steps++;
            s->st.step_sequences += (uint64_t)nb;
            if (nb > s->st.max_step_sequences) s->st.max_step_sequences = nb;
            pthread_mutex_unlock(&s->mu);
            if (k3_forward_batch(s->items, nb))
                step_failed(s, nb, &b);
            else
                after_step(s, nb, &b);
        }
        int kept = 0;
        for (int i = 0; i < s->n_active; i++)
            if (s->active[i]) s->active[kept++] = s->active[i];
        s->n_active = kept;
        pthread_mutex_lock(&s->mu);
        s->st.paused = s->n_paused;
        pthread_mutex_unlock(&s->mu);
        if (!nb && kept) wait_paused(s); /* every job waits for its reader */
    }
    k3_buf_free(&b);
    return NULL;
}

/* The state reserve's bytes. By default 256 MiB, or two blocks where a block
 * is larger (K3's 465 MB: the first restores of a shared system prompt would
 * otherwise fault ~0.9 GB in), but no more than the prompt cache may hold:
 * its snapshots and restores are what take blocks in bursts (none when off). */
static size_t state_reserve(const k3_model *m, const serve_sched_opts *o) {
    if (o->state_reserve != SIZE_MAX) return o->state_reserve;
    size_t want = (size_t)256 << 20, two = 2 * k3_model_state_bytes(m);
    if (two > want) want = two;
    return o->cache_budget < want ? o->cache_budget : want;
}

serve_sched *serve_sched_new(serve_engine *e, const serve_sched_opts *o) {
    serve_sched *s = k3_xcalloc(1, sizeof *s);
    s->eng = e;
    s->o = *o;
    if (s->o.max_active < 1) s->o.max_active = 1;
    if (s->o.max_queue < 1) s->o.max_queue = 256;
    if (s->o.max_batch < 1 || s->o.max_batch > s->o.max_active) s->o.max_batch = s->o.max_active;
    if (s->o.max_step_tokens < 1) s->o.max_step_tokens = 512;
    if (s->o.prefill_chunk < 1) s->o.prefill_chunk = 64;
    if (s->o.prefill_chunk > 512) s->o.prefill_chunk = 512; /* k3_forward_batch's limit */
    s->active = k3_xcalloc((size_t)s->o.max_active, sizeof *s->active);
    s->items = k3_xcalloc((size_t)s->o.max_batch, sizeof *s->items);
    s->item_job = k3_xcalloc((size_t)s->o.max_batch, sizeof *s->item_job);
    s->cache = serve_pcache_new(o->cache_budget, e->vocab);
    /* a burst of new jobs takes a block each, and the cache one per snapshot
       (message marks, the whole prompt, the finished turn) */
    k3_model_state_reserve(e->model, state_reserve(e->model, o), 4 * s->o.max_active);
    s->refill = 1;
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    if (pthread_create(&s->thread, NULL, worker_main, s)) {
        k3_seterr("cannot start the scheduler thread");
        serve_pcache_free(s->cache);
        free(s->active);
        free(s->items);
        free(s->item_job);
        free(s);
        return NULL;
    }
    /* the worker has its thread count before anything reports it (/health) */
    pthread_mutex_lock(&s->mu);
    while (!s->st.threads) pthread_cond_wait(&s->cv, &s->mu);
    pthread_mutex_unlock(&s->mu);
    return s;
}

void serve_sched_cancel_all(serve_sched *s) {
    pthread_mutex_lock(&s->mu);
    s->stop = 1;
    for (serve_job *j = s->queue_head; j; j = j->next) serve_job_cancel(j);
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
}

void serve_sched_free(serve_sched *s) {
    if (!s) return;
    serve_sched_cancel_all(s);
    pthread_join(s->thread, NULL);
    serve_pcache_free(s->cache);
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv);
    free(s->active);
    free(s->items);
    free(s->item_job);
    free(s);
}

int serve_sched_submit(serve_sched *s, serve_job *j) {
    pthread_mutex_lock(&s->mu);
    if (s->stop) {
        pthread_mutex_unlock(&s->mu);
        return k3_seterr("the server is shutting down");
    }
    if (s->n_queued >= s->o.max_queue) {
        s->st.rejected_queue++;
        pthread_mutex_unlock(&s->mu);
        k3_seterr("%d requests are already waiting for a slot (--max-queue %d); retry later",
                  s->n_queued, s->o.max_queue);
        return -2;
    }
    pthread_mutex_lock(&j->mu);
    j->refs++;
    j->t_submit = k3_now();
    pthread_mutex_unlock(&j->mu);
    j->next = NULL;
    if (s->queue_tail)
        s->queue_tail->next = j;
    else
        s->queue_head = j;
    s->queue_tail = j;
    s->n_queued++;
    s->st.queued = s->n_queued;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    return 0;
}

serve_sched_stats serve_sched_get_stats(serve_sched *s) {
    pthread_mutex_lock(&s->mu);
    serve_sched_stats st = s->st;
    pthread_mutex_unlock(&s->mu);
    serve_pcache_stats c = serve_pcache_get_stats(s->cache);
    st.cache_hits = c.hits;
    st.cache_lookups = c.lookups;
    st.cache_tokens_reused = c.tokens_reused;
    st.cache_evictions = c.evictions;
    st.cache_snapshots = c.snapshots;
    st.cache_scopes = c.scopes;
    st.cache_entries = c.entries;
    st.cache_bytes = c.bytes;
    st.cache_budget = c.budget;
    st.states_kept = k3_model_state_kept(s->eng->model);
    st.state_block_bytes = k3_model_state_bytes(s->eng->model);
    return st;
}

int serve_sched_busy(serve_sched *s) {
    pthread_mutex_lock(&s->mu);
    int n = s->st.active + s->n_queued;
    pthread_mutex_unlock(&s->mu);
    return n;
}
