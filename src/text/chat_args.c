/* chat_args.c — the tools section of an assistant message: tool calls and
 * the normalisation of their arguments (chat.md §2.5.1).
 *
 * Arguments arrive either as a JSON object (servers that json.loads the
 * OpenAI string first) or as the raw OpenAI string. An object becomes typed
 * argument tags with Python json.dumps text; a string is parsed one level
 * deep keeping the original source slice of each non-string value, and
 * anything that does not parse becomes one raw json block. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "base/mem.h"
#include "text/chat_render.h"

static const char *pv_type_name(k3_pyvalue_type t) {
    switch (t) {
    case K3_PV_STRING:
        return "string";
    case K3_PV_NUMBER:
        return "number";
    case K3_PV_BOOLEAN:
        return "boolean";
    case K3_PV_NULL:
        return "null";
    case K3_PV_OBJECT:
        return "object";
    default:
        return "array";
    }
}

static const char *json_type_name(const json_t *v) {
    switch (json_typeof(v)) {
    case JSON_OBJECT:
        return "object";
    case JSON_ARRAY:
        return "array";
    case JSON_STRING:
        return "string";
    case JSON_INTEGER:
    case JSON_REAL:
        return "number";
    case JSON_TRUE:
    case JSON_FALSE:
        return "boolean";
    default:
        return "null";
    }
}

/* <|open|>argument key=".." type=".."<|sep|> text <|close|>argument<|sep|> */
static void render_argument(k3_render *r, const char *key, size_t klen, const char *type,
                            const char *text, size_t tlen) {
    k3_attr a[2] = {{"key", key, klen}, {"type", type, strlen(type)}};
    k3_r_open(r, K3_XT_ARGUMENT, a, 2);
    k3_r_text(r, text, tlen);
    k3_r_close(r, K3_XT_ARGUMENT);
}

/* Dict arguments: keys in insertion order, values typed, non-strings dumped
 * with json.dumps default separators. */
static void render_object_arguments(k3_render *r, const json_t *args) {
    const char *key;
    size_t klen;
    json_t *v;
    json_object_keylen_foreach((json_t *)args, key, klen, v) {
        if (json_is_string(v)) {
            render_argument(r, key, klen, "string", json_string_value(v), json_string_length(v));
            continue;
        }
        size_t n;
        char *text = k3_pyjson_dumps(v, K3_PYJSON_DEFAULT, &n);
        render_argument(r, key, klen, json_type_name(v), text, n);
        free(text);
    }
}

typedef struct {
    k3_pyvalue key, val;
} parsed_arg;

typedef struct {
    parsed_arg *v;
    size_t n, cap;
} parsed_args;

static void parsed_args_free(parsed_args *a) {
    for (size_t i = 0; i < a->n; i++) {
        k3_buf_free(&a->v[i].key.str);
        k3_buf_free(&a->v[i].val.str);
    }
    free(a->v);
}

/* One key:value pair at s[*pos]; appended to *a (so it is freed with it). */
static int parse_one_pair(const char *s, size_t n, size_t *pos, parsed_args *a) {
    if (a->n == a->cap) {
        a->cap = a->cap ? 2 * a->cap : 8;
        a->v = k3_xrealloc(a->v, a->cap * sizeof *a->v);
    }
    parsed_arg *pa = &a->v[a->n];
    memset(pa, 0, sizeof *pa);
    size_t p = *pos;
    if (k3_pyjson_scan(s, n, &p, &pa->key)) return -1;
    a->n++;
    if (pa->key.type != K3_PV_STRING) return -1;
    p = k3_pyjson_skip_ws(s, n, p);
    if (p >= n || s[p] != ':') return -1;
    p = k3_pyjson_skip_ws(s, n, p + 1);
    if (k3_pyjson_scan(s, n, &p, &pa->val)) return -1;
    *pos = p;
    return 0;
}

/* The reference's one-level parse of a string: '{' pairs '}' with anything
 * after the closing brace ignored. 0 ok, -1 not an object / invalid. */
