/* responses.c — OpenAI Responses API (POST /v1/responses) on the serving
 * core: the request becomes the core's request (responses_req.c:
 * instructions → system, input items → messages, function_call /
 * function_call_output → tool calls and tool messages, reasoning.effort →
 * thinking + reasoning_effort, text.format → response_format,
 * max_output_tokens → max_tokens), and this file's renderer turns the core's
 * events (events.h) into Responses output items and the streaming events the
 * official SDKs parse. previous_response_id continues a conversation kept in
 * the Responses store (rstore.h: scoped by credential + cache_salt, a byte
 * budget; an evicted, unknown or another scope's id is a 400
 * previous_response_not_found). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/mem.h"
#include "serve/apis.h"
#include "serve/http_internal.h"
#include "serve/limits.h"

static json_t *opt(const json_t *o, const char *k) {
    json_t *v = json_object_get(o, k);
    return v && !json_is_null(v) ? v : NULL;
}

/* ---------------- output: items and events ---------------- */

typedef struct {
    serve_server *srv;
    char id[SERVE_RSTORE_ID_MAX];
    long long created;
    char model[128];
    json_t *req;     /* the Responses request (for echoing fields) */
    json_t *history; /* the chat messages sent (for the store) */
    json_t *input;   /* this turn's input items, stored form with ids */
    char *scope;     /* the requester's scope key (guard.h) */
    size_t scope_len;
    json_t *output;   /* output items so far */
    int seq;          /* sequence_number */
    int open;         /* 0 none, 1 reasoning item, 2 message item (the last output item) */
    k3_buf text;      /* the open item's text */
    k3_buf reasoning; /* all reasoning, for the store */
    k3_buf content;   /* all content, for the store */
    k3_buf call_id, name, args; /* the tool call being received */
    char status[16];
    serve_usage usage;
    unsigned long long n;
} rctx;

static void event(rctx *r, k3_buf *out, const char *type, json_t *doc) {
    json_object_set_new(doc, "type", json_string(type));
    json_object_set_new(doc, "sequence_number", json_integer(r->seq++));
    char *s = json_dumps(doc, JSON_COMPACT);
    json_decref(doc);
    k3_buf_puts(out, "event: ");
    k3_buf_puts(out, type);
    k3_buf_puts(out, "\ndata: ");
    k3_buf_puts_free(out, s);
    k3_buf_puts(out, "\n\n");
}

static json_t *usage_json(const serve_usage *u, int reasoning_tokens) {
    return json_pack("{s:i,s:{s:i},s:i,s:{s:i},s:i}", "input_tokens", u->prompt_tokens,
                     "input_tokens_details", "cached_tokens", u->cached_tokens, "output_tokens",
                     u->completion_tokens, "output_tokens_details", "reasoning_tokens",
                     reasoning_tokens, "total_tokens", u->prompt_tokens + u->completion_tokens);
}

static json_t *response_obj(rctx *r, int final) {
    json_t *o = json_pack(
        "{s:s,s:s,s:I,s:s,s:s,s:o,s:n,s:n}", "id", r->id, "object", "response", "created_at",
        (json_int_t)r->created, "status", final ? r->status : "in_progress", "model", r->model,
        "output", final ? json_deep_copy(r->output) : json_array(), "error", "incomplete_details");
    if (final && !strcmp(r->status, "incomplete"))
        json_object_set_new(o, "incomplete_details",
                            json_pack("{s:s}", "reason", "max_output_tokens"));
    static const char *const echo[] = {
        "instructions", "previous_response_id", "tools",     "tool_choice", "temperature",
        "top_p",        "max_output_tokens",    "reasoning", "text",        "metadata"};
    for (size_t i = 0; i < sizeof echo / sizeof *echo; i++) {
        json_t *v = json_object_get(r->req, echo[i]);
        json_object_set(o, echo[i], v ? v : json_null());
    }
    if (!json_object_get(r->req, "tools")) json_object_set_new(o, "tools", json_array());
    if (!json_object_get(r->req, "tool_choice"))
        json_object_set_new(o, "tool_choice", json_string("auto"));
    if (!json_object_get(r->req, "metadata")) json_object_set_new(o, "metadata", json_object());
    json_object_set_new(o, "parallel_tool_calls", json_true());
    json_object_set_new(o, "object", json_string("response"));
    json_object_set_new(o, "usage", final ? usage_json(&r->usage, 0) : json_null());
    return o;
}

