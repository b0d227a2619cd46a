/* toolcall.c — tool-call section parser (see toolcall.h, chat.md §3.4). */
#include "text/toolcall.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "base/mem.h"
#include "text/pyjson.h"
#include "text/tokenizer.h"

/* A JSON string of s[0..n); invalid UTF-8 (possible in raw model output)
 * is replaced like Python's errors="replace" first. */
static json_t *jstr(const char *s, size_t n) {
    json_t *j = json_stringn(s, n);
    if (j) return j;
    size_t cl;
    char *clean = k3_utf8_sanitize(s, n, &cl);
    j = json_stringn(clean, cl);
    free(clean);
    return j ? j : json_string("");
}

/* obj[key[0..kn)] = v, with the key made valid UTF-8 if needed. */
static void set_key(json_t *obj, const char *key, size_t kn, json_t *v) {
    size_t cl;
    char *clean = k3_utf8_sanitize(key, kn, &cl);
    json_object_setn_new(obj, clean, cl, v);
    free(clean);
}

/* A block <|open|>TAG attrs <|sep|> body <|close|>TAG<|sep|> located in a text. */
typedef struct {
    size_t attrs, attrs_end, body, body_end, end;
} block;

static const char *find(const char *s, size_t n, size_t from, const char *pat, size_t plen) {
    if (from > n) return NULL;
    return memmem(s + from, n - from, pat, plen);
}

/* The first complete block of tag at or after from (token form: the control
 * tokens are their K3_XTML_CTRL_BYTE bytes): the attribute span runs to the
 * first SEP, the body to the first closing tag after it. As with the
 * reference regex, if the first opening cannot complete no later one can
 * either. Returns 1 found, 0 none complete. */
static int find_block(const k3_xtml *x, k3_xtml_tag tag, const char *s, size_t n, size_t from,
                      block *b) {
    if (!x->ctrl_len[K3_XC_OPEN] || !x->ctrl_len[K3_XC_CLOSE] || !x->ctrl_len[K3_XC_SEP])
        return 0; /* an empty k3_xtml: no structure at all */
    char open[K3_XTML_MARKER_MAX], close[K3_XTML_MARKER_MAX];
    const char sep_s = (char)K3_XTML_CTRL_BYTE(K3_XC_SEP);
    int ol =
        snprintf(open, sizeof open, "%c%s", K3_XTML_CTRL_BYTE(K3_XC_OPEN), k3_xtml_tag_name(tag));
    int cl = snprintf(close, sizeof close, "%c%s%c", K3_XTML_CTRL_BYTE(K3_XC_CLOSE),
                      k3_xtml_tag_name(tag), sep_s);
    const char *o = find(s, n, from, open, (size_t)ol);
    if (!o) return 0;
    b->attrs = (size_t)(o - s) + (size_t)ol;
    const char *sep = find(s, n, b->attrs, &sep_s, 1);
    if (!sep) return 0;
    b->attrs_end = (size_t)(sep - s);
    b->body = b->attrs_end + 1;
    const char *c = find(s, n, b->body, close, (size_t)cl);
    if (!c) return 0;
    b->body_end = (size_t)(c - s);
    b->end = b->body_end + (size_t)cl;
    return 1;
}

/* Token-form s[0..n) as spelled text (a stray control token inside a value
 * is returned as its spelling), malloc'd, NUL-terminated. */
static char *spelled(const k3_xtml *x, const char *s, size_t n, size_t *len) {
    k3_buf b = {0};
    k3_xtml_spell(x, s, n, &b);
    k3_buf_put(&b, "", 0);
    *len = b.n;
    return b.s;
}

/* ---- attributes: NAME="VALUE" with NAME = [\p{L}\p{N}_]+ ------------------- */

static pcre2_code *attr_re;
static pthread_once_t attr_once = PTHREAD_ONCE_INIT;

static void compile_attr_re(void) {
    int err;
    PCRE2_SIZE off;
    attr_re = pcre2_compile((PCRE2_SPTR) "([\\p{L}\\p{N}_]+)=\"([^\"]*)\"", PCRE2_ZERO_TERMINATED,
                            PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &err, &off, NULL);
}

/* VALUE with &quot; -> " first, then &amp; -> & (inverse of the renderer). */
static char *unescape(const char *v, size_t n) {
    k3_buf a = {0}, b = {0};
    for (size_t i = 0; i < n;) {
        if (n - i >= 6 && !memcmp(v + i, "&quot;", 6)) {
            k3_buf_putc(&a, '"');
            i += 6;
        } else
            k3_buf_putc(&a, v[i++]);
    }
    for (size_t i = 0; i < a.n;) {
        if (a.n - i >= 5 && !memcmp(a.s + i, "&amp;", 5)) {
            k3_buf_putc(&b, '&');
            i += 5;
        } else
            k3_buf_putc(&b, a.s[i++]);
    }
    k3_buf_free(&a);
    k3_buf_put(&b, "", 0);
    return b.s;
}