static int parse_string_arguments(const char *s, size_t n, parsed_args *a) {
    size_t p = k3_pyjson_skip_ws(s, n, 0);
    if (p >= n || s[p] != '{') return -1;
    p = k3_pyjson_skip_ws(s, n, p + 1);
    if (p < n && s[p] == '}') return 0;
    for (;;) {
        if (parse_one_pair(s, n, &p, a)) return -1;
        p = k3_pyjson_skip_ws(s, n, p);
        if (p >= n) return -1;
        if (s[p] == '}') return 0;
        if (s[p] != ',') return -1;
        p = k3_pyjson_skip_ws(s, n, p + 1);
    }
}

static void render_string_arguments(k3_render *r, const char *s, size_t n) {
    parsed_args a = {0};
    if (parse_string_arguments(s, n, &a) == 0) {
        for (size_t i = 0; i < a.n; i++) {
            const k3_pyvalue *k = &a.v[i].key, *v = &a.v[i].val;
            if (v->type == K3_PV_STRING)
                render_argument(r, k->str.s, k->str.n, "string", v->str.s, v->str.n);
            else
                render_argument(r, k->str.s, k->str.n, pv_type_name(v->type), s + v->start,
                                v->end - v->start);
        }
    } else { /* not a parsable object: the string verbatim in a json block */
        k3_attr t = {"type", "object", 6};
        k3_r_open(r, K3_XT_JSON, &t, 1);
        k3_r_text(r, s, n);
        k3_r_close(r, K3_XT_JSON);
    }
    parsed_args_free(&a);
}

static int render_arguments(k3_render *r, const json_t *args, const char *path) {
    if (!args || json_is_null(args)) return 0;
    if (json_is_object(args)) {
        render_object_arguments(r, args);
        return 0;
    }
    if (json_is_string(args)) {
        if (json_string_length(args) > 0)
            render_string_arguments(r, json_string_value(args), json_string_length(args));
        return 0;
    }
    return k3_seterr("%s.arguments: expected an object, a string or null, got %s", path,
                     json_type_name(args));
}

static int render_one_call(k3_render *r, const json_t *call, size_t k, const char *path) {
    if (!json_is_object(call)) return k3_seterr("%s: a tool call must be an object", path);
    const json_t *fn = json_object_get(call, "function");
    if (!fn) fn = call;
    if (!json_is_object(fn)) return k3_seterr("%s.function: expected an object", path);
    const json_t *name = json_object_get(fn, "name");
    if (!name) return k3_seterr("%s.function.name: missing (every tool call needs a name)", path);
    k3_buf nb = {0};
    if (k3_pystr(&nb, name)) {
        k3_buf_free(&nb);
        return k3_seterr("%s.function.name: expected a string", path);
    }
    char idx[24];
    int il = snprintf(idx, sizeof idx, "%zu", k + 1);
    k3_attr a[2] = {{"tool", nb.s ? nb.s : "", nb.n}, {"index", idx, (size_t)il}};
    k3_r_open(r, K3_XT_CALL, a, 2);
    k3_buf_free(&nb);
    char fpath[256];
    snprintf(fpath, sizeof fpath, "%s.function", path);
    if (render_arguments(r, json_object_get(fn, "arguments"), fpath)) return -1;
    k3_r_close(r, K3_XT_CALL);
    return 0;
}

int k3_r_tool_calls(k3_render *r, const json_t *calls, const char *path) {
    if (!json_is_array(calls)) return k3_seterr("%s.tool_calls: expected an array", path);
    k3_r_open(r, K3_XT_TOOLS, NULL, 0);
    for (size_t k = 0; k < json_array_size(calls); k++) {
        char cpath[200];
        snprintf(cpath, sizeof cpath, "%s.tool_calls[%zu]", path, k);
        if (render_one_call(r, json_array_get(calls, k), k, cpath)) return -1;
    }
    k3_r_close(r, K3_XT_TOOLS);
    return 0;
}