static void item_id(rctx *r, char *out, size_t cap, const char *prefix) {
    snprintf(out, cap, "%s_%s_%llu", prefix, r->id + 5, ++r->n);
}

/* Close the open reasoning / message item (its done events). */
static void close_item(rctx *r, k3_buf *out) {
    if (!r->open) return;
    size_t idx = json_array_size(r->output) - 1;
    json_t *item = json_array_get(r->output, idx);
    const char *iid = json_string_value(json_object_get(item, "id"));
    json_t *text = json_stringn(r->text.s ? r->text.s : "", r->text.n);
    if (r->open == 1) {
        json_t *part = json_pack("{s:s,s:O}", "type", "summary_text", "text", text);
        if (out) {
            event(r, out, "response.reasoning_summary_text.done",
                  json_pack("{s:s,s:I,s:i,s:O}", "item_id", iid, "output_index", (json_int_t)idx,
                            "summary_index", 0, "text", text));
            event(r, out, "response.reasoning_summary_part.done",
                  json_pack("{s:s,s:I,s:i,s:O}", "item_id", iid, "output_index", (json_int_t)idx,
                            "summary_index", 0, "part", part));
        }
        json_object_set_new(item, "summary", json_pack("[o]", part));
    } else {
        json_t *part = json_pack("{s:s,s:O,s:[],s:[]}", "type", "output_text", "text", text,
                                 "annotations", "logprobs");
        if (out) {
            event(r, out, "response.output_text.done",
                  json_pack("{s:s,s:I,s:i,s:O,s:[]}", "item_id", iid, "output_index",
                            (json_int_t)idx, "content_index", 0, "text", text, "logprobs"));
            event(r, out, "response.content_part.done",
                  json_pack("{s:s,s:I,s:i,s:O}", "item_id", iid, "output_index", (json_int_t)idx,
                            "content_index", 0, "part", part));
        }
        json_object_set_new(item, "content", json_pack("[o]", part));
        json_object_set_new(item, "status", json_string("completed"));
    }
    json_decref(text);
    if (out)
        event(r, out, "response.output_item.done",
              json_pack("{s:I,s:O}", "output_index", (json_int_t)idx, "item", item));
    r->open = 0;
    r->text.n = 0;
}

static void open_item(rctx *r, int kind, k3_buf *out) {
    close_item(r, out);
    char iid[96];
    item_id(r, iid, sizeof iid, kind == 1 ? "rs" : "msg");
    json_t *item = kind == 1 ? json_pack("{s:s,s:s,s:[],s:n}", "id", iid, "type", "reasoning",
                                         "summary", "encrypted_content")
                             : json_pack("{s:s,s:s,s:s,s:s,s:[]}", "id", iid, "type", "message",
                                         "status", "in_progress", "role", "assistant", "content");
    json_array_append_new(r->output, item);
    size_t idx = json_array_size(r->output) - 1;
    r->open = kind;
    if (!out) return;
    event(r, out, "response.output_item.added",
          json_pack("{s:I,s:O}", "output_index", (json_int_t)idx, "item", item));
    if (kind == 1)
        event(r, out, "response.reasoning_summary_part.added",
              json_pack("{s:s,s:I,s:i,s:{s:s,s:s}}", "item_id", iid, "output_index",
                        (json_int_t)idx, "summary_index", 0, "part", "type", "summary_text", "text",
                        ""));
    else
        event(r, out, "response.content_part.added",
              json_pack("{s:s,s:I,s:i,s:{s:s,s:s,s:[],s:[]}}", "item_id", iid, "output_index",
                        (json_int_t)idx, "content_index", 0, "part", "type", "output_text", "text",
                        "", "annotations", "logprobs"));
}

/* out == NULL when not streaming (the sink buffer is ignored then) */
static k3_buf *sink(rctx *r, k3_buf *out) {
    return json_is_true(json_object_get(r->req, "stream")) ? out : NULL;
}

