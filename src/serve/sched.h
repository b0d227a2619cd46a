/* sched.h — the generation scheduler: continuous batching over one model.
 *
 * HTTP threads submit jobs (a tokenized prompt plus sampling options); one
 * worker thread owns the model and runs steps of k3_forward_batch: every
 * active decode brings its next token to each step, and prompts are fed in
 * chunks that ride along in the same step (bounded by max_step_tokens and
 * max_batch), so a new request's prefill does not stall the running streams
 * and the weights are read once per step for all of them. A job that
 * finishes or is cancelled leaves the batch before the next step. At most
 * max_active jobs hold a sequence; up to max_queue more wait, and submit
 * refuses beyond that (HTTP 429).
 *
 * A job's output (the core's events, events.h, as its renderer writes them:
 * SSE events or the final JSON body) is appended to the job's byte queue
 * under its mutex; the connection thread waits on the
 * job's condition variable and drains the queue. A connection that goes
 * away calls serve_job_cancel(): the worker frees the job's sequence before
 * its next step.
 *
 * Jobs are reference counted (submitter + worker); serve_job_release frees. */
#ifndef K3_SERVE_SCHED_H
#define K3_SERVE_SCHED_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "serve/output.h"
#include "serve/pcache.h"
#include "serve/request.h"

typedef struct serve_sched serve_sched;

typedef struct serve_job {
    /* --- set by the submitter before serve_sched_submit, then read-only --- */
    serve_req req;
    int32_t *prompt; /* malloc'd ids */
    int64_t n_prompt;
    int32_t *forced; /* test mode: generated ids to force, or NULL */
    int64_t n_forced;
    double deadline; /* k3_now() value after which the job is cut short (0 = none) */
    struct k3_constraint *constraint; /* structured output grammar, or NULL (owned) */
    double t_constrain;               /* worker: seconds spent masking and advancing it */
    char *cache_scope; /* prompt-cache scope (API key + cache_salt; malloc'd, may be NULL) */
    size_t cache_scope_len;
    serve_render render; /* turns the output's events into the API's bytes (owned) */

    /* --- shared, under mu --- */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    char *out; /* bytes produced and not yet taken by the connection */
    size_t out_len, out_cap;
    int done;      /* the worker will append nothing more */
    int cancelled; /* the client went away / shutdown: stop at once */
    int refs;

    /* --- results, valid once done --- */
    int status; /* HTTP status (200, or 500 if the engine failed) */
    serve_usage usage;
    int64_t n_prefilled; /* prompt tokens actually fed through the model */
    double t_submit, t_start, t_first_token, t_done; /* t_start: left the queue */
    const char *finish_reason;
    char error[256];

    /* --- worker-private --- */
    struct k3_seq *seq;
    struct k3_sampler *sampler;
    serve_output output;
    int output_ready; /* output initialised (job started) */
    int32_t *gen;     /* generated ids */
    float *logits;
    int64_t n_gen;
    int64_t n_fed;   /* prompt tokens consumed by seq so far */
    int32_t pending; /* decode: the sampled token the next step feeds */
    int decoding;    /* the prompt is consumed: each step feeds `pending` */
    int paused;      /* left out of this step: its stream reader is behind */
    int64_t *marks;  /* prompt positions after which a snapshot is taken (ascending) */
    int n_marks, next_mark;
    serve_pcache_ticket copy; /* a prompt-cache copy from or into seq: while it is pending
                                 the job is neither stepped nor finished */
    int closing;              /* the stop token rides in the next step, then the turn is
                                 stored in the prompt cache and the job finishes */
    const char *close_reason;
    struct serve_spec *spec; /* speculative decoding (sched_spec.h); NULL: plain decoding */
    struct serve_job *next;
} serve_job;

