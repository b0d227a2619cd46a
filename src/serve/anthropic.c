/* anthropic.c — Anthropic Messages API (POST /v1/messages and
 * /v1/messages/count_tokens) on the serving core. The request
 * (anthropic_req.c: system, messages with text / tool_use / tool_result /
 * thinking blocks, tools (input_schema), tool_choice (auto / any / tool /
 * none), thinking (enabled with budget_tokens → K3's effort: < 4096 low,
 * < 16384 high, else max; disabled or absent → no thinking),
 * stop_sequences) becomes the core's request; this file's renderer turns
 * the core's events (events.h) into message_start, content_block_start /
 * delta / stop (thinking_delta, text_delta, input_json_delta),
 * message_delta (stop_reason, usage) and message_stop, or the whole
 * message. Errors use Anthropic's {"type":"error","error":{...}}. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/mem.h"
#include "gen/constrain.h"
#include "serve/apis.h"
#include "serve/http_internal.h"
#include "serve/limits.h"
#include "serve/structured.h"
#include "text/chat.h"

/* ---------------- output ---------------- */

typedef struct {
    char id[48];
    char model[128];
    int stream;
    int open;  /* 0 none, 1 thinking block, 2 text block */
    int index; /* next block index */
    json_t *content;
    k3_buf text;
    k3_buf name, args; /* the tool call being received */
    serve_usage usage;
    char stop[16];
} actx;

static void event(k3_buf *out, const char *type, json_t *doc) {
    json_object_set_new(doc, "type", json_string(type));
    char *s = json_dumps(doc, JSON_COMPACT);
    json_decref(doc);
    k3_buf_puts(out, "event: ");
    k3_buf_puts(out, type);
    k3_buf_puts(out, "\ndata: ");
    k3_buf_puts_free(out, s);
    k3_buf_puts(out, "\n\n");
}

static void close_block(actx *a, k3_buf *out) {
    if (!a->open) return;
    json_t *t = json_stringn(a->text.s ? a->text.s : "", a->text.n);
    if (a->open == 1) {
        json_array_append_new(a->content, json_pack("{s:s,s:o,s:s}", "type", "thinking", "thinking",
                                                    t, "signature", ""));
        if (out)
            event(out, "content_block_delta",
                  json_pack("{s:i,s:{s:s,s:s}}", "index", a->index, "delta", "type",
                            "signature_delta", "signature", ""));
    } else {
        json_array_append_new(a->content, json_pack("{s:s,s:o}", "type", "text", "text", t));
    }
    if (out) event(out, "content_block_stop", json_pack("{s:i}", "index", a->index));
    a->index++;
    a->open = 0;
    a->text.n = 0;
}

static void on_text(actx *a, int kind, const char *t, size_t n, k3_buf *out) {
    if (!a->stream) out = NULL;
    if (a->open != kind) {
        close_block(a, out);
        a->open = kind;
        if (out)
            event(out, "content_block_start",
                  kind == 1 ? json_pack("{s:i,s:{s:s,s:s,s:s}}", "index", a->index, "content_block",
                                        "type", "thinking", "thinking", "", "signature", "")
                            : json_pack("{s:i,s:{s:s,s:s}}", "index", a->index, "content_block",
                                        "type", "text", "text", ""));
    }
    k3_buf_put(&a->text, t, n);
    if (out)
        event(out, "content_block_delta",
              json_pack("{s:i,s:{s:s,s:s%}}", "index", a->index, "delta", "type",
                        kind == 1 ? "thinking_delta" : "text_delta",
                        kind == 1 ? "thinking" : "text", t, n));
}

