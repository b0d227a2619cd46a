/* http_choices.c — POST /v1/chat/completions and /v1/completions: one job,
 * or for a chat request with n > 1 choices one job per choice.
 *
 * Each choice is a job of its own (its own sequence and sampler, the same
 * prompt; with a seed, choice i samples with seed + i), so the n decode in
 * the same steps. Their renderers write chunks that carry the choice's index
 * and the response's one id; the connection's thread merges the n byte
 * queues into one stream, whole chunks at a time, and ends it with the usage
 * chunk (when asked) and one [DONE]; without streaming it waits for all and
 * builds one body with n choices. Usage counts the prompt once and the
 * completion tokens of every choice. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/mem.h"
#include "serve/http_internal.h"

#define POLL_S 0.1   /* how often a waiting connection checks its socket */
#define MERGE_S 0.02 /* a stream waits this long on one choice while none has output */

typedef struct {
    serve_job *jobs[SERVE_MAX_N];
    int n;
    int finished[SERVE_MAX_N];
    struct MHD_Connection *conn;
    k3_buf out;
    size_t off;
    int ended;
    double keepalive_s, t_sent;
} group;

static int all_finished(const group *g) {
    for (int i = 0; i < g->n; i++)
        if (!g->finished[i]) return 0;
    return 1;
}

/* Move what the choices have produced into g->out; wait up to wait_s on the
 * first choice still running when none had anything. 1 if bytes came. */
static int gather(group *g, double wait_s) {
    size_t before = g->out.n;
    for (int i = 0; i < g->n; i++) {
        if (g->finished[i]) continue;
        char *b;
        size_t n;
        g->finished[i] = serve_job_take(g->jobs[i], g->out.n > before ? 0 : wait_s, &b, &n);
        if (n) k3_buf_put(&g->out, b, n);
        free(b);
        wait_s = 0;
    }
    return g->out.n > before;
}

static serve_usage total_usage(const group *g) {
    serve_usage u = g->jobs[0]->usage; /* the prompt is counted once */
    u.completion_tokens = 0;
    for (int i = 0; i < g->n; i++) u.completion_tokens += g->jobs[i]->usage.completion_tokens;
    return u;
}

static void group_free(group *g) {
    for (int i = 0; i < g->n; i++) {
        if (!g->finished[i]) serve_job_cancel(g->jobs[i]);
        serve_job_release(g->jobs[i]);
    }
    k3_buf_free(&g->out);
    free(g);
}

static ssize_t group_read(void *cls, uint64_t pos, char *buf, size_t max) {
    group *g = cls;
    for (;;) {
        if (g->off < g->out.n) {
            size_t n = g->out.n - g->off < max ? g->out.n - g->off : max;
            memcpy(buf, g->out.s + g->off, n);
            g->off += n;
            g->t_sent = k3_now();
            return (ssize_t)n;
        }
        g->out.n = g->off = 0;
        if (g->ended) return MHD_CONTENT_READER_END_OF_STREAM;
        int got = gather(g, MERGE_S);
        if (all_finished(g)) {
            serve_usage u = total_usage(g);
            k3_buf_puts_free(&g->out, serve_render_chat_tail(&g->jobs[0]->render,
                                                             g->jobs[0]->req.include_usage, &u));
            g->ended = 1;
            continue;
        }
        if (!got && serve_client_gone(g->conn)) {
            for (int i = 0; i < g->n; i++) serve_job_cancel(g->jobs[i]);
            return MHD_CONTENT_READER_END_WITH_ERROR;
        }
        if (!got && g->keepalive_s > 0 && k3_now() - g->t_sent > g->keepalive_s)
            k3_buf_puts(&g->out, ": keep-alive\n\n");
    }
}

static void group_read_free(void *cls) {
    group_free(cls);
}

/* Choice i's bytes (only an error writes any before the end) once it is
 * done. -1 when the client went away. */
static int wait_choice(serve_conn *c, group *g, int i, k3_buf *out) {
    while (!g->finished[i]) {
        char *b;
        size_t n;
        g->finished[i] = serve_job_take(g->jobs[i], POLL_S, &b, &n);
        if (n) k3_buf_put(out, b, n);
        free(b);
        if (!g->finished[i] && serve_client_gone(c->conn)) return -1;
    }
    return 0;
}

