/* engine.c — model + tokenizer for the server, and request → prompt ids. */
#include "serve/engine.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>
#include <limits.h>

#include "base/err.h"
#include "gen/constrain.h"
#include "k3.h"
#include "base/utf8safe.h"
#include "text/chat.h"

static void add_stop_id(serve_engine *e, int32_t id) {
    if (id < 0 || id >= e->vocab || e->n_stop_ids == SERVE_MAX_STOP_IDS) return;
    for (int i = 0; i < e->n_stop_ids; i++)
        if (e->stop_ids[i] == id) return;
    e->stop_ids[e->n_stop_ids++] = id;
}

static void default_name(char *out, size_t cap, const char *dir) {
    char real[4096];
    if (realpath(dir, real)) dir = real; /* "." or "models/k3/.." name the directory itself */
    size_t n = strlen(dir);
    while (n > 1 && dir[n - 1] == '/') n--; /* "models/k3/" names "k3" */
    size_t b = n;
    while (b > 0 && dir[b - 1] != '/') b--;
    snprintf(out, cap, "%.*s", (int)(n - b), dir + b);
}

int serve_engine_open(serve_engine *e, const char *dir, const char *name, int threads,
                      int cache_type) {
    memset(e, 0, sizeof *e);
    k3_load_opts lo = {.threads = threads, .tp_size = 1, .pp_size = 1, .cache_type = cache_type};
    e->model = k3_model_load(dir, &lo);
    if (!e->model) return -1;
    e->threads = threads;
    e->vocab = k3_model_vocab(e->model);
    e->tok = k3_tok_open(dir, e->vocab);
    if (!e->tok || k3_xtml_init(&e->xtml, e->tok)) {
        k3_preferr("tokenizer of %s", dir);
        serve_engine_close(e);
        return -1;
    }
    /* chat.md §2.6: stop on <|end_of_msg|> and [EOS], plus config's eos */
    add_stop_id(e, e->xtml.ctrl_id[K3_XC_EOM]);
    add_stop_id(e, k3_tok_special_id(e->tok, "[EOS]"));
    const int *eos;
    for (int i = 0, n = k3_model_eos_ids(e->model, &eos); i < n; i++) add_stop_id(e, eos[i]);
    char raw[sizeof e->name];
    if (name && *name)
        snprintf(raw, sizeof raw, "%s", name);
    else
        default_name(raw, sizeof raw, dir);
    /* the id goes into every JSON response: valid UTF-8, cut on a boundary */
    k3_utf8_escape(e->name, sizeof e->name, raw, strlen(raw), K3_UTF8_CTRL);
    k3_model_info info;
    k3_model_get_info(e->model, &info);
    e->n_ctx_train = (int)info.ctx_train; /* range-checked by the loader */
    int32_t ctl[4] = {e->xtml.ctrl_id[K3_XC_OPEN], e->xtml.ctrl_id[K3_XC_CLOSE],
                      e->xtml.ctrl_id[K3_XC_SEP], e->xtml.ctrl_id[K3_XC_EOM]};
    if (ctl[0] >= 0 && ctl[1] >= 0 && ctl[2] >= 0 && ctl[3] >= 0)
        e->vtrie = k3_vtrie_build(e->tok, ctl, e->vocab);
    return 0;
}

void serve_engine_close(serve_engine *e) {
    k3_vtrie_free(e->vtrie);
    if (e->tok) k3_tok_free(e->tok);
    if (e->model) k3_model_free(e->model);
    memset(e, 0, sizeof *e);
}

int serve_engine_is_stop(const serve_engine *e, int32_t id) {
    for (int i = 0; i < e->n_stop_ids; i++)
        if (e->stop_ids[i] == id) return 1;
    return 0;
}

int serve_engine_prompt(const serve_engine *e, const serve_req *q, int32_t **ids, int64_t *n,
                        serve_err *err) {
    k3_ids v = {0};
    int rc = q->kind == SERVE_CHAT ? k3_chat_encode(e->tok, q->root, &v)
                                   : k3_tok_encode_append(e->tok, q->prompt, q->prompt_len, 0, &v);
    if (rc) {
        k3_ids_free(&v);
        return serve_err_set(err, 400, NULL, q->kind == SERVE_CHAT ? "messages" : "prompt",
                             "invalid_value", "%s", k3_errmsg());
    }
    if (v.n == 0) {
        k3_ids_free(&v);
        return serve_err_set(err, 400, NULL, "prompt", "invalid_value", "The prompt is empty.");
    }
    *ids = v.ids;
    *n = (int64_t)v.n;
    return 0;
}

int serve_engine_forced(const serve_engine *e, const serve_req *q, int32_t **ids, int64_t *n,
                        serve_err *err) {
    *ids = NULL;
    *n = 0;
    k3_ids v = {0};
    if (q->force_tokens) {
        size_t i;
        json_t *t;
        /* Not checked against the vocabulary on purpose: test mode only, and
         * an out-of-range id lets a test drive the engine's own error path
         * (k3_forward rejects it mid-generation). */
        json_array_foreach(q->force_tokens, i, t) k3_ids_push(&v, (int32_t)json_integer_value(t));
    } else if (q->force_text) {
        if (k3_tok_encode_append(e->tok, q->force_text, q->force_text_len, 1, &v)) {
            k3_ids_free(&v);
            return serve_err_set(err, 400, NULL, "k3_test_force_text", "invalid_value", "%s",
                                 k3_errmsg());
        }
    }
    *ids = v.ids;
    *n = (int64_t)v.n;
    return 0;
}
