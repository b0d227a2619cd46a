/* http_xlate.c — runs a request that was translated into a chat request
 * (Responses API, Anthropic Messages) through the normal generation path and
 * re-shapes its chat stream with the API's own events (serve_api, xlate.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/mem.h"
#include "serve/http_internal.h"

#define POLL_S 0.1

typedef struct {
    serve_job *job;
    struct MHD_Connection *conn;
    const serve_api *api;
    void *ctx;
    serve_xlate x;
    k3_buf out;
    size_t off;
    int finished;
    double keepalive_s, t_sent;
} xstream;

static ssize_t xstream_read(void *cls, uint64_t pos, char *buf, size_t max) {
    xstream *s = cls;
    for (;;) {
        if (s->off < s->out.n) {
            size_t n = s->out.n - s->off < max ? s->out.n - s->off : max;
            memcpy(buf, s->out.s + s->off, n);
            s->off += n;
            s->t_sent = k3_now();
            return (ssize_t)n;
        }
        s->out.n = s->off = 0;
        if (s->finished) return MHD_CONTENT_READER_END_OF_STREAM;
        char *b;
        size_t n;
        s->finished = serve_job_take(s->job, POLL_S, &b, &n);
        serve_xlate_feed(&s->x, &s->api->ops, s->ctx, b, n, s->finished, &s->out);
        free(b);
        if (!n && !s->finished && serve_client_gone(s->conn)) {
            serve_job_cancel(s->job);
            return MHD_CONTENT_READER_END_WITH_ERROR;
        }
        if (!s->out.n && !s->finished && s->keepalive_s > 0 &&
            k3_now() - s->t_sent > s->keepalive_s) {
            static const char ka[] = ": keep-alive\n\n";
            k3_buf_put(&s->out, ka, sizeof ka - 1);
        }
    }
}

static void xstream_free(void *cls) {
    xstream *s = cls;
    if (!s->finished) serve_job_cancel(s->job);
    serve_job_release(s->job);
    serve_xlate_free(&s->x);
    k3_buf_free(&s->out);
    s->api->release(s->ctx);
    free(s);
}

enum MHD_Result serve_run_translated(serve_conn *c, json_t *chat, int stream, const serve_api *api,
                                     void *ctx) {
    json_object_set_new(chat, "stream", json_true());
    json_object_set_new(chat, "stream_options", json_pack("{s:b}", "include_usage", 1));
    char *body = json_dumps(chat, JSON_COMPACT);
    json_decref(chat);
    serve_err e;
    if (!body) {
        api->release(ctx);
        serve_err_set(&e, 500, "server_error", NULL, "internal_error", "out of memory");
        return serve_reply_err(c, &e);
    }
    c->body.n = 0;
    k3_buf_put(&c->body, body, strlen(body));
    free(body);
    if (serve_start_job(c, SERVE_CHAT, &e)) {
        api->release(ctx);
        return serve_reply_err(c, &e);
    }
    if (stream) {
        xstream *s = k3_xcalloc(1, sizeof *s);
        s->job = c->job;
        s->conn = c->conn;
        s->api = api;
        s->ctx = ctx;
        serve_xlate_init(&s->x);
        double idle = c->srv->o->idle_timeout_s;
        s->keepalive_s = idle > 0 ? (idle / 3 > 0.3 ? idle / 3 : 0.3) : 0;
        s->t_sent = k3_now();
        serve_job_retain(c->job);
        api->begin(ctx, &s->out);
        return serve_reply_sse(c, xstream_read, s, xstream_free);
    }
    serve_xlate x;
    serve_xlate_init(&x);
    k3_buf sink = {0}; /* non-streaming: the ops accumulate, nothing is sent */
    for (;;) {
        char *b;
        size_t n;
        int fin = serve_job_take(c->job, POLL_S, &b, &n);
        serve_xlate_feed(&x, &api->ops, ctx, b, n, fin, &sink);
        free(b);
        if (fin) break;
        if (serve_client_gone(c->conn)) {
            serve_job_cancel(c->job);
            serve_xlate_free(&x);
            k3_buf_free(&sink);
            api->release(ctx);
            c->status = 499;
            return MHD_NO;
        }
    }
    int failed = x.failed;
    serve_xlate_free(&x);
    k3_buf_free(&sink);
    enum MHD_Result res;
    if (failed) {
        serve_err_set(&e, 500, "server_error", NULL, "engine_error", "%s",
                      c->job->error[0] ? c->job->error : "generation failed");
        res = serve_reply_err(c, &e);
    } else {
        res = serve_reply_json(c, 200, api->body(ctx));
    }
    api->release(ctx);
    return res;
}