static void a_tool_end(actx *a, const char *args, k3_buf *out) {
    if (!a->stream) out = NULL;
    close_block(a, out);
    const char *name = a->name.s;
    json_t *input = json_loads(args, 0, NULL);
    if (!json_is_object(input)) {
        json_decref(input);
        input = json_object();
    }
    char tid[96];
    snprintf(tid, sizeof tid, "toolu_%s_%d", a->id + 4, a->index);
    json_array_append_new(a->content, json_pack("{s:s,s:s,s:s,s:O}", "type", "tool_use", "id", tid,
                                                "name", name, "input", input));
    if (out) {
        event(out, "content_block_start",
              json_pack("{s:i,s:{s:s,s:s,s:s,s:{}}}", "index", a->index, "content_block", "type",
                        "tool_use", "id", tid, "name", name, "input"));
        char *compact = json_dumps(input, JSON_COMPACT);
        event(out, "content_block_delta",
              json_pack("{s:i,s:{s:s,s:s}}", "index", a->index, "delta", "type", "input_json_delta",
                        "partial_json", compact));
        free(compact);
        event(out, "content_block_stop", json_pack("{s:i}", "index", a->index));
    }
    json_decref(input);
    a->index++;
}

static const char *stop_reason(const actx *a) {
    if (!strcmp(a->stop, "length")) return "max_tokens";
    if (!strcmp(a->stop, "tool_calls")) return "tool_use";
    return "end_turn";
}

static char *a_body(actx *a);

static void a_finish(actx *a, const char *fin, const serve_usage *u, k3_buf *out) {
    close_block(a, a->stream ? out : NULL);
    a->usage = *u;
    snprintf(a->stop, sizeof a->stop, "%s", fin);
    if (!a->stream) {
        k3_buf_puts_free(out, a_body(a));
        return;
    }
    event(out, "message_delta",
          json_pack("{s:{s:s,s:n},s:{s:i,s:i,s:i}}", "delta", "stop_reason", stop_reason(a),
                    "stop_sequence", "usage", "input_tokens", u->prompt_tokens - u->cached_tokens,
                    "output_tokens", u->completion_tokens, "cache_read_input_tokens",
                    u->cached_tokens));
    event(out, "message_stop", json_object());
}

/* Generation failed: Anthropic's error document, or a stream's error event
 * (the open block is closed after it). */
static void a_error(actx *a, const serve_err *e, k3_buf *out) {
    if (!a->stream) {
        k3_buf_puts_free(out, serve_anthropic_err_json(e));
        return;
    }
    event(out, "error",
          json_pack("{s:{s:s,s:s}}", "error", "type", "api_error", "message", e->message));
    close_block(a, out);
}

static void a_on(void *ctx, const serve_ev *ev, k3_buf *out) {
    actx *a = ctx;
    switch (ev->kind) {
    case SERVE_EV_TEXT:
        on_text(a, ev->channel == SERVE_CH_REASONING ? 1 : 2, ev->text, ev->len, out);
        break;
    case SERVE_EV_TOOL_START:
        a->name.n = a->args.n = 0;
        k3_buf_puts(&a->name, ev->name);
        k3_buf_put(&a->name, "", 1);
        break;
    case SERVE_EV_TOOL_ARGS:
        k3_buf_put(&a->args, ev->text, ev->len);
        break;
    case SERVE_EV_TOOL_END:
        k3_buf_put(&a->args, "", 1);
        a_tool_end(a, a->args.s, out);
        break;
    case SERVE_EV_LOGPROB:
        json_decref(ev->logprob);
        break;
    case SERVE_EV_FINISH:
        a_finish(a, ev->finish, ev->usage, out);
        break;
    case SERVE_EV_ERROR:
        a_error(a, ev->err, out);
        break;
    case SERVE_EV_START:
        break;
    }
}

static json_t *usage_json(const serve_usage *u) {
    return json_pack("{s:i,s:i,s:i,s:i}", "input_tokens", u->prompt_tokens - u->cached_tokens,
                     "output_tokens", u->completion_tokens, "cache_read_input_tokens",
                     u->cached_tokens, "cache_creation_input_tokens", 0);
}

static void a_begin(void *ctx, k3_buf *out) {
    actx *a = ctx;
    event(out, "message_start",
          json_pack("{s:{s:s,s:s,s:s,s:s,s:[],s:n,s:n,s:{s:i,s:i}}}", "message", "id", a->id,
                    "type", "message", "role", "assistant", "model", a->model, "content",
                    "stop_reason", "stop_sequence", "usage", "input_tokens", 0, "output_tokens",
                    0));
}

