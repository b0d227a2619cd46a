/* render_chat.c — the core's events (events.h) as OpenAI chat completions
 * and completions: SSE chunks while streaming (role chunk, deltas, tool-call
 * header and arguments, finish chunk, the usage chunk when asked, [DONE]),
 * else the whole response at the end. The shapes are built by openai.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/mem.h"
#include "serve/events.h"
#include "serve/openai.h"

typedef struct {
    serve_resp resp;
    int stream, include_usage;
    int choice;        /* one choice of n: the id is the response's, not the job's */
    k3_buf name, args; /* the tool call being received */
} chat_ctx;

/* A piece of output is always recorded in resp (the whole response is built
 * from it); its chunk is sent only when streaming. */
static void put(chat_ctx *x, char *chunk, k3_buf *out) {
    if (x->stream)
        k3_buf_puts_free(out, chunk);
    else
        free(chunk);
}

static void on_start(chat_ctx *x, const serve_ev *ev, k3_buf *out) {
    if (!x->choice) {
        snprintf(x->resp.id, sizeof x->resp.id, "%s", ev->id);
        x->resp.created = ev->created;
    }
    if (x->stream && x->resp.kind == SERVE_CHAT) put(x, serve_resp_role_chunk(&x->resp), out);
}

static void on_finish(chat_ctx *x, const serve_ev *ev, k3_buf *out) {
    if (x->choice) { /* one of n: the connection ends the response */
        if (x->stream) k3_buf_puts_free(out, serve_resp_finish_chunk(&x->resp, ev->finish));
        return;
    }
    if (!x->stream) {
        k3_buf_puts_free(out, serve_resp_full(&x->resp, ev->finish, ev->usage));
        return;
    }
    k3_buf_puts_free(out, serve_resp_finish_chunk(&x->resp, ev->finish));
    if (x->include_usage) k3_buf_puts_free(out, serve_resp_usage_chunk(&x->resp, ev->usage));
    static const char done[] = "data: [DONE]\n\n";
    k3_buf_put(out, done, sizeof done - 1);
}

/* What OpenAI sends when generation fails: the error object as the body, or
 * as one SSE event followed by [DONE]. */
static void on_error(chat_ctx *x, const serve_ev *ev, k3_buf *out) {
    if (!x->stream) {
        k3_buf_puts_free(out, serve_err_json(ev->err));
        return;
    }
    k3_buf_put(out, "data: ", 6);
    k3_buf_puts_free(out, serve_err_json(ev->err));
    static const char tail[] = "\n\ndata: [DONE]\n\n";
    k3_buf_put(out, tail, x->choice ? 2 : sizeof tail - 1);
}

static void chat_on(void *ctx, const serve_ev *ev, k3_buf *out) {
    chat_ctx *x = ctx;
    switch (ev->kind) {
    case SERVE_EV_START:
        on_start(x, ev, out);
        break;
    case SERVE_EV_TEXT:
        put(x,
            serve_resp_text(&x->resp, ev->channel == SERVE_CH_REASONING ? "reasoning" : "content",
                            ev->text, ev->len),
            out);
        break;
    case SERVE_EV_TOOL_START:
        x->name.n = x->args.n = 0;
        k3_buf_puts(&x->name, ev->name);
        break;
    case SERVE_EV_TOOL_ARGS:
        k3_buf_put(&x->args, ev->text, ev->len);
        break;
    case SERVE_EV_TOOL_END: /* OpenAI's shape sends a call whole: header, then arguments */
        k3_buf_put(&x->name, "", 1);
        k3_buf_put(&x->args, "", 1);
        put(x, serve_resp_tool_call(&x->resp, x->name.s, x->args.s), out);
        break;
    case SERVE_EV_LOGPROB:
        serve_resp_add_logprob(&x->resp, ev->logprob);
        break;
    case SERVE_EV_FINISH:
        on_finish(x, ev, out);
        break;
    case SERVE_EV_ERROR:
        on_error(x, ev, out);
        break;
    }
}

static void chat_release(void *ctx) {
    chat_ctx *x = ctx;
    serve_resp_free(&x->resp);
    k3_buf_free(&x->name);
    k3_buf_free(&x->args);
    free(x);
}

static const serve_render_ops CHAT = {NULL, chat_on, chat_release};

serve_render serve_render_chat(serve_kind kind, const char *model, int stream, int include_usage) {
    chat_ctx *x = k3_xcalloc(1, sizeof *x);
    serve_resp_init(&x->resp, kind, model, 0);
    x->resp.streaming = stream;
    x->stream = stream;
    x->include_usage = include_usage;
    return (serve_render){&CHAT, x};
}

serve_render serve_render_chat_choice(const char *model, int stream, int index, const char *id,
                                      long long created) {
    serve_render r = serve_render_chat(SERVE_CHAT, model, stream, 0);
    chat_ctx *x = r.ctx;
    x->resp.index = index;
    x->choice = 1;
    snprintf(x->resp.id, sizeof x->resp.id, "%s", id);
    x->resp.created = created;
    return r;
}

char *serve_render_chat_tail(const serve_render *first, int include_usage, const serve_usage *u) {
    chat_ctx *x = first->ctx;
    k3_buf b = {0};
    if (include_usage) k3_buf_puts_free(&b, serve_resp_usage_chunk(&x->resp, u));
    k3_buf_puts(&b, "data: [DONE]\n\n");
    return b.s;
}

char *serve_render_chat_body(const serve_render *choices, const char *const *finish, int n,
                             const serve_usage *u) {
    serve_resp *rs[SERVE_MAX_N];
    for (int i = 0; i < n && i < SERVE_MAX_N; i++) rs[i] = &((chat_ctx *)choices[i].ctx)->resp;
    return serve_resp_full_n(rs, finish, n < SERVE_MAX_N ? n : SERVE_MAX_N, u);
}