static void on_text(rctx *r, int kind, const char *t, size_t n, k3_buf *out) {
    out = sink(r, out);
    if (r->open != kind) open_item(r, kind, out);
    k3_buf_put(&r->text, t, n);
    k3_buf_put(kind == 1 ? &r->reasoning : &r->content, t, n);
    if (!out) return;
    size_t idx = json_array_size(r->output) - 1;
    const char *iid = json_string_value(json_object_get(json_array_get(r->output, idx), "id"));
    if (kind == 1)
        event(r, out, "response.reasoning_summary_text.delta",
              json_pack("{s:s,s:I,s:i,s:s%}", "item_id", iid, "output_index", (json_int_t)idx,
                        "summary_index", 0, "delta", t, n));
    else
        event(r, out, "response.output_text.delta",
              json_pack("{s:s,s:I,s:i,s:s%,s:[]}", "item_id", iid, "output_index", (json_int_t)idx,
                        "content_index", 0, "delta", t, n, "logprobs"));
}

static void r_tool(rctx *r, const char *id, const char *name, const char *args, k3_buf *out) {
    out = sink(r, out);
    close_item(r, out);
    char iid[96];
    item_id(r, iid, sizeof iid, "fc");
    json_t *item = json_pack("{s:s,s:s,s:s,s:s,s:s,s:s}", "id", iid, "type", "function_call",
                             "status", "in_progress", "call_id", id, "name", name, "arguments", "");
    json_array_append_new(r->output, item);
    size_t idx = json_array_size(r->output) - 1;
    if (out) {
        event(r, out, "response.output_item.added",
              json_pack("{s:I,s:O}", "output_index", (json_int_t)idx, "item", item));
        event(r, out, "response.function_call_arguments.delta",
              json_pack("{s:s,s:I,s:s}", "item_id", iid, "output_index", (json_int_t)idx, "delta",
                        args));
        event(r, out, "response.function_call_arguments.done",
              json_pack("{s:s,s:I,s:s,s:s}", "item_id", iid, "output_index", (json_int_t)idx,
                        "name", name, "arguments", args));
    }
    json_object_set_new(item, "arguments", json_string(args));
    json_object_set_new(item, "status", json_string("completed"));
    if (out)
        event(r, out, "response.output_item.done",
              json_pack("{s:I,s:O}", "output_index", (json_int_t)idx, "item", item));
}

/* Keep the conversation (with this answer) for previous_response_id, the
 * response for GET /v1/responses/{id} and the input for .../input_items, as
 * JSON texts (rstore.h). */
static void store(rctx *r) {
    json_t *msgs = json_deep_copy(r->history);
    json_t *m = json_pack("{s:s,s:s%}", "role", "assistant", "content",
                          r->content.s ? r->content.s : "", r->content.n);
    if (r->reasoning.n)
        json_object_set_new(m, "reasoning_content", json_stringn(r->reasoning.s, r->reasoning.n));
    json_t *calls = json_array();
    size_t i;
    json_t *it;
    json_array_foreach(r->output, i, it) {
        if (strcmp(json_string_value(json_object_get(it, "type")), "function_call")) continue;
        json_array_append_new(calls, json_pack("{s:O,s:s,s:{s:O,s:O}}", "id",
                                               json_object_get(it, "call_id"), "type", "function",
                                               "function", "name", json_object_get(it, "name"),
                                               "arguments", json_object_get(it, "arguments")));
    }
    if (json_array_size(calls)) json_object_set(m, "tool_calls", calls);
    json_decref(calls);
    json_array_append_new(msgs, m);
    json_t *resp = response_obj(r, 1);
    char *texts[3] = {json_dumps(resp, JSON_COMPACT), json_dumps(msgs, JSON_COMPACT),
                      json_dumps(r->input, JSON_COMPACT)};
    if (texts[0] && texts[1] && texts[2])
        serve_rstore_put(r->srv->rstore, r->scope, r->scope_len, r->id, texts[0], texts[1],
                         texts[2]);
    for (int k = 0; k < 3; k++) free(texts[k]);
    json_decref(resp);
    json_decref(msgs);
}

static char *r_body(void *ctx);

