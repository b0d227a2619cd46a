/* http_gen.c — a generation request of any API, from its parsed request to
 * the bytes its renderer produces (POST /v1/chat/completions and
 * /v1/completions through http_choices.c; /v1/messages and /v1/responses
 * through anthropic.c and responses.c).
 *
 * Validate the request, turn it into prompt ids, hand a job to the
 * scheduler, then either stream its events as they are produced or wait
 * for the whole response. Both paths poll the socket while waiting, so a
 * client that hangs up cancels its job within ~0.1 s even when no token is
 * being produced (e.g. during a long prefill). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "base/mem.h"
#include "gen/constrain.h"
#include "serve/http_internal.h"
#include "serve/limits.h"
#include "serve/structured.h"

#define POLL_S 0.1 /* how often a waiting connection checks its socket */

/* The streaming response's own state; it holds a job reference because
 * MHD may destroy the response after the request-completed callback. */
typedef struct {
    serve_job *job;
    struct MHD_Connection *conn;
    char *pend;
    size_t len, off;
    int finished;
    double keepalive_s; /* send an SSE comment after this long without data (0: never) */
    double t_sent;      /* when bytes were last handed to MHD */
} stream_ctx;

/* An SSE comment line: clients ignore it; it keeps a stream that is waiting
 * for a long prefill from looking idle to --idle-timeout (and to proxies). */
static const char KEEPALIVE[] = ": keep-alive\n\n";

static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max) {
    stream_ctx *x = cls;
    for (;;) {
        if (x->off < x->len) {
            size_t n = x->len - x->off < max ? x->len - x->off : max;
            memcpy(buf, x->pend + x->off, n);
            x->off += n;
            x->t_sent = k3_now();
            return (ssize_t)n;
        }
        free(x->pend);
        x->pend = NULL;
        x->len = x->off = 0;
        if (x->finished) return MHD_CONTENT_READER_END_OF_STREAM;
        x->finished = serve_job_take(x->job, POLL_S, &x->pend, &x->len);
        if (!x->len && !x->finished && serve_client_gone(x->conn)) {
            serve_job_cancel(x->job);
            return MHD_CONTENT_READER_END_WITH_ERROR;
        }
        if (!x->len && !x->finished && x->keepalive_s > 0 &&
            k3_now() - x->t_sent > x->keepalive_s && max >= sizeof KEEPALIVE - 1) {
            memcpy(buf, KEEPALIVE, sizeof KEEPALIVE - 1);
            x->t_sent = k3_now();
            return (ssize_t)(sizeof KEEPALIVE - 1);
        }
    }
}

static void stream_free(void *cls) {
    stream_ctx *x = cls;
    if (!x->finished) serve_job_cancel(x->job);
    serve_job_release(x->job);
    free(x->pend);
    free(x);
}

static enum MHD_Result reply_stream(serve_conn *c) {
    stream_ctx *x = k3_xcalloc(1, sizeof *x);
    x->job = c->job;
    double idle = c->srv->o->idle_timeout_s;
    x->keepalive_s = idle > 0 ? (idle / 3 > 0.3 ? idle / 3 : 0.3) : 0;
    x->t_sent = k3_now();
    x->conn = c->conn;
    serve_job_retain(c->job);
    return serve_reply_sse(c, stream_read, x, stream_free);
}

/* Non-streaming: collect the body the worker produces at the end. */
static enum MHD_Result reply_whole(serve_conn *c) {
    k3_buf all = {0};
    for (;;) {
        char *b;
        size_t n;
        int fin = serve_job_take(c->job, POLL_S, &b, &n);
        if (n) k3_buf_put(&all, b, n);
        free(b);
        if (fin) break;
        if (serve_client_gone(c->conn)) {
            serve_job_cancel(c->job);
            k3_buf_free(&all);
            c->status = 499; /* nginx's "client closed request", for the log */
            return MHD_NO;
        }
    }
    k3_buf_put(&all, "", 1); /* NUL-terminate */
    return serve_reply_json(c, c->job->status, all.s);
}

int serve_fit_context(const serve_server *srv, int64_t n_prompt, int *max_tokens, serve_err *e) {
    int ctx = serve_ctx_size(srv);
    if (ctx <= 0) return 0;
    if (n_prompt >= ctx)
        return serve_err_set(e, 400, NULL, "messages", "context_length_exceeded",
                             "This model's maximum context length is %d tokens, but the prompt "
                             "has %lld tokens (no room for a reply). Shorten the input.",
                             ctx, (long long)n_prompt);
    if (*max_tokens > ctx - n_prompt) *max_tokens = (int)(ctx - n_prompt); /* ends with "length" */
    return 0;
}

