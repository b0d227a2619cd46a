/* metrics.c — counters and histograms rendered as Prometheus text (metrics.h). */
#include "serve/metrics.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>

#include "base/mem.h"

static const double TTFT_BOUNDS[] = {0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120};
static const double TPS_BOUNDS[] = {1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000};
static const double E2E_BOUNDS[] = {0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600};
/* vLLM's buckets for time_per_output_token_seconds (the last ones merged) */
static const double ITL_BOUNDS[] = {0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2,
                                    0.3,  0.4,   0.5,  0.75,  1.0, 2.5,  5.0};
static const double PHASE_BOUNDS[] = {0.01, 0.05, 0.1, 0.25, 0.5, 1,   2.5,
                                      5,    10,   30,  60,   120, 300, 600};
#define N_OF(a) ((int)(sizeof(a) / sizeof *(a)))

static void hist_init(serve_hist *h, const double *b, int n) {
    memset(h, 0, sizeof *h);
    h->bounds = b;
    h->n = n;
}

/* n observations of the value v */
static void hist_add_n(serve_hist *h, double v, uint64_t n) {
    int i = 0;
    while (i < h->n && v > h->bounds[i]) i++;
    h->count[i] += n;
    h->sum += v * (double)n;
}

static void hist_add(serve_hist *h, double v) {
    hist_add_n(h, v, 1);
}

void serve_metrics_init(serve_metrics *m) {
    memset(m, 0, sizeof *m);
    pthread_mutex_init(&m->mu, NULL);
    hist_init(&m->ttft, TTFT_BOUNDS, (int)(sizeof TTFT_BOUNDS / sizeof *TTFT_BOUNDS));
    hist_init(&m->tps, TPS_BOUNDS, (int)(sizeof TPS_BOUNDS / sizeof *TPS_BOUNDS));
    hist_init(&m->e2e, E2E_BOUNDS, (int)(sizeof E2E_BOUNDS / sizeof *E2E_BOUNDS));
    hist_init(&m->itl, ITL_BOUNDS, N_OF(ITL_BOUNDS));
    hist_init(&m->queue, PHASE_BOUNDS, N_OF(PHASE_BOUNDS));
    hist_init(&m->prefill, PHASE_BOUNDS, N_OF(PHASE_BOUNDS));
    hist_init(&m->decode, PHASE_BOUNDS, N_OF(PHASE_BOUNDS));
}

void serve_metrics_free(serve_metrics *m) {
    pthread_mutex_destroy(&m->mu);
}

void serve_metrics_request(serve_metrics *m, const char *endpoint, int status) {
    pthread_mutex_lock(&m->mu);
    int i = 0;
    for (; i < SERVE_METRICS_ROUTES - 1 && m->req[i].n; i++)
        if (m->req[i].status == status && !strcmp(m->req[i].endpoint, endpoint)) break;
    if (!m->req[i].n) {
        /* the last slot collects everything that did not get one */
        snprintf(m->req[i].endpoint, sizeof m->req[i].endpoint, "%s",
                 i == SERVE_METRICS_ROUTES - 1 ? "other" : endpoint);
        m->req[i].status = i == SERVE_METRICS_ROUTES - 1 ? 0 : status;
    }
    m->req[i].n++;
    pthread_mutex_unlock(&m->mu);
}

void serve_metrics_generation(serve_metrics *m, int prompt, int completion, int cached,
                              double ttft_s, double tps, double e2e_s) {
    pthread_mutex_lock(&m->mu);
    m->prompt_tokens += (uint64_t)(prompt > 0 ? prompt : 0);
    m->completion_tokens += (uint64_t)(completion > 0 ? completion : 0);
    m->cached_tokens += (uint64_t)(cached > 0 ? cached : 0);
    if (ttft_s >= 0) hist_add(&m->ttft, ttft_s);
    if (tps >= 0) hist_add(&m->tps, tps);
    if (e2e_s >= 0) hist_add(&m->e2e, e2e_s);
    pthread_mutex_unlock(&m->mu);
}

static void count_finish(serve_metrics *m, const char *reason) {
    int i = 0;
    for (; i < SERVE_METRICS_REASONS - 1 && m->finish[i].n; i++)
        if (!strcmp(m->finish[i].reason, reason)) break;
    if (!m->finish[i].n)
        snprintf(m->finish[i].reason, sizeof m->finish[i].reason, "%s",
                 i == SERVE_METRICS_REASONS - 1 ? "other" : reason);
    m->finish[i].n++;
}

/* b - a when both happened in order, else -1 (no sample) */
static double span(double a, double b) {
    return a > 0 && b >= a ? b - a : -1;
}