/* Attributes of s[0..n) as a JSON object of strings (later duplicates win). */
static json_t *parse_attrs(const k3_xtml *x, const char *tok, size_t tokn) {
    pthread_once(&attr_once, compile_attr_re);
    json_t *attrs = json_object();
    if (!attr_re) return attrs;
    size_t rawn, n;
    char *raw = spelled(x, tok, tokn, &rawn);
    char *s = k3_utf8_sanitize(raw, rawn, &n); /* the regex never matches invalid UTF-8 */
    free(raw);
    pcre2_match_data *md = pcre2_match_data_create_from_pattern(attr_re, NULL);
    size_t at = 0;
    while (at <= n && pcre2_match(attr_re, (PCRE2_SPTR)s, n, at, 0, md, NULL) >= 0) {
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
        char *val = unescape(s + ov[4], ov[5] - ov[4]);
        json_object_setn_new(attrs, s + ov[2], ov[3] - ov[2], jstr(val, strlen(val)));
        free(val);
        at = ov[1];
    }
    pcre2_match_data_free(md);
    free(s);
    return attrs;
}

/* A non-empty string attribute, or NULL. */
static const char *attr(const json_t *attrs, const char *name) {
    const char *v = json_string_value(json_object_get(attrs, name));
    return v && *v ? v : NULL;
}

/* ---- arguments --------------------------------------------------------------- */

/* Typed value: strings raw; others JSON-decoded, the raw string on failure. */
static json_t *argument_value(const k3_xtml *x, const char *type, const char *tok, size_t tokn) {
    size_t n;
    char *v = spelled(x, tok, tokn, &n);
    json_t *j = NULL;
    if (strcmp(type, "string")) j = json_loadb(v, n, JSON_DECODE_ANY | JSON_ALLOW_NUL, NULL);
    if (!j) j = jstr(v, n);
    free(v);
    return j;
}

/* Argument blocks of a call body into an object; -1 when one lacks its key. */
static int parse_arguments(const k3_xtml *x, const char *s, size_t lo, size_t hi, json_t *args) {
    block b;
    while (find_block(x, K3_XT_ARGUMENT, s, hi, lo, &b)) {
        json_t *attrs = parse_attrs(x, s + b.attrs, b.attrs_end - b.attrs);
        const json_t *key = json_object_get(attrs, "key");
        const char *type = json_string_value(json_object_get(attrs, "type"));
        if (!key) {
            json_decref(attrs);
            return -1;
        }
        set_key(args, json_string_value(key), json_string_length(key),
                argument_value(x, type ? type : "string", s + b.body, b.body_end - b.body));
        json_decref(attrs);
        lo = b.end;
    }
    return 0;
}

/* A json block's text must decode to an object. NULL when malformed. */
static json_t *parse_json_block(const k3_xtml *x, const char *s, const block *b) {
    size_t n;
    char *text = spelled(x, s + b->body, b->body_end - b->body, &n);
    json_t *j = json_loadb(text, n, JSON_DECODE_ANY | JSON_ALLOW_NUL, NULL);
    free(text);
    if (json_is_object(j)) return j;
    json_decref(j);
    return NULL;
}

/* One call block into *call. 1 valid, 0 malformed. */
static int parse_call(const k3_xtml *x, const char *s, const block *cb, k3_tool_call *call) {
    json_t *attrs = parse_attrs(x, s + cb->attrs, cb->attrs_end - cb->attrs);
    const char *name = attr(attrs, "tool");
    json_t *args = NULL;
    block jb;
    if (name && find_block(x, K3_XT_JSON, s, cb->body_end, cb->body, &jb)) {
        args = parse_json_block(x, s, &jb);
    } else if (name) {
        args = json_object();
        if (parse_arguments(x, s, cb->body, cb->body_end, args)) {
            json_decref(args);
            args = NULL;
        }
    }
    if (args) {
        call->name = k3_xstrdup(name);
        call->arguments = args;
    }
    json_decref(attrs);
    return args != NULL;
}

int k3_toolcall_next(const k3_xtml *x, const char *s, size_t n, size_t *pos, k3_tool_call *call) {
    block cb;
    memset(call, 0, sizeof *call);
    if (!find_block(x, K3_XT_CALL, s, n, *pos, &cb)) return -1;
    *pos = cb.end;
    return parse_call(x, s, &cb, call);
}

/* ---- a call cut by the token limit ---------------------------------------- */

/* Spelled text back in token form: each control spelling of x becomes its
 * control byte. */
static void token_form(const k3_xtml *x, const char *s, size_t n, k3_buf *out) {
    for (size_t i = 0; i < n;) {
        int c = 0;
        for (; c < K3_XC_COUNT; c++) {
            size_t l = x->ctrl_len[c];
            if (l && l <= n - i && !memcmp(s + i, x->ctrl[c], l)) break;
        }
        if (c < K3_XC_COUNT) {
            char b = (char)K3_XTML_CTRL_BYTE(c);
            k3_buf_put(out, &b, 1);
            i += x->ctrl_len[c];
        } else {
            k3_buf_put(out, s + i, 1);
            i++;
        }
    }
}

/* Argument (or json) blocks that closed in s[lo..n) into args; returns where
 * the last one ended (lo if none). */
