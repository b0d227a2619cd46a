/* metrics.h — request counters and latency histograms for GET /metrics.
 *
 * The HTTP layer records each finished request (endpoint, status, and for
 * generation requests prompt/completion tokens, time to first token,
 * decode speed, queue/prefill/decode times, inter-token latency and the
 * finish reason); serve_metrics_text renders them, plus the scheduler's own
 * counters (serve_sched_stats) and the process's memory and CPU time, in the
 * Prometheus text exposition format (version 0.0.4). Thread safe (one
 * mutex); fixed memory. docs/serve.md maps the names to vLLM's. */
#ifndef K3_SERVE_METRICS_H
#define K3_SERVE_METRICS_H

#include <pthread.h>
#include <stdint.h>

#include "base/buf.h"
#include "serve/sched.h"

#define SERVE_METRICS_ROUTES 32
#define SERVE_METRICS_REASONS 8
#define SERVE_METRICS_BUCKETS 16

typedef struct {
    const double *bounds; /* upper bounds, ascending; +Inf is implicit */
    int n;
    uint64_t count[SERVE_METRICS_BUCKETS + 1]; /* per bucket (not cumulative) */
    double sum;
} serve_hist;

typedef struct {
    pthread_mutex_t mu;
    struct {
        char endpoint[48];
        int status;
        uint64_t n;
    } req[SERVE_METRICS_ROUTES]; /* the rest counts under endpoint "other" */
    uint64_t prompt_tokens, completion_tokens, cached_tokens;
    serve_hist ttft, tps, e2e;
    serve_hist itl, queue, prefill, decode; /* phases of a generation (serve_metrics_job) */
    struct {
        char reason[24];
        uint64_t n;
    } finish[SERVE_METRICS_REASONS]; /* the last slot counts the rest as "other" */
} serve_metrics;

void serve_metrics_init(serve_metrics *m);
void serve_metrics_free(serve_metrics *m);
/* One finished request. ttft_s / tps / e2e_s < 0: not a generation (no sample). */
void serve_metrics_request(serve_metrics *m, const char *endpoint, int status);
void serve_metrics_generation(serve_metrics *m, int prompt, int completion, int cached,
                              double ttft_s, double tps, double e2e_s);
/* The phases of a finished job: queue (submit -> start), prefill (start ->
 * first token), decode (first -> last token), the gaps between its tokens
 * (their mean, observed once per gap) and its finish reason. */
void serve_metrics_job(serve_metrics *m, const serve_job *j);
/* Append the exposition text. */
void serve_metrics_text(serve_metrics *m, const serve_sched_stats *st, const char *model,
                        k3_buf *out);

#endif
