/* fuzz_http_request.c — libFuzzer target for the server's request-body
 * parser/validator (serve/request.h): any bytes, as a chat and as a
 * completions body, in normal and test mode. It must never crash, leak or
 * read out of bounds, and every rejection must carry a 4xx status and a
 * message that serializes to a valid OpenAI error document in valid UTF-8
 * (issue 12: a non-UTF-8 message made serve_err_json return NULL). The
 * input is also used as a method and path quoted into the 404 message. */
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/utf8safe.h"
#include "serve/request.h"

static void check_error(const serve_err *e) {
    if (e->status < 400 || e->status > 499 || !e->message[0]) abort();
    if (!k3_utf8_valid(e->message, strlen(e->message)) ||
        !k3_utf8_valid(e->param, strlen(e->param)))
        abort();
    char *s = serve_err_json(e);
    char *fb = serve_err_fallback_json(); /* must not be needed for a 4xx */
    if (!s || !k3_utf8_valid(s, strlen(s)) || !strcmp(s, fb)) abort();
    free(fb);
    json_t *d = json_loads(s, 0, NULL);
    if (!d || !json_is_object(json_object_get(d, "error"))) abort();
    json_decref(d);
    free(s);
}

/* A successful parse must leave fields the server relies on consistent. */
static void check_ok(const serve_req *q, const serve_limits *lim) {
    if (q->max_tokens < 1 || q->max_tokens > lim->max_tokens_cap) abort();
    if (q->n_stop < 0 || q->n_stop > SERVE_MAX_STOP) abort();
    if (q->kind == SERVE_CHAT && (!json_is_array(q->messages) || !json_array_size(q->messages)))
        abort();
    if (q->kind == SERVE_COMPLETION && (!q->prompt || !q->prompt_len)) abort();
    if (q->force_tokens && !lim->test_mode) abort();
}

/* The input as "METHOD PATH" (any bytes) in the router's 404 message and a
 * log-mode escape of it: valid UTF-8, no control characters. */
static void check_method_path(const uint8_t *data, size_t size) {
    char *m = malloc(size + 1);
    memcpy(m, data, size);
    m[size] = 0;
    char *p = strchr(m, ' ');
    if (p) *p++ = 0;
    serve_err e;
    serve_err_set(&e, 404, NULL, NULL, "not_found", "Unknown endpoint %s %s.", m, p ? p : "/");
    check_error(&e);
    char logp[128];
    size_t n = k3_utf8_escape(logp, sizeof logp, (const char *)data, size, K3_UTF8_CTRL);
    if (n >= sizeof logp || !k3_utf8_valid(logp, n)) abort();
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)logp[i] < 0x20 || logp[i] == 0x7f) abort();
    free(m);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    check_method_path(data, size);
    for (int mode = 0; mode < 4; mode++) {
        serve_limits lim = {.model_name = "tiny", .max_tokens_cap = 64, .test_mode = mode & 1};
        serve_kind kind = mode & 2 ? SERVE_COMPLETION : SERVE_CHAT;
        serve_req q;
        serve_err e;
        memset(&e, 0, sizeof e);
        if (serve_req_parse((const char *)data, size, kind, &lim, &q, &e) == 0) {
            check_ok(&q, &lim);
            serve_req_free(&q);
        } else {
            check_error(&e);
        }
    }
    return 0;
}
