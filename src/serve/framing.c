/* framing.c — the request-framing checks of `k3 serve` (framing.h): header
 * names, Content-Length and Transfer-Encoding, before any body is read. */
#include "serve/framing.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "base/utf8safe.h"

/* RFC 9110 §5.6.2 tchar. */
static int is_tchar(unsigned char ch) {
    if ((ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z')) return 1;
    return ch && strchr("!#$%&'*+-.^_`|~", ch) != NULL;
}

static int is_token(const char *s, size_t n) {
    if (!n) return 0;
    for (size_t i = 0; i < n; i++)
        if (!is_tchar((unsigned char)s[i])) return 0;
    return 1;
}

static int name_is(const char *name, size_t n, const char *want) {
    return n == strlen(want) && !strncasecmp(name, want, n);
}

/* The value without the optional whitespace around it (RFC 9110 §5.5). */
static void trim(const char **v, size_t *n) {
    while (*n && ((*v)[0] == ' ' || (*v)[0] == '\t')) (*v)++, (*n)--;
    while (*n && ((*v)[*n - 1] == ' ' || (*v)[*n - 1] == '\t')) (*n)--;
}

static void add_length(serve_framing *f, const char *v, size_t n) {
    int digits = n > 0;
    for (size_t i = 0; i < n; i++) digits &= v[i] >= '0' && v[i] <= '9';
    if (!digits) f->length_bad = 1;
    if (f->n_length++ == 0) {
        snprintf(f->length, sizeof f->length, "%.*s", (int)(n < 31 ? n : 31), v);
        return;
    }
    /* same digits after leading zeros: the same length */
    size_t a = strlen(f->length), i = 0, j = 0;
    while (i + 1 < a && f->length[i] == '0') i++;
    while (j + 1 < n && v[j] == '0') j++;
    if (a - i != n - j || memcmp(f->length + i, v + j, n - j)) f->length_differs = 1;
}

void serve_framing_add(serve_framing *f, const char *name, size_t name_len, const char *value,
                       size_t value_len) {
    if (!name) return;
    if (!value) value = "", value_len = 0;
    if (!is_token(name, name_len) && !f->bad_name) {
        f->bad_name = 1;
        k3_utf8_escape(f->name, sizeof f->name, name, name_len, K3_UTF8_CTRL);
    }
    trim(&value, &value_len);
    if (name_is(name, name_len, "Content-Length")) add_length(f, value, value_len);
    if (name_is(name, name_len, "Transfer-Encoding")) {
        f->n_te++;
        if (!(value_len == 7 && !strncasecmp(value, "chunked", 7))) f->te_other = 1;
    }
}

int serve_framing_check(const serve_framing *f, serve_err *e) {
    if (f->bad_name)
        return serve_err_set(e, 400, NULL, NULL, "invalid_header",
                             "The header name '%s' is not a valid field name (no whitespace or "
                             "control characters, none before the colon: RFC 9112 section 5.1).",
                             f->name);
    if (f->length_bad || f->length_differs)
        return serve_err_set(e, 400, NULL, NULL, "conflicting_length", "%s",
                             f->length_differs
                                 ? "The request carries several Content-Length headers that differ."
                                 : "The Content-Length header must be a decimal number.");
    if (f->te_other || f->n_te > 1)
        return serve_err_set(e, 501, NULL, NULL, "unsupported_transfer_encoding",
                             "The only Transfer-Encoding this server accepts is a single "
                             "'chunked'.");
    return 0;
}
