/* pyjson.c — Python-compatible JSON dump and scan (see pyjson.h). */
#include "text/pyjson.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/mem.h"

/* ---- float repr ---------------------------------------------------------- */

/* Shortest "%.Ne" form that reads back as d: sign, digit string, exponent. */
static void shortest_digits(double d, int *neg, char digits[24], int *exp10) {
    char tmp[40];
    for (int p = 1; p <= 17; p++) {
        snprintf(tmp, sizeof tmp, "%.*e", p - 1, d);
        if (strtod(tmp, NULL) == d) break;
    }
    const char *t = tmp;
    *neg = (*t == '-');
    if (*neg) t++;
    int nd = 0;
    for (; *t && *t != 'e'; t++)
        if (*t != '.') digits[nd++] = *t;
    while (nd > 1 && digits[nd - 1] == '0') nd--;
    digits[nd] = 0;
    *exp10 = atoi(t + 1);
}

void k3_pyfloat_repr(double d, char out[40]) {
    if (isnan(d)) {
        strcpy(out, "NaN");
        return;
    }
    if (isinf(d)) {
        strcpy(out, d > 0 ? "Infinity" : "-Infinity");
        return;
    }
    int neg, e;
    char dg[24];
    shortest_digits(d, &neg, dg, &e);
    int nd = (int)strlen(dg);
    char *o = out;
    if (neg) *o++ = '-';
    if (e >= -4 && e < 16) { /* fixed notation, always with a fraction part */
        if (e < 0) {
            o += sprintf(o, "0.");
            for (int i = 0; i < -e - 1; i++) *o++ = '0';
            o += sprintf(o, "%s", dg);
        } else {
            for (int i = 0; i <= e; i++) *o++ = i < nd ? dg[i] : '0';
            *o++ = '.';
            if (nd > e + 1)
                o += sprintf(o, "%s", dg + e + 1);
            else
                *o++ = '0';
        }
        *o = 0;
    } else { /* scientific, exponent with sign and at least two digits */
        *o++ = dg[0];
        if (nd > 1) o += sprintf(o, ".%s", dg + 1);
        sprintf(o, "e%c%02d", e < 0 ? '-' : '+', e < 0 ? -e : e);
    }
}

/* ---- dump ---------------------------------------------------------------- */

static void dump_string(k3_buf *b, const char *s, size_t n) {
    k3_buf_putc(b, '"');
    size_t run = 0; /* bytes copied verbatim since the last escape */
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        const char *esc = NULL;
        char ubuf[8];
        switch (c) {
        case '"':
            esc = "\\\"";
            break;
        case '\\':
            esc = "\\\\";
            break;
        case '\n':
            esc = "\\n";
            break;
        case '\r':
            esc = "\\r";
            break;
        case '\t':
            esc = "\\t";
            break;
        case '\b':
            esc = "\\b";
            break;
        case '\f':
            esc = "\\f";
            break;
        default:
            if (c < 0x20) {
                snprintf(ubuf, sizeof ubuf, "\\u%04x", c);
                esc = ubuf;
            }
        }
        if (!esc) {
            run++;
            continue;
        }
        k3_buf_put(b, s + i - run, run);
        run = 0;
        k3_buf_puts(b, esc);
    }
    k3_buf_put(b, s + n - run, run);
    k3_buf_putc(b, '"');
}

typedef struct {
    const char *key;
    size_t len;
    json_t *val;
} kv;

static int kv_cmp(const void *a, const void *b) {
    const kv *x = a, *y = b;
    size_t m = x->len < y->len ? x->len : y->len;
    int c = memcmp(x->key, y->key, m);
    return c ? c : (x->len > y->len) - (x->len < y->len);
}

static void dump_object(k3_buf *b, const json_t *v, k3_pyjson_style style) {
    size_t n = json_object_size(v), i = 0;
    kv *items = k3_xmalloc((n ? n : 1) * sizeof *items);
    const char *key;
    size_t klen;
    json_t *val;
    json_object_keylen_foreach((json_t *)v, key, klen, val) {
        items[i].key = key;
        items[i].len = klen;
        items[i].val = val;
        i++;
    }
    if (style == K3_PYJSON_COMPACT_SORTED) qsort(items, n, sizeof *items, kv_cmp);
    k3_buf_putc(b, '{');
    for (i = 0; i < n; i++) {
        if (i) k3_buf_puts(b, style == K3_PYJSON_COMPACT_SORTED ? "," : ", ");
        dump_string(b, items[i].key, items[i].len);
        k3_buf_puts(b, style == K3_PYJSON_COMPACT_SORTED ? ":" : ": ");
        k3_pyjson_dump(b, items[i].val, style);
    }
    k3_buf_putc(b, '}');
    free(items);
}

