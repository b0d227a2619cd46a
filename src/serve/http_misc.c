/* http_misc.c — the small endpoints: GET /metrics (Prometheus text), GET
 * /props (llama.cpp-style server properties), POST /tokenize and POST
 * /detokenize (llama.cpp and vLLM request/response fields). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/mem.h"
#include "serve/http_internal.h"
#include "serve/limits.h"
#include "text/chat.h"
#include "text/tokenizer.h"

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
    json_t *root = json_loadb(b, c->body.n, 0, &je);
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

/* A token's text: a string when its bytes are UTF-8, else the byte values. */
static json_t *piece(const k3_tokenizer *tok, int32_t id) {
    size_t n = 0;
    const char *b = k3_tok_token_bytes(tok, id, &n);
    if (!b) return json_string("");
    if (serve_utf8_valid(b, n)) return json_stringn(b, n);
    json_t *a = json_array();
    for (size_t i = 0; i < n; i++) json_array_append_new(a, json_integer((unsigned char)b[i]));
    return a;
}

/* {"content"|"prompt": text} or {"messages": [...]} (the chat prompt,
 * rendered as /v1/chat/completions would); "with_pieces", "parse_special". */
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
    int rc;
    if (json_is_string(text)) {
        rc = k3_tok_encode_append(eng->tok, json_string_value(text), json_string_length(text),
                                  json_is_true(ps), &v);
    } else if (json_is_array(msgs)) {
        serve_req q;
        serve_err e;
        char *body = json_dumps(root, JSON_COMPACT);
        int prc = serve_req_parse(body, strlen(body), SERVE_CHAT, &c->srv->lim, &q, &e);
        free(body);
        if (prc) {
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
    json_t *tokens = json_array();
    for (size_t i = 0; i < v.n; i++)
        json_array_append_new(
            tokens, json_is_true(wp)
                        ? json_pack("{s:i,s:o}", "id", v.ids[i], "piece", piece(eng->tok, v.ids[i]))
                        : json_integer(v.ids[i]));
    json_t *doc = json_pack("{s:o,s:I,s:i}", "tokens", tokens, "count", (json_int_t)v.n,
                            "max_model_len", serve_ctx_size(c->srv));
    k3_ids_free(&v);
    json_decref(root);
    char *s = json_dumps(doc, JSON_COMPACT);
    json_decref(doc);
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