static void r_finish(rctx *r, const char *fin, const serve_usage *u, k3_buf *out) {
    k3_buf *ev = sink(r, out);
    close_item(r, ev);
    r->usage = *u;
    snprintf(r->status, sizeof r->status, "%s",
             !strcmp(fin, "length") ? "incomplete" : "completed");
    if (!json_is_false(json_object_get(r->req, "store"))) store(r);
    if (!ev) {
        k3_buf_puts_free(out, r_body(r));
        return;
    }
    event(r, ev, !strcmp(r->status, "incomplete") ? "response.incomplete" : "response.completed",
          json_pack("{s:o}", "response", response_obj(r, 1)));
}

/* Generation failed: the error document, or a stream's error and
 * response.failed events (the open item is closed after them). */
static void r_error(rctx *r, const serve_err *err, k3_buf *out) {
    if (!sink(r, out)) {
        k3_buf_puts_free(out, serve_err_json(err));
        return;
    }
    event(r, out, "error",
          json_pack("{s:s,s:s,s:n}", "code", "server_error", "message", err->message, "param"));
    snprintf(r->status, sizeof r->status, "failed");
    json_t *resp = response_obj(r, 1);
    json_object_set_new(resp, "error",
                        json_pack("{s:s,s:s}", "code", "server_error", "message", err->message));
    event(r, out, "response.failed", json_pack("{s:o}", "response", resp));
    close_item(r, out);
}

static void r_on(void *ctx, const serve_ev *ev, k3_buf *out) {
    rctx *r = ctx;
    switch (ev->kind) {
    case SERVE_EV_TEXT:
        on_text(r, ev->channel == SERVE_CH_REASONING ? 1 : 2, ev->text, ev->len, out);
        break;
    case SERVE_EV_TOOL_START:
        r->call_id.n = r->name.n = r->args.n = 0;
        k3_buf_put(&r->call_id, ev->call_id, strlen(ev->call_id) + 1);
        k3_buf_put(&r->name, ev->name, strlen(ev->name) + 1);
        break;
    case SERVE_EV_TOOL_ARGS:
        k3_buf_put(&r->args, ev->text, ev->len);
        break;
    case SERVE_EV_TOOL_END:
        k3_buf_put(&r->args, "", 1);
        r_tool(r, r->call_id.s, r->name.s, r->args.s, out);
        break;
    case SERVE_EV_LOGPROB:
        json_decref(ev->logprob);
        break;
    case SERVE_EV_FINISH:
        r_finish(r, ev->finish, ev->usage, out);
        break;
    case SERVE_EV_ERROR:
        r_error(r, ev->err, out);
        break;
    case SERVE_EV_START:
        break;
    }
}

static void r_begin(void *ctx, k3_buf *out) {
    rctx *r = ctx;
    event(r, out, "response.created", json_pack("{s:o}", "response", response_obj(r, 0)));
    event(r, out, "response.in_progress", json_pack("{s:o}", "response", response_obj(r, 0)));
}

static char *r_body(void *ctx) {
    json_t *o = response_obj(ctx, 1);
    char *s = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    return s;
}

static void r_release(void *ctx) {
    rctx *r = ctx;
    json_decref(r->req);
    json_decref(r->history);
    json_decref(r->input);
    free(r->scope);
    json_decref(r->output);
    k3_buf_free(&r->text);
    k3_buf_free(&r->reasoning);
    k3_buf_free(&r->content);
    k3_buf_free(&r->call_id);
    k3_buf_free(&r->name);
    k3_buf_free(&r->args);
    free(r);
}

static const serve_render_ops RESPONSES = {r_begin, r_on, r_release};

/* The request's cache_salt: absent, or a non-empty string of at most 1024
 * bytes (as on the chat route, which checks it again). 0 or -1 + e. */
static int cache_salt(const json_t *req, const char **s, size_t *n, serve_err *e) {
    json_t *salt = opt(req, "cache_salt");
    *s = salt ? json_string_value(salt) : NULL;
    *n = salt ? json_string_length(salt) : 0;
    if (salt && (!*s || !*n || *n > 1024))
        return serve_err_set(e, 400, NULL, "cache_salt", "invalid_value",
                             "'cache_salt' must be a non-empty string of at most 1024 bytes.");
    return 0;
}

/* The stored conversation previous_response_id names in scope, or NULL + e
 * (the same answer for an unknown, evicted, deleted or another scope's id). */