static size_t closed_arguments(const k3_xtml *x, const char *s, size_t lo, size_t n, json_t *args) {
    block b;
    if (find_block(x, K3_XT_JSON, s, n, lo, &b)) {
        json_t *j = parse_json_block(x, s, &b);
        if (j) json_object_update(args, j);
        json_decref(j);
        return b.end;
    }
    while (find_block(x, K3_XT_ARGUMENT, s, n, lo, &b)) {
        json_t *attrs = parse_attrs(x, s + b.attrs, b.attrs_end - b.attrs);
        const json_t *key = json_object_get(attrs, "key");
        const char *type = json_string_value(json_object_get(attrs, "type"));
        if (key)
            set_key(args, json_string_value(key), json_string_length(key),
                    argument_value(x, type ? type : "string", s + b.body, b.body_end - b.body));
        json_decref(attrs);
        lo = b.end;
    }
    return lo;
}

/* s[from..n), after blanks, is a non-empty proper prefix of the closing tag
 * <|close|>call<|sep|> in token form. */
static int closing_begun(const char *s, size_t from, size_t n) {
    char close[16];
    int cl = snprintf(close, sizeof close, "%c%s%c", K3_XTML_CTRL_BYTE(K3_XC_CLOSE),
                      k3_xtml_tag_name(K3_XT_CALL), K3_XTML_CTRL_BYTE(K3_XC_SEP));
    while (from < n && strchr(" \t\r\n", s[from])) from++;
    return from < n && n - from < (size_t)cl && !memcmp(s + from, close, n - from);
}

static int cut_call(const k3_xtml *x, const char *s, size_t n, k3_tool_call *call) {
    size_t pos = 0;
    k3_tool_call whole;
    for (int rc; (rc = k3_toolcall_next(x, s, n, &pos, &whole)) >= 0;)
        if (rc == 1) k3_tool_call_free(&whole);
    char open[16];
    int ol = snprintf(open, sizeof open, "%c%s", K3_XTML_CTRL_BYTE(K3_XC_OPEN),
                      k3_xtml_tag_name(K3_XT_CALL));
    const char *o = find(s, n, pos, open, (size_t)ol);
    if (!o) return 0;
    size_t attrs = (size_t)(o - s) + (size_t)ol;
    const char sep_s = (char)K3_XTML_CTRL_BYTE(K3_XC_SEP);
    const char *sep = find(s, n, attrs, &sep_s, 1);
    json_t *a = parse_attrs(x, s + attrs, (sep ? (size_t)(sep - s) : n) - attrs);
    const char *name = sep ? attr(a, "tool") : NULL; /* an attribute cut short is no name */
    call->name = k3_xstrdup(name ? name : "");
    json_decref(a);
    call->arguments = json_object();
    if (!sep) return K3_CALL_CUT;
    size_t end = closed_arguments(x, s, (size_t)(sep - s) + 1, n, call->arguments);
    return *call->name && closing_begun(s, end, n) ? K3_CALL_UNCLOSED : K3_CALL_CUT;
}

int k3_toolcall_cut(const k3_xtml *x, const char *spelled, size_t n, k3_tool_call *call) {
    memset(call, 0, sizeof *call);
    k3_buf s = {0};
    token_form(x, spelled, n, &s);
    int rc = cut_call(x, s.s ? s.s : "", s.n, call);
    free(s.s);
    return rc;
}

static void calls_push(k3_tool_calls *c, k3_tool_call v) {
    if (c->n == c->cap) {
        c->cap = c->cap ? 2 * c->cap : 4;
        c->v = k3_xrealloc(c->v, c->cap * sizeof *c->v);
    }
    c->v[c->n++] = v;
}

int k3_toolcall_parse(const k3_xtml *x, const char *s, size_t n, k3_tool_calls *out) {
    size_t pos = 0;
    int found = 0, rc;
    k3_tool_call call;
    while ((rc = k3_toolcall_next(x, s, n, &pos, &call)) >= 0)
        if (rc == 1) {
            calls_push(out, call);
            found++;
        }
    if (!found) return k3_seterr("tools section: no tool call found (%zu bytes, no valid call)", n);
    return found;
}

char *k3_toolcall_arguments_json(const k3_tool_call *c) {
    return k3_pyjson_dumps(c->arguments, K3_PYJSON_DEFAULT, NULL);
}

json_t *k3_tool_calls_json(const k3_tool_calls *calls) {
    json_t *arr = json_array();
    for (size_t i = 0; i < calls->n; i++) {
        char *args = k3_toolcall_arguments_json(&calls->v[i]);
        json_array_append_new(arr,
                              json_pack("{s:s, s:s}", "name", calls->v[i].name, "arguments", args));
        free(args);
    }
    return arr;
}

void k3_tool_call_free(k3_tool_call *c) {
    free(c->name);
    json_decref(c->arguments);
    memset(c, 0, sizeof *c);
}

void k3_tool_calls_free(k3_tool_calls *calls) {
    for (size_t i = 0; i < calls->n; i++) k3_tool_call_free(&calls->v[i]);
    free(calls->v);
    memset(calls, 0, sizeof *calls);
}