/* Without streaming: wait for every choice; the first that failed gives
 * the reply (its error body), else one body with all choices. */
static enum MHD_Result reply_whole(serve_conn *c, group *g) {
    k3_buf err = {0};
    int status = 200;
    for (int i = 0; i < g->n; i++) {
        k3_buf b = {0};
        if (wait_choice(c, g, i, &b)) {
            k3_buf_free(&b);
            k3_buf_free(&err);
            group_free(g);
            c->status = 499; /* nginx's "client closed request", for the log */
            return MHD_NO;
        }
        if (status == 200 && g->jobs[i]->status != 200) {
            status = g->jobs[i]->status;
            k3_buf_put(&b, "", 1);
            err = b;
        } else {
            k3_buf_free(&b);
        }
    }
    char *body = err.s;
    if (status == 200) {
        serve_render rs[SERVE_MAX_N];
        const char *finish[SERVE_MAX_N];
        for (int i = 0; i < g->n; i++) {
            rs[i] = g->jobs[i]->render;
            finish[i] = g->jobs[i]->finish_reason;
        }
        serve_usage u = total_usage(g);
        body = serve_render_chat_body(rs, finish, g->n, &u);
    }
    group_free(g);
    return serve_reply_json(c, status, body);
}

/* Jobs 1..n-1, each from its own copy of the first's request. */
static int make_choices(serve_conn *c, group *g, serve_err *e) {
    serve_job *first = g->jobs[0];
    for (int i = 1; i < first->req.n; i++) {
        json_t *root = json_deep_copy(first->req.root);
        serve_job *j = root ? serve_make_job(c, SERVE_CHAT, root, e) : NULL;
        if (!j) {
            if (!root)
                serve_err_set(e, 500, "server_error", NULL, "internal_error", "out of memory");
            return -1;
        }
        if (j->req.has_seed) j->req.seed = first->req.seed + (uint64_t)i;
        g->jobs[g->n++] = j;
    }
    return 0;
}

/* Queue every choice; on a failure the queued ones are cancelled. */
static int submit_choices(serve_conn *c, group *g, serve_err *e) {
    static unsigned long long counter;
    char id[48];
    long long created = (long long)time(NULL);
    snprintf(id, sizeof id, "chatcmpl-%llxn%04llx", (unsigned long long)created,
             __atomic_add_fetch(&counter, 1, __ATOMIC_SEQ_CST));
    for (int i = 0; i < g->n; i++) {
        serve_job *j = g->jobs[i];
        serve_render r = serve_render_chat_choice(c->srv->eng->name, j->req.stream, i, id, created);
        if (!serve_submit_job(c, j, r, e)) continue;
        /* j was released; cancel the queued, drop the rest */
        for (int k = 0; k < g->n; k++) {
            if (k < i) serve_job_cancel(g->jobs[k]);
            if (k != i) serve_job_release(g->jobs[k]);
        }
        g->n = 0;
        return -1;
    }
    return 0;
}

static enum MHD_Result run_choices(serve_conn *c, serve_job *first) {
    group *g = k3_xcalloc(1, sizeof *g);
    g->jobs[g->n++] = first;
    serve_err e;
    if (make_choices(c, g, &e)) {
        for (int i = 0; i < g->n; i++) serve_job_release(g->jobs[i]);
        free(g);
        return serve_reply_err(c, &e);
    }
    if (submit_choices(c, g, &e)) {
        free(g);
        return serve_reply_err(c, &e);
    }
    serve_job_retain(first);
    c->job = first; /* for the log line and the request's completion */
    if (!first->req.stream) return reply_whole(c, g);
    g->conn = c->conn;
    double idle = c->srv->o->idle_timeout_s;
    g->keepalive_s = idle > 0 ? (idle / 3 > 0.3 ? idle / 3 : 0.3) : 0;
    g->t_sent = k3_now();
    return serve_reply_sse(c, group_read, g, group_read_free);
}

enum MHD_Result serve_handle_generate(serve_conn *c, serve_kind kind) {
    serve_err e;
    serve_job *j = serve_open_job(c, kind, NULL, &e);
    if (!j) return serve_reply_err(c, &e);
    return j->req.n > 1 ? run_choices(c, j) : serve_run_made(c, j, (serve_render){0});
}
