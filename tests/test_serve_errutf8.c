/* test_serve_errutf8.c — the crash class of issue 12 part 1: an error whose
 * message is not valid UTF-8 made serve_err_json() return NULL (and the
 * server strlen(NULL)). Every string field the validator may quote, every
 * cut position of a multi-byte character against the fixed buffers (%.200s,
 * the 512-byte message, jansson's 160-byte error text), and invalid bytes in
 * the format arguments must give an error document that is valid UTF-8 and
 * parses as {"error":{...}}. */
#include <jansson.h>

#include "base/utf8safe.h"
#include "serve/request.h"
#include "t.h"

static const serve_limits LIM = {.model_name = "tiny", .max_tokens_cap = 100, .test_mode = 0};
static int n_checked;

static void check_err_doc(const serve_err *e, const char *what) {
    CHECK(k3_utf8_valid(e->message, strlen(e->message)), "%s: message not UTF-8", what);
    CHECK(k3_utf8_valid(e->param, strlen(e->param)), "%s: param not UTF-8", what);
    char *s = serve_err_json(e);
    CHECK(s != NULL, "%s: serve_err_json returned NULL", what);
    if (!s) return;
    json_t *d = json_loads(s, 0, NULL);
    CHECK(d && json_is_string(json_object_get(json_object_get(d, "error"), "message")),
          "%s: not an error document: %.200s", what, s);
    CHECK(strstr(s, "could not build") == NULL, "%s: fallback used: %.200s", what, s);
    json_decref(d);
    free(s);
    n_checked++;
}

static void parse_expect_err(const char *body, size_t len, serve_kind kind, const char *what) {
    serve_req q;
    serve_err e;
    memset(&e, 0, sizeof e);
    if (serve_req_parse(body, len, kind, &LIM, &q, &e) == 0) {
        serve_req_free(&q);
        CHECK(0, "%s: accepted", what);
        return;
    }
    check_err_doc(&e, what);
}

/* A value of `pad` ASCII letters then one multi-byte character, repeated. */
static char *value(size_t pad, const char *ch, int reps) {
    size_t cl = strlen(ch);
    char *v = malloc(pad + cl * (size_t)reps + 1);
    memset(v, 'a', pad);
    for (int i = 0; i < reps; i++) memcpy(v + pad + cl * (size_t)i, ch, cl);
    v[pad + cl * (size_t)reps] = 0;
    return v;
}

/* Every field whose value the validator quotes back, with every cut. */
TEST(quoted_string_fields) {
    static const char *tmpl[] = {
        "{\"model\":\"%s\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}",
        "{\"messages\":[{\"role\":\"%s\",\"content\":\"x\"}]}",
        "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"%s\",\"text\":\"x\"}]}]}",
        "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"tool_choice\":\"%s\"}",
        "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"response_format\":{\"type\":\"%"
        "s\"}}",
        "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"reasoning_effort\":\"%s\"}",
    };
    static const char *chars[] = {"\xc3\xa9", "\xe2\x82\xac", "\xf0\x9f\x98\x80"};
    char *body = malloc(4096);
    for (size_t t = 0; t < sizeof tmpl / sizeof *tmpl; t++)
        for (size_t c = 0; c < 3; c++)
            for (size_t pad = 0; pad < 560; pad += (pad < 220 ? 1 : 7)) {
                char *v = value(pad, chars[c], pad < 220 ? 1 : 3);
                int n = snprintf(body, 4096, tmpl[t], v);
                char what[64];
                snprintf(what, sizeof what, "template %zu char %zu pad %zu", t, c, pad);
                parse_expect_err(body, (size_t)n, SERVE_CHAT, what);
                free(v);
            }
    /* the issue's concrete triggers */
    char *m = value(199, "\xc3\xa9", 1);
    snprintf(body, 4096, tmpl[0], m);
    parse_expect_err(body, strlen(body), SERVE_CHAT, "model 199a+e");
    free(m);
    char *r = value(0, "\xc3\xa9", 400);
    snprintf(body, 4096, tmpl[1], r);
    parse_expect_err(body, strlen(body), SERVE_CHAT, "role 400e");
    free(r);
    free(body);
}

/* jansson's error text quotes the bytes near the error and is cut at a fixed
 * size: put multi-byte characters at every offset around the error. */
TEST(jansson_error_text) {
    char body[1024];
    const char *chars[] = {"\xc3\xa9", "\xe2\x82\xac", "\xf0\x9f\x98\x80"};
    for (int c = 0; c < 3; c++)
        for (int k = 0; k < 200; k++) {
            size_t n = 0;
            n += (size_t)snprintf(body + n, sizeof body - n, "{\"a\": \"x");
            for (int i = 0; i < k && n + 8 < sizeof body; i++)
                n += (size_t)snprintf(body + n, sizeof body - n, "%s", chars[c]);
            n += (size_t)snprintf(body + n, sizeof body - n, "\\%s\"}", chars[c]); /* bad escape */
            parse_expect_err(body, n, SERVE_CHAT, "invalid escape");
            body[n - 2] = 0; /* unterminated string */
            parse_expect_err(body, n - 2, SERVE_COMPLETION, "unterminated");
        }
    const char *issue = "{\"a\": \"x\\\xc3\xa9\"}";
    parse_expect_err(issue, strlen(issue), SERVE_CHAT, "issue body");
    for (int k = 0; k < 300; k++) { /* a long bare word of é: "invalid token near ..." */
        size_t n = 0;
        body[n++] = '[';
        for (int i = 0; i < k && n + 3 < sizeof body; i++, n += 2) memcpy(body + n, "\xc3\xa9", 2);
        parse_expect_err(body, n, SERVE_CHAT, "bare word");
    }
}

/* serve_err_set itself: raw invalid bytes in any field or argument. */
TEST(err_set_any_bytes) {
    serve_err e;
    serve_err_set(&e, 404, NULL, NULL, "not_found", "Unknown endpoint %s %s.", "G\xc3T", "/\xff");
    check_err_doc(&e, "method+path");
    CHECK(strstr(e.message, "G\\xc3T") && strstr(e.message, "/\\xff"), "%s", e.message);
    serve_err_set(&e, 400, "t\xff", "p\xc3", "c\xe2\x82", "%s", "m");
    check_err_doc(&e, "type/param/code");
    char big[2000];
    for (int i = 0; i < 999; i++) memcpy(big + 2 * i, "\xc3\xa9", 2);
    big[1998] = 0;
    for (int off = 0; off < 8; off++) {
        serve_err_set(&e, 400, NULL, big + off, NULL, "%s", big + off);
        check_err_doc(&e, "long");
    }
    char *fb = serve_err_fallback_json();
    json_t *d = json_loads(fb, 0, NULL);
    CHECK(d && json_object_get(d, "error"), "fallback is not an error document");
    json_decref(d);
    free(fb);
}

int main(void) {
    RUN(quoted_string_fields);
    RUN(jansson_error_text);
    RUN(err_set_any_bytes);
    printf("(%d error documents checked)\n", n_checked);
    return t_done();
}