static json_t *previous(serve_conn *c, const json_t *prev, const char *scope, size_t scope_len,
                        serve_err *e) {
    char *text = json_is_string(prev) ? serve_rstore_get(c->srv->rstore, scope, scope_len,
                                                         json_string_value(prev), SERVE_RS_MESSAGES)
                                      : NULL;
    json_t *history = text ? json_loads(text, 0, NULL) : NULL;
    free(text);
    if (!history)
        serve_err_set(e, 400, NULL, "previous_response_id", "previous_response_not_found",
                      "Previous response with id '%.64s' not found.",
                      json_is_string(prev) ? json_string_value(prev) : "?");
    return history;
}

/* Ids for the input items that have none (not resolved references). */
static void input_ids(rctx *r) {
    size_t i;
    json_t *it;
    json_array_foreach(r->input, i, it) {
        if (json_object_get(it, "id")) continue;
        const char *t = json_string_value(json_object_get(it, "type"));
        char iid[96];
        item_id(r, iid, sizeof iid,
                !strcmp(t, "function_call")          ? "fc"
                : !strcmp(t, "function_call_output") ? "fco"
                : !strcmp(t, "reasoning")            ? "rs"
                                                     : "msg");
        json_object_set_new(it, "id", json_string(iid));
    }
}

/* Parse the body as a JSON object, or NULL + e. */
static json_t *parse_body(serve_conn *c, serve_err *e) {
    json_error_t je;
    const char *b = c->body.s ? c->body.s : "";
    if (!serve_utf8_valid(b, c->body.n)) {
        serve_err_set(e, 400, NULL, NULL, "invalid_utf8", "The request body is not valid UTF-8.");
        return NULL;
    }
    if (serve_json_budget(b, c->body.n, NULL, e)) return NULL;
    json_t *req = json_loadb(b, c->body.n, JSON_ALLOW_NUL, &je);
    if (!json_is_object(req)) {
        json_decref(req);
        serve_err_set(e, 400, NULL, NULL, "invalid_json",
                      "The request body must be a JSON object (%s).", je.text);
        return NULL;
    }
    json_t *stream = opt(req, "stream");
    if (stream && !json_is_boolean(stream)) {
        json_decref(req);
        serve_err_set(e, 400, NULL, "stream", "invalid_type", "'stream' must be a boolean.");
        return NULL;
    }
    return req;
}

static enum MHD_Result fail(serve_conn *c, const serve_err *e, rctx *r, json_t *req) {
    if (r)
        r_release(r);
    else
        json_decref(req);
    return serve_reply_err(c, e);
}

enum MHD_Result serve_handle_responses(serve_conn *c) {
    serve_err e;
    json_t *req = parse_body(c, &e);
    if (!req) return serve_reply_err(c, &e);
    const char *salt;
    size_t salt_len;
    if (cache_salt(req, &salt, &salt_len, &e)) return fail(c, &e, NULL, req);
    rctx *r = k3_xcalloc(1, sizeof *r);
    r->srv = c->srv;
    r->req = req;
    r->scope = serve_conn_scope(c, salt, salt_len, &r->scope_len);
    r->output = json_array();
    r->input = json_array();
    if (serve_rstore_new_id(r->id)) {
        serve_err_set(&e, 500, "server_error", NULL, "internal_error",
                      "The OS's random source failed.");
        return fail(c, &e, r, NULL);
    }
    json_t *history = NULL, *prev = opt(req, "previous_response_id");
    if (prev && !(history = previous(c, prev, r->scope, r->scope_len, &e)))
        return fail(c, &e, r, NULL);
    serve_rscope rs = {c->srv->rstore, r->scope, r->scope_len};
    json_t *chat = serve_responses_to_chat(req, history, &rs, r->input, &e);
    if (!chat) return fail(c, &e, r, NULL);
    input_ids(r);
    r->history = json_deep_copy(json_object_get(chat, "messages"));
    if (opt(req, "instructions")) json_array_remove(r->history, 0); /* this turn only */
    r->created = (long long)time(NULL);
    snprintf(r->model, sizeof r->model, "%s", c->srv->eng->name);
    snprintf(r->status, sizeof r->status, "completed");
    json_object_set_new(chat, "stream", json_boolean(json_is_true(opt(req, "stream"))));
    return serve_run_job(c, SERVE_CHAT, chat, (serve_render){&RESPONSES, r});
}
