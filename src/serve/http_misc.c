/* http_misc.c — the small endpoints: GET /health, GET /v1/models[/{id}],
 * GET /metrics (Prometheus text), GET
 * /props (llama.cpp-style server properties), POST /tokenize and POST
 * /detokenize (llama.cpp and vLLM request/response fields). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/mem.h"
#include "base/utf8safe.h"
#include "serve/http_internal.h"
#include "serve/limits.h"
#include "text/chat.h"
#include "text/tokenizer.h"

static json_t *model_object(const serve_conn *c, const char *id) {
    json_t *m = json_pack("{s:s,s:s,s:I,s:s,s:s}", "id", id, "object", "model", "created",
                          (json_int_t)c->srv->t_start, "owned_by", "k3", "root", c->srv->eng->name);
    int ctx = serve_ctx_size(c->srv);
    if (ctx > 0) { /* vLLM's and OpenRouter/LM Studio's names for it */
        json_object_set_new(m, "max_model_len", json_integer(ctx));
        json_object_set_new(m, "context_length", json_integer(ctx));
    }
    return m;
}

/* GET /v1/models/{id} */
enum MHD_Result serve_handle_model(serve_conn *c) {
    const char *id = c->rest;
    if (!serve_model_known(&c->srv->lim, id)) {
        serve_err e;
        char got[200], have[200]; /* clipped on character boundaries */
        k3_utf8_escape(got, sizeof got, id, strlen(id), 0);
        k3_utf8_escape(have, sizeof have, c->srv->eng->name, strlen(c->srv->eng->name), 0);
        serve_err_set(&e, 404, NULL, "model", "model_not_found",
                      "The model '%s' does not exist (this server serves '%s').", got, have);
        return serve_reply_err(c, &e);
    }
    json_t *m = model_object(c, id);
    char *s = json_dumps(m, JSON_COMPACT);
    json_decref(m);
    return serve_reply_json(c, 200, s);
}

/* Every served id (the name, then the aliases) as a model object. */
enum MHD_Result serve_handle_models(serve_conn *c) {
    json_t *data = json_array();
    json_array_append_new(data, model_object(c, c->srv->eng->name));
    for (int i = 0; i < c->srv->o->n_aliases; i++)
        if (strcmp(c->srv->o->aliases[i], c->srv->eng->name))
            json_array_append_new(data, model_object(c, c->srv->o->aliases[i]));
    json_t *doc = json_pack("{s:s,s:o}", "object", "list", "data", data);
    char *s = json_dumps(doc, JSON_COMPACT);
    json_decref(doc);
    return serve_reply_json(c, 200, s);
}

/* /health without the key when one is set: liveness only, no counters. */
/* The scheduler's counters as the /health "batch" object. */
static json_t *batch_stats_json(const serve_sched_stats *st) {
    return json_pack("{s:I,s:I,s:i,s:I,s:I,s:I,s:i,s:i}", "steps", (json_int_t)st->steps,
                     "step_sequences", (json_int_t)st->step_sequences, "max_step_sequences",
                     st->max_step_sequences, "rejected_queue", (json_int_t)st->rejected_queue,
                     "cache_snapshots", (json_int_t)st->cache_snapshots, "cache_scopes",
                     (json_int_t)st->cache_scopes, "threads", st->threads, "states_kept",
                     st->states_kept);
}

static enum MHD_Result health_minimal(serve_conn *c) {
    int closing = __atomic_load_n(&c->srv->closing, __ATOMIC_SEQ_CST);
    return serve_reply_json(
        c, 200, k3_xstrdup(closing ? "{\"status\":\"closing\"}" : "{\"status\":\"ok\"}"));
}