void serve_metrics_job(serve_metrics *m, const serve_job *j) {
    double queue = span(j->t_submit, j->t_start);
    double prefill = span(j->t_start, j->t_first_token);
    double decode = span(j->t_first_token, j->t_done);
    pthread_mutex_lock(&m->mu);
    if (queue >= 0) hist_add(&m->queue, queue);
    if (prefill >= 0) hist_add(&m->prefill, prefill);
    if (decode >= 0) hist_add(&m->decode, decode);
    /* per-token gaps are not kept: each of the n-1 gaps counts as their mean,
     * so _sum and _count are exact and the buckets are per request */
    if (decode >= 0 && j->n_gen > 1)
        hist_add_n(&m->itl, decode / (double)(j->n_gen - 1), (uint64_t)(j->n_gen - 1));
    count_finish(m, j->finish_reason ? j->finish_reason : "unknown");
    pthread_mutex_unlock(&m->mu);
}

static void line(k3_buf *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void line(k3_buf *o, const char *fmt, ...) {
    char s[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(s, sizeof s, fmt, ap);
    va_end(ap);
    if (n > 0) k3_buf_put(o, s, (size_t)n < sizeof s ? (size_t)n : sizeof s - 1);
}

static void meta(k3_buf *o, const char *name, const char *type, const char *help) {
    line(o, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void counter(k3_buf *o, const char *name, const char *help, const char *model,
                    unsigned long long v) {
    meta(o, name, "counter", help);
    line(o, "%s{model=\"%s\"} %llu\n", name, model, v);
}

static void gauge(k3_buf *o, const char *name, const char *help, const char *model, double v) {
    meta(o, name, "gauge", help);
    line(o, "%s{model=\"%s\"} %.17g\n", name, model, v);
}

static void hist(k3_buf *o, const char *name, const char *help, const char *model,
                 const serve_hist *h) {
    meta(o, name, "histogram", help);
    unsigned long long cum = 0;
    for (int i = 0; i <= h->n; i++) {
        cum += h->count[i];
        if (i < h->n)
            line(o, "%s_bucket{model=\"%s\",le=\"%g\"} %llu\n", name, model, h->bounds[i], cum);
        else
            line(o, "%s_bucket{model=\"%s\",le=\"+Inf\"} %llu\n", name, model, cum);
    }
    line(o, "%s_sum{model=\"%s\"} %.17g\n%s_count{model=\"%s\"} %llu\n", name, model, h->sum, name,
         model, cum);
}

/* Label values: the model id is ours, but escape it anyway. */
static void label_escape(char *out, size_t cap, const char *s) {
    size_t j = 0;
    for (; *s && j + 3 < cap; s++) {
        if (*s == '"' || *s == '\\') out[j++] = '\\';
        if (*s == '\n') {
            out[j++] = '\\';
            out[j++] = 'n';
            continue;
        }
        out[j++] = *s;
    }
    out[j] = 0;
}

/* Under m->mu: the phase histograms and the finish reasons. */
static void phases(k3_buf *o, const serve_metrics *m, const char *model) {
    hist(o, "k3_request_queue_time_seconds", "Time from submission to leaving the queue.", model,
         &m->queue);
    hist(o, "k3_request_prefill_time_seconds", "Time from leaving the queue to the first token.",
         model, &m->prefill);
    hist(o, "k3_request_decode_time_seconds", "Time from the first token to the last.", model,
         &m->decode);
    hist(o, "k3_inter_token_latency_seconds",
         "Gap between generated tokens (a request's mean gap, once per gap).", model, &m->itl);
    meta(o, "k3_request_finish_total", "counter", "Finished generations, by finish reason.");
    for (int i = 0; i < SERVE_METRICS_REASONS && m->finish[i].n; i++) {
        char reason[64];
        label_escape(reason, sizeof reason, m->finish[i].reason);
        line(o, "k3_request_finish_total{model=\"%s\",finished_reason=\"%s\"} %llu\n", model,
             reason, (unsigned long long)m->finish[i].n);
    }
}

/* Sequence state and prompt-cache memory, in use against their budgets. */
static void memory(k3_buf *o, const serve_sched_stats *st, const char *model) {
    gauge(o, "k3_state_block_bytes", "Bytes of one sequence's recurrent state block.", model,
          (double)st->state_block_bytes);
    gauge(o, "k3_state_bytes_in_use", "Recurrent state of the sequences generating now.", model,
          (double)st->state_block_bytes * st->active);
    gauge(o, "k3_state_blocks_kept", "State blocks kept ready while idle (--state-reserve-mb).",
          model, st->states_kept);
    gauge(o, "k3_prefix_cache_budget_bytes", "Prompt-cache budget (--cache-mb).", model,
          (double)st->cache_budget);
    gauge(o, "k3_prefix_cache_usage_ratio", "Prompt-cache bytes held over the budget (0..1).",
          model, st->cache_budget ? (double)st->cache_bytes / (double)st->cache_budget : 0);
}

/* The standard process_* series (no labels, as every Prometheus client
 * library writes them). */
static void process(k3_buf *o) {
    struct rusage ru;
    double cpu = 0;
    if (!getrusage(RUSAGE_SELF, &ru))
        cpu = (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
              (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
    meta(o, "process_cpu_seconds_total", "counter", "User and system CPU time spent in seconds.");
    line(o, "process_cpu_seconds_total %.6f\n", cpu);
    meta(o, "process_resident_memory_bytes", "gauge", "Resident memory size in bytes.");
    line(o, "process_resident_memory_bytes %llu\n", (unsigned long long)k3_current_rss());
}

void serve_metrics_text(serve_metrics *m, const serve_sched_stats *st, const char *model_name,
                        k3_buf *o) {
    char model[256];
    label_escape(model, sizeof model, model_name);
    pthread_mutex_lock(&m->mu);
    meta(o, "k3_requests_total", "counter", "HTTP requests answered, by endpoint and status.");
    for (int i = 0; i < SERVE_METRICS_ROUTES && m->req[i].n; i++)
        line(o, "k3_requests_total{model=\"%s\",endpoint=\"%s\",code=\"%d\"} %llu\n", model,
             m->req[i].endpoint, m->req[i].status, (unsigned long long)m->req[i].n);
    counter(o, "k3_prompt_tokens_total", "Prompt tokens of finished generation requests.", model,
            m->prompt_tokens);
    counter(o, "k3_generation_tokens_total", "Tokens generated by finished requests.", model,
            m->completion_tokens);
    counter(o, "k3_cached_prompt_tokens_total", "Prompt tokens served from the prompt cache.",
            model, m->cached_tokens);
    hist(o, "k3_time_to_first_token_seconds", "Time from submission to the first token.", model,
         &m->ttft);
    hist(o, "k3_decode_tokens_per_second", "Per-request decode speed after the first token.", model,
         &m->tps);
    hist(o, "k3_request_duration_seconds", "End-to-end time of generation requests.", model,
         &m->e2e);
    phases(o, m, model);
    pthread_mutex_unlock(&m->mu);
    gauge(o, "k3_requests_running", "Requests generating now.", model, st->active);
    gauge(o, "k3_requests_waiting", "Requests queued for a generation slot.", model, st->queued);
    counter(o, "k3_scheduler_requests_done_total", "Requests the scheduler finished.", model,
            st->requests_done);
    counter(o, "k3_prefill_tokens_total", "Prompt tokens fed through the model.", model,
            st->prefill_tokens);
    counter(o, "k3_decode_tokens_total", "Tokens decoded by the model.", model, st->decode_tokens);
    counter(o, "k3_spec_verify_steps_total",
            "Speculative verify passes (a pending token with drafts, in a batched step).", model,
            st->spec_steps);
    counter(o, "k3_spec_draft_tokens_total", "Draft tokens fed to verify passes.", model,
            st->spec_drafted);
    counter(o, "k3_spec_accepted_tokens_total", "Draft tokens kept (equal to the model's choice).",
            model, st->spec_accepted);
    counter(o, "k3_prefix_cache_queries_total", "Prompt-cache lookups.", model, st->cache_lookups);
    counter(o, "k3_prefix_cache_hits_total", "Prompt-cache lookups that reused a prefix.", model,
            st->cache_hits);
    counter(o, "k3_prefix_cache_tokens_reused_total", "Prompt tokens taken from the cache.", model,
            st->cache_tokens_reused);
    counter(o, "k3_prefix_cache_evictions_total", "Prompt-cache entries evicted.", model,
            st->cache_evictions);
    gauge(o, "k3_prefix_cache_entries", "Prompt-cache entries held.", model, st->cache_entries);
    gauge(o, "k3_prefix_cache_bytes", "Prompt-cache bytes held.", model, (double)st->cache_bytes);
    counter(o, "k3_prefix_cache_snapshots_total", "Prompt-cache snapshots stored.", model,
            st->cache_snapshots);
    counter(o, "k3_batch_steps_total", "Batched forward steps (k3_forward_batch calls).", model,
            st->steps);
    counter(o, "k3_batch_step_sequences_total", "Sequences summed over the batched steps.", model,
            st->step_sequences);
    gauge(o, "k3_batch_max_step_sequences", "The largest batch of one step so far.", model,
          st->max_step_sequences);
    counter(o, "k3_queue_rejected_total", "Requests refused with 429 because the queue was full.",
            model, st->rejected_queue);
    memory(o, st, model);
    process(o);
}
