/* fuzz_http_request.c — libFuzzer target for the server's request-body
 * parser/validator (serve/request.h): any bytes, as a chat and as a
 * completions body, in normal and test mode. It must never crash, leak or
 * read out of bounds, and every rejection must carry a 4xx status and a
 * message that serializes to a valid OpenAI error document. */
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "serve/request.h"

static void check_error(const serve_err *e) {
    if (e->status < 400 || e->status > 499 || !e->message[0]) abort();
    char *s = serve_err_json(e);
    json_t *d = s ? json_loads(s, 0, NULL) : NULL;
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

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
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