enum MHD_Result serve_handle_health(serve_conn *c) {
    if (!serve_auth_ok(c)) return health_minimal(c);
    serve_sched_stats st = serve_sched_get_stats(c->srv->sched);
    json_t *cache =
        json_pack("{s:i,s:I,s:I,s:I,s:I,s:I,s:I}", "entries", st.cache_entries, "bytes",
                  (json_int_t)st.cache_bytes, "budget", (json_int_t)st.cache_budget, "lookups",
                  (json_int_t)st.cache_lookups, "hits", (json_int_t)st.cache_hits, "tokens_reused",
                  (json_int_t)st.cache_tokens_reused, "evictions", (json_int_t)st.cache_evictions);
    json_t *doc =
        json_pack("{s:s,s:s,s:i,s:i,s:I,s:I,s:I,s:I,s:o}", "status",
                  __atomic_load_n(&c->srv->closing, __ATOMIC_SEQ_CST) ? "closing" : "ok", "model",
                  c->srv->eng->name, "active", st.active, "queued", st.queued, "requests_done",
                  (json_int_t)st.requests_done, "prefill_tokens", (json_int_t)st.prefill_tokens,
                  "decode_tokens", (json_int_t)st.decode_tokens, "rss_bytes",
                  (json_int_t)k3_current_rss(), "prompt_cache", cache);
    json_object_set_new(doc, "batch", batch_stats_json(&st));
    json_object_set_new(doc, "limits", serve_limits_json(c->srv->o, serve_ctx_size(c->srv)));
    json_object_set_new(doc, "paused", json_integer(st.paused));
    json_object_set_new(doc, "connections", serve_conns_stats_json(&c->srv->conns));
    char *s = json_dumps(doc, JSON_COMPACT);
    json_decref(doc);
    return serve_reply_json(c, 200, s);
}

enum MHD_Result serve_handle_metrics(serve_conn *c) {
    serve_sched_stats st = serve_sched_get_stats(c->srv->sched);
    k3_buf out = {0};
    serve_metrics_text(&c->srv->metrics, &st, c->srv->eng->name, &out);
    serve_rstore_metrics(c->srv->rstore, c->srv->eng->name, &out);
    k3_buf_put(&out, "", 1);
    return serve_reply(c, 200, "text/plain; version=0.0.4; charset=utf-8", out.s);
}

enum MHD_Result serve_handle_props(serve_conn *c) {
    const serve_server *srv = c->srv;
    json_t *aliases = json_array();
    for (int i = 0; i < srv->o->n_aliases; i++)
        json_array_append_new(aliases, json_string(srv->o->aliases[i]));
    int ctx = serve_ctx_size(srv);
    json_t *params =
        json_pack("{s:f,s:f,s:i,s:f,s:f,s:i}", "temperature", 1.0, "top_p", 1.0, "top_k", 0,
                  "min_p", 0.0, "repetition_penalty", 1.0, "max_tokens", srv->o->max_tokens_cap);
    json_t *doc = json_pack(
        "{s:s,s:o,s:i,s:i,s:i,s:{s:i,s:o},s:s,s:{s:b,s:b},s:s,s:b}", "model_alias", srv->eng->name,
        "aliases", aliases, "n_ctx", ctx, "n_vocab", srv->eng->vocab, "total_slots",
        srv->o->max_active, "default_generation_settings", "n_ctx", ctx, "params", params,
        "chat_template", "kimi-k3 xtml (built in, src/text/chat.c)", "modalities", "vision", 0,
        "audio", 0, "build_info", "k3", "test_mode", srv->o->test_mode);
    char *s = json_dumps(doc, JSON_COMPACT);
    json_decref(doc);
    return serve_reply_json(c, 200, s);
}

/* Parse the body as a JSON object; NULL after replying 400. */
static json_t *body_object(serve_conn *c, enum MHD_Result *res) {
    serve_err e;
    const char *b = c->body.s ? c->body.s : "";
    if (!serve_utf8_valid(b, c->body.n)) {
        serve_err_set(&e, 400, NULL, NULL, "invalid_utf8", "The request body is not valid UTF-8.");
        *res = serve_reply_err(c, &e);
        return NULL;
    }
    if (serve_json_budget(b, c->body.n, NULL, &e)) { /* before jansson builds a tree */
        *res = serve_reply_err(c, &e);
        return NULL;
    }
    json_error_t je;
    json_t *root = json_loadb(b, c->body.n, JSON_ALLOW_NUL, &je);
    if (!root || !json_is_object(root)) {
        if (root)
            serve_err_set(&e, 400, NULL, NULL, "invalid_json",
                          "The request body must be a JSON object.");
        else
            serve_err_set(&e, 400, NULL, NULL, "invalid_json",
                          "The request body is not valid JSON: %s (line %d, column %d).", je.text,
                          je.line, je.column);
        json_decref(root);
        *res = serve_reply_err(c, &e);
        return NULL;
    }
    return root;
}