typedef struct {
    int max_active;        /* jobs holding a sequence (decoding or prefilling); more queue */
    int max_queue;         /* jobs waiting for a slot; submit refuses more (429). 0 = 256 */
    int max_batch;         /* sequences per step (0 = max_active) */
    int max_step_tokens;   /* tokens per step, decodes + prefill chunks (0 = 512) */
    int prefill_chunk;     /* prompt tokens of one job per step */
    double batch_window_s; /* an idle worker that gets a request waits this long after its
                              arrival for more, so a burst starts in one step (0 = never) */
    size_t cache_budget;   /* prompt-cache bytes (0 = off) */
    size_t state_reserve;  /* bytes of sequence state blocks faulted in while idle (k3.h),
                              at most 4 blocks per max_active; SIZE_MAX: 256 MiB or two
                              blocks, whichever is more, within cache_budget */
    double timeout_s;      /* --timeout, for the 504 message (deadlines are per job) */
    size_t max_unread;     /* a stream with more untaken bytes is paused (0 = never) */
} serve_sched_opts;

/* The counters /health (and /metrics) report: a copy taken under the locks. */
typedef struct {
    int active, queued;
    int paused; /* streams not stepped last round: their client left max_unread bytes unread */
    uint64_t requests_done, prefill_tokens, decode_tokens;
    /* speculative decoding: verify items, drafts fed, drafts kept */
    uint64_t spec_steps, spec_drafted, spec_accepted;
    uint64_t steps;          /* k3_forward_batch calls */
    uint64_t step_sequences; /* sum over steps of the sequences in them */
    int max_step_sequences;  /* the largest batch so far */
    int threads;             /* OpenMP threads the worker runs the model with */
    uint64_t rejected_queue; /* submits refused because the queue was full */
    uint64_t cache_hits, cache_lookups, cache_tokens_reused, cache_evictions;
    uint64_t cache_snapshots; /* snapshots stored */
    int cache_scopes;         /* key + salt scopes holding snapshots */
    int cache_entries;
    size_t cache_bytes, cache_budget;
    int states_kept;          /* sequence state blocks ready (the reserve and freed ones) */
    size_t state_block_bytes; /* one sequence state block (k3_model_state_bytes) */
} serve_sched_stats;

struct serve_engine;
serve_sched *serve_sched_new(struct serve_engine *e, const serve_sched_opts *o);
/* Refuse new jobs and cancel every queued and active one (the worker
 * finishes them at its next round). */
void serve_sched_cancel_all(serve_sched *s);
/* Cancel every job, join the worker, free. */
void serve_sched_free(serve_sched *s);

/* A job with refs = 1 (the caller's). Fill the input fields, then submit. */
serve_job *serve_job_new(void);
/* Hands a reference to the worker. Returns 0, -1 if shutting down, or -2 if
 * max_queue jobs are already waiting (k3_errmsg says which). */
int serve_sched_submit(serve_sched *s, serve_job *j);
void serve_job_cancel(serve_job *j);
void serve_job_retain(serve_job *j);
void serve_job_release(serve_job *j);

/* Wait until the job has output or is done, at most timeout_s. Moves the
 * pending bytes into *buf, *len (malloc'd; NULL, 0 if none). Returns 1 if the
 * job is done and everything has been taken, else 0. */
int serve_job_take(serve_job *j, double timeout_s, char **buf, size_t *len);

/* job.c, for the worker: whether the job was cancelled; append b's bytes
 * to the job's queue (and mark it done) and wake the reader, emptying b. */
int serve_job_cancelled(serve_job *j);
void serve_job_emit(serve_job *j, k3_buf *b, int done);
/* The CLOCK_REALTIME time timeout_s from now, for pthread_cond_timedwait. */
struct timespec;
void serve_abs_deadline(struct timespec *ts, double timeout_s);

serve_sched_stats serve_sched_get_stats(serve_sched *s);
/* Jobs active or queued (graceful shutdown waits for 0). */
int serve_sched_busy(serve_sched *s);

#endif
