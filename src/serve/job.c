/* job.c — a generation job's life outside the worker (sched.h): its
 * reference count, cancellation, and the byte queue between the worker
 * (serve_job_emit: what the job's renderer wrote) and the connection's
 * thread (serve_job_take). */
#include "serve/sched.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/mem.h"
#include "gen/constrain.h"

serve_job *serve_job_new(void) {
    serve_job *j = k3_xcalloc(1, sizeof *j);
    pthread_mutex_init(&j->mu, NULL);
    pthread_cond_init(&j->cv, NULL);
    j->refs = 1;
    j->status = 200;
    return j;
}

static void job_free(serve_job *j) {
    serve_req_free(&j->req);
    free(j->cache_scope);
    free(j->marks);
    free(j->prompt);
    free(j->forced);
    k3_constraint_free(j->constraint);
    if (j->render.ops) j->render.ops->release(j->render.ctx);
    free(j->out);
    pthread_mutex_destroy(&j->mu);
    pthread_cond_destroy(&j->cv);
    free(j);
}

void serve_job_retain(serve_job *j) {
    pthread_mutex_lock(&j->mu);
    j->refs++;
    pthread_mutex_unlock(&j->mu);
}

void serve_job_release(serve_job *j) {
    pthread_mutex_lock(&j->mu);
    int left = --j->refs;
    pthread_mutex_unlock(&j->mu);
    if (left == 0) job_free(j);
}

void serve_job_cancel(serve_job *j) {
    pthread_mutex_lock(&j->mu);
    j->cancelled = 1;
    pthread_cond_broadcast(&j->cv);
    pthread_mutex_unlock(&j->mu);
}

int serve_job_cancelled(serve_job *j) {
    pthread_mutex_lock(&j->mu);
    int c = j->cancelled;
    pthread_mutex_unlock(&j->mu);
    return c;
}

void serve_job_emit(serve_job *j, k3_buf *b, int done) {
    pthread_mutex_lock(&j->mu);
    if (b->n) {
        if (j->out_len + b->n > j->out_cap) {
            size_t c = j->out_cap ? j->out_cap : 1024;
            while (c < j->out_len + b->n) c *= 2;
            j->out = k3_xrealloc(j->out, c);
            j->out_cap = c;
        }
        memcpy(j->out + j->out_len, b->s, b->n);
        j->out_len += b->n;
    }
    if (done) j->done = 1;
    pthread_cond_broadcast(&j->cv);
    pthread_mutex_unlock(&j->mu);
    b->n = 0;
}

void serve_abs_deadline(struct timespec *ts, double timeout_s) {
    clock_gettime(CLOCK_REALTIME, ts);
    double t = (double)ts->tv_sec + ts->tv_nsec * 1e-9 + (timeout_s > 0 ? timeout_s : 0);
    ts->tv_sec = (time_t)t;
    ts->tv_nsec = (long)((t - (double)ts->tv_sec) * 1e9);
}

int serve_job_take(serve_job *j, double timeout_s, char **buf, size_t *len) {
    struct timespec ts;
    serve_abs_deadline(&ts, timeout_s);
    pthread_mutex_lock(&j->mu);
    while (!j->out_len && !j->done && !j->cancelled)
        if (pthread_cond_timedwait(&j->cv, &j->mu, &ts) == ETIMEDOUT) break;
    *buf = j->out;
    *len = j->out_len;
    j->out = NULL;
    j->out_len = j->out_cap = 0;
    int finished = j->done;
    pthread_mutex_unlock(&j->mu);
    return finished;
}