static enum MHD_Result bad(serve_conn *c, json_t *root, const char *param, const char *msg) {
    serve_err e;
    serve_err_set(&e, 400, NULL, param, "invalid_value", "%s", msg);
    json_decref(root);
    return serve_reply_err(c, &e);
}

/* Append s[0..n) (valid UTF-8) as a JSON string. */
static void put_json_string(k3_buf *b, const char *s, size_t n) {
    k3_buf_putc(b, '"');
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch == '"' || ch == '\\') {
            k3_buf_putc(b, '\\');
            k3_buf_putc(b, (char)ch);
        } else if (ch < 0x20 || ch == 0x7f) {
            char esc[8];
            snprintf(esc, sizeof esc, "\\u%04x", ch);
            k3_buf_put(b, esc, 6);
        } else {
            k3_buf_putc(b, (char)ch);
        }
    }
    k3_buf_putc(b, '"');
}

/* A token's text: a string when its bytes are UTF-8, else the byte values. */
static void put_piece(k3_buf *b, const k3_tokenizer *tok, int32_t id) {
    size_t n = 0;
    const char *s = k3_tok_token_bytes(tok, id, &n);
    if (!s) n = 0, s = "";
    if (serve_utf8_valid(s, n)) {
        put_json_string(b, s, n);
        return;
    }
    k3_buf_putc(b, '[');
    for (size_t i = 0; i < n; i++) {
        char num[8];
        int k = snprintf(num, sizeof num, "%s%u", i ? "," : "", (unsigned char)s[i]);
        k3_buf_put(b, num, (size_t)k);
    }
    k3_buf_putc(b, ']');
}

static enum MHD_Result reply_too_large(serve_conn *c, const char *what) {
    serve_err e;
    serve_err_set(&e, 400, NULL, NULL, "reply_too_large",
                  "The reply would exceed the limit of %d bytes (%s); send less text%s.",
                  SERVE_MAX_REPLY, what,
                  strcmp(what, "tokens with pieces") ? "" : " or leave out with_pieces");
    return serve_reply_err(c, &e);
}

/* The /tokenize reply, written as it goes (a jansson tree would cost ~200
 * bytes a token): NULL once it passes SERVE_MAX_REPLY bytes. */
static char *tokenize_reply(const serve_server *srv, const k3_ids *v, int with_pieces) {
    k3_buf b = {0};
    k3_buf_puts(&b, "{\"tokens\":[");
    for (size_t i = 0; i < v->n && b.n <= SERVE_MAX_REPLY; i++) {
        char num[40];
        int k = snprintf(num, sizeof num, "%s%s%d", i ? "," : "", with_pieces ? "{\"id\":" : "",
                         v->ids[i]);
        k3_buf_put(&b, num, (size_t)k);
        if (!with_pieces) continue;
        k3_buf_puts(&b, ",\"piece\":");
        put_piece(&b, srv->eng->tok, v->ids[i]);
        k3_buf_putc(&b, '}');
    }
    char tail[96];
    int k = snprintf(tail, sizeof tail, "],\"count\":%zu,\"max_model_len\":%d}", v->n,
                     serve_ctx_size(srv));
    k3_buf_put(&b, tail, (size_t)k + 1); /* with the NUL */
    if (b.n - 1 > SERVE_MAX_REPLY) {
        k3_buf_free(&b);
        return NULL;
    }
    return b.s;
}

/* {"content"|"prompt": text} or {"messages": [...]} (the chat prompt,
 * rendered as /v1/chat/completions would); "with_pieces", "parse_special".
 * Text may hold U+0000: it is tokenized with its length. */