void k3_pyjson_dump(k3_buf *b, const json_t *v, k3_pyjson_style style) {
    char num[48];
    switch (json_typeof(v)) {
    case JSON_OBJECT:
        dump_object(b, v, style);
        break;
    case JSON_ARRAY:
        k3_buf_putc(b, '[');
        for (size_t i = 0; i < json_array_size(v); i++) {
            if (i) k3_buf_puts(b, style == K3_PYJSON_COMPACT_SORTED ? "," : ", ");
            k3_pyjson_dump(b, json_array_get(v, i), style);
        }
        k3_buf_putc(b, ']');
        break;
    case JSON_STRING:
        dump_string(b, json_string_value(v), json_string_length(v));
        break;
    case JSON_INTEGER:
        snprintf(num, sizeof num, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
        k3_buf_puts(b, num);
        break;
    case JSON_REAL:
        k3_pyfloat_repr(json_real_value(v), num);
        k3_buf_puts(b, num);
        break;
    case JSON_TRUE:
        k3_buf_puts(b, "true");
        break;
    case JSON_FALSE:
        k3_buf_puts(b, "false");
        break;
    case JSON_NULL:
        k3_buf_puts(b, "null");
        break;
    }
}

char *k3_pyjson_dumps(const json_t *v, k3_pyjson_style style, size_t *len) {
    k3_buf b = {0};
    k3_pyjson_dump(&b, v, style);
    k3_buf_put(&b, "", 0);
    if (len) *len = b.n;
    return b.s;
}

/* ---- Python str() and truthiness ----------------------------------------- */

int k3_pystr(k3_buf *b, const json_t *v) {
    char num[48];
    switch (json_typeof(v)) {
    case JSON_STRING:
        k3_buf_put(b, json_string_value(v), json_string_length(v));
        return 0;
    case JSON_INTEGER:
        snprintf(num, sizeof num, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
        k3_buf_puts(b, num);
        return 0;
    case JSON_REAL:
        k3_pyfloat_repr(json_real_value(v), num);
        /* str(float('nan')) is "nan", str(inf) "inf" (json.dumps differs). */
        if (isnan(json_real_value(v))) strcpy(num, "nan");
        if (isinf(json_real_value(v))) strcpy(num, json_real_value(v) > 0 ? "inf" : "-inf");
        k3_buf_puts(b, num);
        return 0;
    case JSON_TRUE:
        k3_buf_puts(b, "True");
        return 0;
    case JSON_FALSE:
        k3_buf_puts(b, "False");
        return 0;
    case JSON_NULL:
        k3_buf_puts(b, "None");
        return 0;
    default:
        return -1;
    }
}

int k3_pytruthy(const json_t *v) {
    if (!v) return 0;
    switch (json_typeof(v)) {
    case JSON_OBJECT:
        return json_object_size(v) > 0;
    case JSON_ARRAY:
        return json_array_size(v) > 0;
    case JSON_STRING:
        return json_string_length(v) > 0;
    case JSON_INTEGER:
        return json_integer_value(v) != 0;
    case JSON_REAL:
        return json_real_value(v) != 0.0;
    case JSON_TRUE:
        return 1;
    default:
        return 0;
    }
}

/* ---- scanner (Python JSONDecoder, strict=False) --------------------------- */

#define SCAN_MAX_DEPTH 512

size_t k3_pyjson_skip_ws(const char *s, size_t n, size_t pos) {
    while (pos < n && (s[pos] == ' ' || s[pos] == '\t' || s[pos] == '\n' || s[pos] == '\r')) pos++;
    return pos;
}

static int hex4(const char *s, size_t n, size_t pos, unsigned *out) {
    if (pos + 4 > n) return -1;
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        char c = s[pos + i];
        int d = c >= '0' && c <= '9'   ? c - '0'
                : c >= 'a' && c <= 'f' ? c - 'a' + 10
                : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                       : -1;
        if (d < 0) return -1;
        v = v * 16 + (unsigned)d;
    }
    *out = v;
    return 0;
}

static void put_utf8(k3_buf *b, unsigned cp) {
    char u[4];
    size_t n;
    if (cp < 0x80) {
        u[0] = (char)cp;
        n = 1;
    } else if (cp < 0x800) {
        u[0] = (char)(0xC0 | (cp >> 6));
        u[1] = (char)(0x80 | (cp & 0x3F));
        n = 2;
    } else if (cp < 0x10000) {
        u[0] = (char)(0xE0 | (cp >> 12));
        u[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        u[2] = (char)(0x80 | (cp & 0x3F));
        n = 3;
    } else {
        u[0] = (char)(0xF0 | (cp >> 18));
        u[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
        u[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
        u[3] = (char)(0x80 | (cp & 0x3F));
        n = 4;
    }
    k3_buf_put(b, u, n);
}

/* \uXXXX at s[pos] (pos just after the 'u'); combines a surrogate pair, a
 * lone surrogate becomes U+FFFD (what tiktoken does when encoding it). */
static int scan_unicode_escape(const char *s, size_t n, size_t *pos, k3_buf *out) {
    unsigned u, lo;
    if (hex4(s, n, *pos, &u)) return -1;
    *pos += 4;
    if (u >= 0xD800 && u <= 0xDBFF && *pos + 1 < n && s[*pos] == '\\' && s[*pos + 1] == 'u' &&
        !hex4(s, n, *pos + 2, &lo) && lo >= 0xDC00 && lo <= 0xDFFF) {
        *pos += 6;
        u = 0x10000 + ((u - 0xD800) << 10) + (lo - 0xDC00);
    } else if (u >= 0xD800 && u <= 0xDFFF) {
        u = 0xFFFD;
    }
    put_utf8(out, u);
    return 0;
}

/* String starting after its opening quote; raw control characters allowed. */
static int scan_string(const char *s, size_t n, size_t *pos, k3_buf *out) {
    size_t p = *pos;
    for (;;) {
        size_t start = p;
        while (p < n && s[p] != '"' && s[p] != '\\') p++;
        if (out) k3_buf_put(out, s + start, p - start);
        if (p >= n) return -1;
        if (s[p] == '"') break;
        if (++p >= n) return -1;
        char e = s[p++], c;
        switch (e) {
        case '"':
            c = '"';
            break;
        case '\\':
            c = '\\';
            break;
        case '/':
            c = '/';
            break;
        case 'b':
            c = '\b';
            break;
        case 'f':
            c = '\f';
            break;
        case 'n':
            c = '\n';
            break;
        case 'r':
            c = '\r';
            break;
        case 't':
            c = '\t';
            break;
        case 'u': {
            k3_buf tmp = {0};
            int rc = scan_unicode_escape(s, n, &p, out ? out : &tmp);
            k3_buf_free(&tmp);
            if (rc) return -1;
            continue;
        }
        default:
            return -1;
        }
        if (out) k3_buf_putc(out, c);
    }
    *pos = p + 1;
    return 0;
}

static int match_word(const char *s, size_t n, size_t pos, const char *w) {
    size_t l = strlen(w);
    return pos + l <= n && !memcmp(s + pos, w, l);
}

static size_t digits(const char *s, size_t n, size_t p) {
    while (p < n && s[p] >= '0' && s[p] <= '9') p++;
    return p;
}

/* -?(0|[1-9]\d*)(\.\d+)?([eE][-+]?\d+)? — optional parts only when complete. */
static int scan_number(const char *s, size_t n, size_t *pos) {
    size_t p = *pos;
    if (p < n && s[p] == '-') p++;
    if (p >= n || s[p] < '0' || s[p] > '9') return -1;
    p = s[p] == '0' ? p + 1 : digits(s, n, p);
    if (p + 1 < n && s[p] == '.' && s[p + 1] >= '0' && s[p + 1] <= '9') p = digits(s, n, p + 1);
    if (p < n && (s[p] == 'e' || s[p] == 'E')) {
        size_t q = p + 1;
        if (q < n && (s[q] == '+' || s[q] == '-')) q++;
        if (q < n && s[q] >= '0' && s[q] <= '9') p = digits(s, n, q);
    }
    *pos = p;
    return 0;
}

static int scan_any(const char *s, size_t n, size_t *pos, k3_pyvalue_type *type, k3_buf *str,
                    int depth);

static int scan_container(const char *s, size_t n, size_t *pos, int is_object, int depth) {
    char close = is_object ? '}' : ']';
    size_t p = k3_pyjson_skip_ws(s, n, *pos + 1);
    k3_pyvalue_type t;
    if (p < n && s[p] == close) {
        *pos = p + 1;
        return 0;
    }
    for (;;) {
        if (is_object) {
            if (p >= n || s[p] != '"') return -1;
            p++;
            if (scan_string(s, n, &p, NULL)) return -1;
            p = k3_pyjson_skip_ws(s, n, p);
            if (p >= n || s[p] != ':') return -1;
            p = k3_pyjson_skip_ws(s, n, p + 1);
        }
        if (scan_any(s, n, &p, &t, NULL, depth + 1)) return -1;
        p = k3_pyjson_skip_ws(s, n, p);
        if (p < n && s[p] == close) break;
        if (p >= n || s[p] != ',') return -1;
        p = k3_pyjson_skip_ws(s, n, p + 1);
    }
    *pos = p + 1;
    return 0;
}

static int scan_any(const char *s, size_t n, size_t *pos, k3_pyvalue_type *type, k3_buf *str,
                    int depth) {
    size_t p = *pos;
    if (p >= n || depth > SCAN_MAX_DEPTH) return -1;
    static const struct {
        const char *word;
        k3_pyvalue_type type;
    } words[] = {{"null", K3_PV_NULL},  {"true", K3_PV_BOOLEAN},    {"false", K3_PV_BOOLEAN},
                 {"NaN", K3_PV_NUMBER}, {"Infinity", K3_PV_NUMBER}, {"-Infinity", K3_PV_NUMBER}};
    for (size_t i = 0; i < sizeof words / sizeof words[0]; i++)
        if (match_word(s, n, p, words[i].word)) {
            *type = words[i].type;
            *pos = p + strlen(words[i].word);
            return 0;
        }
    switch (s[p]) {
    case '"':
        *type = K3_PV_STRING;
        *pos = p + 1;
        return scan_string(s, n, pos, str);
    case '{':
        *type = K3_PV_OBJECT;
        return scan_container(s, n, pos, 1, depth);
    case '[':
        *type = K3_PV_ARRAY;
        return scan_container(s, n, pos, 0, depth);
    default:
        *type = K3_PV_NUMBER;
        return scan_number(s, n, pos);
    }
}

int k3_pyjson_scan(const char *s, size_t n, size_t *pos, k3_pyvalue *out) {
    memset(out, 0, sizeof *out);
    size_t p = *pos;
    out->start = p;
    if (scan_any(s, n, &p, &out->type, &out->str, 0)) {
        k3_buf_free(&out->str);
        return -1;
    }
    if (out->type == K3_PV_STRING) k3_buf_put(&out->str, "", 0); /* non-NULL even if empty */
    out->end = p;
    *pos = p;
    return 0;
}

/* ---- request loading --------------------------------------------------------- */

static int hex4_at(const char *s, size_t n, size_t pos, unsigned *u) {
    return pos + 4 <= n && hex4(s, n, pos, u) == 0;
}

/* Copy of s with lone surrogate escapes replaced by \ufffd; NULL if none. */
static char *fix_lone_surrogates(const char *s, size_t n, size_t *out_n) {
    k3_buf b = {0};
    int in_string = 0, changed = 0;
    size_t done = 0; /* s[0..done) already copied */
    for (size_t i = 0; i < n; i++) {
        if (!in_string) {
            in_string = s[i] == '"';
            continue;
        }
        if (s[i] == '"') {
            in_string = 0;
            continue;
        }
        if (s[i] != '\\' || i + 1 >= n) continue;
        unsigned u, lo;
        if (s[i + 1] != 'u' || !hex4_at(s, n, i + 2, &u) || u < 0xD800 || u > 0xDFFF) {
            i++; /* skip the escaped character (it may be a quote) */
            continue;
        }
        int paired = u <= 0xDBFF && i + 7 < n && s[i + 6] == '\\' && s[i + 7] == 'u' &&
                     hex4_at(s, n, i + 8, &lo) && lo >= 0xDC00 && lo <= 0xDFFF;
        if (paired) {
            i += 11;
            continue;
        }
        k3_buf_put(&b, s + done, i - done);
        k3_buf_puts(&b, "\\ufffd");
        done = i + 6;
        i += 5;
        changed = 1;
    }
    if (!changed) {
        k3_buf_free(&b);
        return NULL;
    }
    k3_buf_put(&b, s + done, n - done);
    *out_n = b.n;
    return b.s;
}

json_t *k3_pyjson_loads(const char *s, size_t n, json_error_t *err) {
    size_t fn;
    char *fixed = fix_lone_surrogates(s, n, &fn);
    json_t *j = json_loadb(fixed ? fixed : s, fixed ? fn : n, JSON_ALLOW_NUL, err);
    free(fixed);
    return j;
}
