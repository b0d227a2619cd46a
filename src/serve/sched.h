/* sched.h — the generation scheduler: one worker thread over one model.
 *
 * HTTP threads submit jobs (a tokenized prompt plus sampling options); the
 * worker runs all active jobs in turn — one prefill chunk or one decode
 * step per job per round — so concurrent requests share the model fairly
 * and a long prompt does not stall everyone else's stream.
 *
 * A job's output (SSE chunks or the final JSON body) is appended to the
 * job's byte queue under its mutex; the connection thread waits on the
 * job's condition variable and drains the queue. A connection that goes
 * away calls serve_job_cancel(): the worker frees the job's sequence at its
 * next round (before any further compute on it).
 *
 * Jobs are reference counted (submitter + worker); serve_job_release frees. */
#ifndef K3_SERVE_SCHED_H
#define K3_SERVE_SCHED_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "serve/output.h"
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
    double t_submit, t_first_token, t_done;
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
    int64_t n_fed; /* prompt tokens consumed by seq so far */
    struct serve_job *next;
} serve_job;

typedef struct {
    int max_active;      /* jobs decoded concurrently; more wait in the queue */
    int prefill_chunk;   /* prompt tokens fed per job per round */
    size_t cache_budget; /* prompt-cache bytes (0 = off) */
} serve_sched_opts;

typedef struct {
    int active, queued;
    uint64_t requests_done, prefill_tokens, decode_tokens;
    uint64_t cache_hits, cache_lookups, cache_tokens_reused, cache_evictions;
    int cache_entries;
    size_t cache_bytes, cache_budget;
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
/* Hands a reference to the worker. Returns 0, or -1 if shutting down. */
int serve_sched_submit(serve_sched *s, serve_job *j);
void serve_job_cancel(serve_job *j);
void serve_job_retain(serve_job *j);
void serve_job_release(serve_job *j);

/* Wait until the job has output or is done, at most timeout_s. Moves the
 * pending bytes into *buf, *len (malloc'd; NULL, 0 if none). Returns 1 if the
 * job is done and everything has been taken, else 0. */
int serve_job_take(serve_job *j, double timeout_s, char **buf, size_t *len);

serve_sched_stats serve_sched_get_stats(serve_sched *s);
/* Jobs active or queued (graceful shutdown waits for 0). */
int serve_sched_busy(serve_sched *s);

#endif