enum MHD_Result serve_handle_tokenize(serve_conn *c) {
    enum MHD_Result res;
    json_t *root = body_object(c, &res);
    if (!root) return res;
    const serve_engine *eng = c->srv->eng;
    json_t *text = json_object_get(root, "content");
    if (!text) text = json_object_get(root, "prompt");
    json_t *msgs = json_object_get(root, "messages");
    json_t *wp = json_object_get(root, "with_pieces"), *ps = json_object_get(root, "parse_special");
    if ((wp && !json_is_boolean(wp)) || (ps && !json_is_boolean(ps)))
        return bad(c, root, wp && !json_is_boolean(wp) ? "with_pieces" : "parse_special",
                   "'with_pieces' and 'parse_special' must be booleans.");
    k3_ids v = {0};
    int rc, with_pieces = json_is_true(wp);
    if (json_is_string(text)) {
        rc = k3_tok_encode_append(eng->tok, json_string_value(text), json_string_length(text),
                                  json_is_true(ps), &v);
    } else if (json_is_array(msgs)) {
        serve_req q;
        serve_err e;
        if (serve_req_parse(c->body.s, c->body.n, SERVE_CHAT, &c->srv->lim, &q, &e)) {
            json_decref(root);
            return serve_reply_err(c, &e);
        }
        rc = k3_chat_encode(eng->tok, q.root, &v);
        serve_req_free(&q);
    } else {
        return bad(c, root, "content",
                   "Send 'content' (or 'prompt') as a string, or 'messages' as an array.");
    }
    if (rc) {
        k3_ids_free(&v);
        return bad(c, root, json_is_string(text) ? "content" : "messages", k3_errmsg());
    }
    json_decref(root);
    char *s = tokenize_reply(c->srv, &v, with_pieces);
    k3_ids_free(&v);
    if (!s) return reply_too_large(c, with_pieces ? "tokens with pieces" : "token ids");
    return serve_reply_json(c, 200, s);
}

/* {"tokens": [ids]} -> {"content": text, "prompt": text} (llama.cpp, vLLM).
 * Control tokens are spelled out; invalid UTF-8 becomes U+FFFD. */
enum MHD_Result serve_handle_detokenize(serve_conn *c) {
    enum MHD_Result res;
    json_t *root = body_object(c, &res);
    if (!root) return res;
    json_t *t = json_object_get(root, "tokens");
    if (!json_is_array(t)) return bad(c, root, "tokens", "'tokens' must be an array of token ids.");
    size_t n = json_array_size(t);
    int32_t *ids = k3_xmalloc(sizeof *ids * (n ? n : 1));
    for (size_t i = 0; i < n; i++) {
        json_t *x = json_array_get(t, i);
        if (!json_is_integer(x) || json_integer_value(x) < 0 ||
            json_integer_value(x) >= c->srv->eng->vocab) {
            free(ids);
            char msg[128];
            snprintf(msg, sizeof msg, "'tokens[%zu]' must be an id in [0, %d).", i,
                     c->srv->eng->vocab);
            return bad(c, root, "tokens", msg);
        }
        ids[i] = (int32_t)json_integer_value(x);
    }
    /* the reply holds the text twice, each byte at most 6 once escaped (or
     * U+FFFD), so the text is bounded before it is built */
    size_t bytes = 0;
    for (size_t i = 0; i < n; i++) {
        size_t tn = 0;
        k3_tok_token_bytes(c->srv->eng->tok, ids[i], &tn);
        bytes += tn;
    }
    if (bytes > SERVE_MAX_REPLY / 12) {
        free(ids);
        json_decref(root);
        return reply_too_large(c, "the text of these tokens");
    }
    size_t len = 0;
    char *text = k3_tok_decode(c->srv->eng->tok, ids, n, 0, &len);
    free(ids);
    json_decref(root);
    json_t *doc = json_pack("{s:s%,s:s%}", "content", text ? text : "", text ? len : 0, "prompt",
                            text ? text : "", text ? len : 0);
    free(text);
    char *s = json_dumps(doc, JSON_COMPACT);
    json_decref(doc);
    return serve_reply_json(c, 200, s);
}
