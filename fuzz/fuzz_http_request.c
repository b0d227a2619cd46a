/* fuzz_http_request.c — libFuzzer target for the server's request-body
 * parser/validator (serve/request.h): any bytes, as a chat and as a
 * completions body, in normal and test mode. It must never crash, leak or
 * read out of bounds, and every rejection must carry a 4xx status and a
 * message that serializes to a valid OpenAI error document in valid UTF-8
 * (issue 12: a non-UTF-8 message made serve_err_json return NULL).
 *
 * The input is also taken as a whole request, "METHOD PATH\nName: value\n...
 * \n\nBODY", and sent down the server's pre-generation path in the order
 * http.c uses: escaped method/path for the log, the Host/Origin/framing guard
 * (serve/guard.h), the header-name / Content-Length / Transfer-Encoding checks
 * (serve/framing.h), the 404 message, the JSON budget pre-scan
 * (serve/limits.h), then the body parser; every refusal on the way must be
 * a 4xx with a valid UTF-8 error document. */
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/utf8safe.h"
#include "serve/framing.h"
#include "serve/guard.h"
#include "serve/limits.h"
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

/* A log-mode escape: valid UTF-8 without control characters. */
static void check_log_escape(const char *s, size_t n, size_t cap) {
    char out[160];
    size_t m = k3_utf8_escape(out, cap, s, n, K3_UTF8_CTRL);
    if (m >= cap || !k3_utf8_valid(out, m)) abort();
    for (size_t i = 0; i < m; i++)
        if ((unsigned char)out[i] < 0x20 || out[i] == 0x7f) abort();
}

/* The value of header `name` in the header block (NUL-terminated lines). */
static const char *header(char **names, char **values, int n, const char *name) {
    for (int i = 0; i < n; i++)
        if (!strcasecmp(names[i], name)) return values[i];
    return NULL;
}

/* Framing (serve/framing.h): a 400 or 501 with a valid message; a header
 * name holding a space is always refused. 1 if refused. */
static int framing_refuses(char **names, char **values, int n) {
    serve_framing f = {0};
    int spaced = 0;
    for (int i = 0; i < n; i++) {
        serve_framing_add(&f, names[i], strlen(names[i]), values[i], strlen(values[i]));
        spaced |= strchr(names[i], ' ') != NULL;
    }
    serve_err e;
    memset(&e, 0, sizeof e);
    if (!serve_framing_check(&f, &e)) {
        if (spaced) abort();
        return 0;
    }
    if (e.status != 400 && e.status != 501) abort();
    e.status = 400; /* the message checks of a 4xx apply to the 501 too */
    check_error(&e);
    return 1;
}

static void check_request(const uint8_t *data, size_t size) {
    char *r = malloc(size + 1);
    memcpy(r, data, size);
    r[size] = 0;
    char *line_end = memchr(r, '\n', size);
    char *hdr = line_end ? line_end + 1 : r + size;
    if (line_end) *line_end = 0;
    char *sp = strchr(r, ' ');
    const char *method = r, *path = sp ? sp + 1 : "/";
    if (sp) *sp = 0;
    check_log_escape(method, strlen(method), 16); /* serve_conn.method / .path */
    check_log_escape(path, strlen(path), 128);
    char *names[16], *values[16];
    int nh = 0;
    const char *body = r + size;
    while (hdr < r + size) {
        char *e = memchr(hdr, '\n', (size_t)(r + size - hdr));
        if (e) *e = 0;
        if (!*hdr) { /* blank line: the body follows */
            body = e ? e + 1 : r + size;
            break;
        }
        char *colon = strchr(hdr, ':');
        if (colon && nh < 16) {
            *colon = 0;
            names[nh] = hdr;
            values[nh++] = colon[1] == ' ' ? colon + 2 : colon + 1;
        }
        if (!e) break;
        hdr = e + 1;
    }
    size_t body_len = (size_t)(r + size - body);
    static const char *const hosts[] = {"k3.internal"};
    static const char *const origins[] = {"https://ok.example"};
    serve_guard g;
    serve_guard_init(&g, size & 1 ? "127.0.0.1" : "0.0.0.0", hosts, (int)(size & 2 ? 1 : 0),
                     origins, 1);
    serve_guard_hdrs h = {.method = method,
                          .host = header(names, values, nh, "Host"),
                          .origin = header(names, values, nh, "Origin"),
                          .content_length = header(names, values, nh, "Content-Length"),
                          .transfer_encoding = header(names, values, nh, "Transfer-Encoding")};
    serve_err e;
    memset(&e, 0, sizeof e);
    if (h.host && !strcasecmp(h.host, "localhost") && !serve_host_allowed(&g, h.host)) abort();
    if (!g.loopback_bind && !g.n_hosts && !serve_host_allowed(&g, h.host)) abort();
    if (serve_guard_check(&g, &h, &e)) {
        check_error(&e);
        free(r);
        return;
    }
    if (framing_refuses(names, values, nh)) {
        free(r);
        return;
    }
    serve_err_set(&e, 404, NULL, NULL, "not_found", "Unknown endpoint %s %s.", method, path);
    check_error(&e);
    serve_json_count cnt;
    if (serve_json_budget(body, body_len, &cnt, &e)) {
        check_error(&e);
    } else {
        if (cnt.depth > SERVE_JSON_MAX_DEPTH || cnt.containers > SERVE_JSON_MAX_CONTAINERS ||
            cnt.values > SERVE_JSON_MAX_VALUES)
            abort();
        serve_limits lim = {.model_name = "tiny", .max_tokens_cap = 64, .test_mode = 1};
        serve_req q;
        if (serve_req_parse(body, body_len, size & 4 ? SERVE_COMPLETION : SERVE_CHAT, &lim, &q,
                            &e) == 0) {
            check_ok(&q, &lim);
            serve_req_free(&q);
        } else {
            check_error(&e);
        }
    }
    free(r);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    check_method_path(data, size);
    check_request(data, size);
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