static char *a_body(actx *a) {
    json_t *d =
        json_pack("{s:s,s:s,s:s,s:s,s:O,s:s,s:n,s:o}", "id", a->id, "type", "message", "role",
                  "assistant", "model", a->model, "content", a->content, "stop_reason",
                  stop_reason(a), "stop_sequence", "usage", usage_json(&a->usage));
    char *s = json_dumps(d, JSON_COMPACT);
    json_decref(d);
    return s;
}

static void a_release(void *ctx) {
    actx *a = ctx;
    json_decref(a->content);
    k3_buf_free(&a->text);
    k3_buf_free(&a->name);
    k3_buf_free(&a->args);
    free(a);
}

static const serve_render_ops MESSAGES = {a_begin, a_on, a_release};

static json_t *load(serve_conn *c, serve_err *e) {
    if (!serve_utf8_valid(c->body.s ? c->body.s : "", c->body.n)) {
        serve_err_set(e, 400, NULL, NULL, "invalid_utf8", "The request body is not valid UTF-8.");
        return NULL;
    }
    if (serve_json_budget(c->body.s ? c->body.s : "", c->body.n, NULL, e)) return NULL;
    json_error_t je;
    json_t *req = json_loadb(c->body.s ? c->body.s : "", c->body.n, JSON_ALLOW_NUL, &je);
    if (!json_is_object(req)) {
        json_decref(req);
        serve_err_set(e, 400, NULL, NULL, "invalid_json",
                      "The request body must be a JSON object (%s).", je.text);
        return NULL;
    }
    return req;
}

enum MHD_Result serve_handle_messages(serve_conn *c) {
    serve_err e;
    json_t *req = load(c, &e);
    if (!req) return serve_reply_err(c, &e);
    json_t *chat = serve_anthropic_to_chat(req, 0, &e);
    int stream = json_is_true(json_object_get(req, "stream"));
    json_decref(req);
    if (!chat) return serve_reply_err(c, &e);
    actx *a = k3_xcalloc(1, sizeof *a);
    static unsigned long long counter;
    snprintf(a->id, sizeof a->id, "msg_%llx%06llx", (unsigned long long)time(NULL),
             __atomic_add_fetch(&counter, 1, __ATOMIC_SEQ_CST));
    snprintf(a->model, sizeof a->model, "%s", c->srv->eng->name);
    a->stream = stream;
    a->content = json_array();
    json_object_set_new(chat, "stream", json_boolean(stream));
    return serve_run_job(c, SERVE_CHAT, chat, (serve_render){&MESSAGES, a});
}

enum MHD_Result serve_handle_count_tokens(serve_conn *c) {
    serve_err e;
    json_t *req = load(c, &e);
    if (!req) return serve_reply_err(c, &e);
    json_t *chat = serve_anthropic_to_chat(req, 1, &e);
    json_decref(req);
    if (!chat) return serve_reply_err(c, &e);
    serve_req q;
    if (serve_req_from_json(chat, SERVE_CHAT, &c->srv->lim, &q, &e)) return serve_reply_err(c, &e);
    k3_ids v = {0};
    int rc = k3_chat_encode(c->srv->eng->tok, q.root, &v);
    if (rc) serve_err_set(&e, 400, NULL, "messages", "invalid_value", "%s", k3_errmsg());
    /* the schemas (output format, tool parameters) must compile here too:
     * a body /v1/messages refuses is refused by both routes */
    struct k3_constraint *cons = NULL;
    if (!rc) rc = serve_structured_new(c->srv->eng, &q, v.ids, (int64_t)v.n, &cons, &e);
    k3_constraint_free(cons);
    serve_req_free(&q);
    if (rc) {
        k3_ids_free(&v);
        return serve_reply_err(c, &e);
    }
    json_t *doc = json_pack("{s:I}", "input_tokens", (json_int_t)v.n);
    k3_ids_free(&v);
    char *s = json_dumps(doc, JSON_COMPACT);
    json_decref(doc);
    return serve_reply_json(c, 200, s);
}