/* The request: root read as JSON already (taken), or c->body. */
static int parse_req(serve_conn *c, serve_kind kind, json_t *root, serve_req *q, serve_err *e) {
    if (root) return serve_req_from_json(root, kind, &c->srv->lim, q, e);
    /* a body whose JSON tree would cost far more than its bytes is refused
     * before jansson builds it */
    if (serve_json_budget(c->body.s ? c->body.s : "", c->body.n, NULL, e)) return -1;
    return serve_req_parse(c->body.s ? c->body.s : "", c->body.n, kind, &c->srv->lim, q, e);
}

serve_job *serve_make_job(serve_conn *c, serve_kind kind, json_t *root, serve_err *e) {
    serve_server *srv = c->srv;
    serve_req q;
    if (parse_req(c, kind, root, &q, e)) return NULL;
    serve_job *j = serve_job_new();
    j->req = q;
    if (serve_engine_prompt(srv->eng, &j->req, &j->prompt, &j->n_prompt, e) ||
        serve_engine_forced(srv->eng, &j->req, &j->forced, &j->n_forced, e)) {
        serve_job_release(j);
        return NULL;
    }
    if (serve_structured_new(srv->eng, &j->req, j->prompt, j->n_prompt, &j->constraint, e)) {
        serve_job_release(j);
        return NULL;
    }
    if (j->forced) { /* test mode: forced ids go through unconstrained (bad ones included) */
        k3_constraint_free(j->constraint);
        j->constraint = NULL;
    }
    if (serve_fit_context(srv, j->n_prompt, &j->req.max_tokens, e)) {
        serve_job_release(j);
        return NULL;
    }
    if (srv->o->timeout_s > 0) j->deadline = k3_now() + srv->o->timeout_s;
    j->cache_scope =
        serve_conn_scope(c, j->req.cache_salt, j->req.cache_salt_len, &j->cache_scope_len);
    return j;
}

/* The job's renderer (render, or the chat one) and the first bytes of its
 * stream, written before the worker can see the job. */
static void set_render(serve_job *j, serve_render render, const char *model) {
    j->render = render.ops
                    ? render
                    : serve_render_chat(j->req.kind, model, j->req.stream, j->req.include_usage);
    if (!j->render.ops->begin || !j->req.stream) return;
    k3_buf b = {0};
    j->render.ops->begin(j->render.ctx, &b);
    j->out = b.s;
    j->out_len = b.n;
    j->out_cap = b.cap;
}

static void release_render(serve_render r) {
    if (r.ops) r.ops->release(r.ctx);
}

int serve_submit_job(serve_conn *c, serve_job *j, serve_render render, serve_err *e) {
    set_render(j, render, c->srv->eng->name);
    int rc = serve_sched_submit(c->srv->sched, j);
    if (!rc) return 0;
    serve_job_release(j);
    if (rc == -2) /* the queue is full */
        return serve_err_set(e, 429, "rate_limit_exceeded", NULL, "queue_full", "%s", k3_errmsg());
    return serve_err_set(e, 503, "server_error", NULL, "shutting_down",
                         "The server is shutting down.");
}

serve_job *serve_open_job(serve_conn *c, serve_kind kind, json_t *root, serve_err *e) {
    if (!__atomic_load_n(&c->srv->closing, __ATOMIC_SEQ_CST))
        return serve_make_job(c, kind, root, e);
    json_decref(root);
    serve_err_set(e, 503, "server_error", NULL, "shutting_down", "The server is shutting down.");
    return NULL;
}

enum MHD_Result serve_run_made(serve_conn *c, serve_job *j, serve_render render) {
    serve_err e;
    if (serve_submit_job(c, j, render, &e)) return serve_reply_err(c, &e);
    c->job = j; /* the connection's reference, released when the request completes */
    return j->req.stream ? reply_stream(c) : reply_whole(c);
}

enum MHD_Result serve_run_job(serve_conn *c, serve_kind kind, json_t *root, serve_render render) {
    serve_err e;
    serve_job *j = serve_open_job(c, kind, root, &e);
    if (j) return serve_run_made(c, j, render);
    release_render(render);
    return serve_reply_err(c, &e);
}
