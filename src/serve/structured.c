/* structured.c — the output grammar of a chat request (structured.h): JSON
 * Schema / json_object content, tool calls whose arguments follow each
 * tool's parameters, forced calls, all inside the XTML message envelope. */
#include "serve/structured.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "base/mem.h"
#include "gen/constrain.h"
#include "serve/engine.h"
#include "text/jsonschema.h"
#include "text/toolcall.h"

#define MAX_CALLS 16 /* tool calls one forced/auto tools section may hold */

static json_t *opt(const json_t *o, const char *k) {
    json_t *v = json_object_get(o, k);
    return v && !json_is_null(v) ? v : NULL;
}

/* 1 if the prompt ends with the think opener (generation starts reasoning). */
static int ends_in_think(const serve_engine *e, const int32_t *prompt, int64_t n) {
    int64_t from = n > 8 ? n - 8 : 0;
    size_t len = 0;
    char *t = k3_tok_decode_bytes(e->tok, prompt + from, (size_t)(n - from), 0, &len);
    static const char opener[] = "<|open|>think<|sep|>";
    int r = t && len >= sizeof opener - 1 &&
            !memcmp(t + len - (sizeof opener - 1), opener, sizeof opener - 1);
    free(t);
    return r;
}

/* XTML attribute escaping (chat.md §2.1): & first, then ". */
/* The schema a request asks the content to follow: response_format
 * json_schema / json_object, vLLM's guided_json, llama.cpp's json_schema.
 * *schema NULL + *json_object 0: none. -1 + err for a malformed field. */
static int content_schema(const json_t *root, const json_t **schema, int *json_object,
                          json_t **owned, serve_err *err) {
    *schema = NULL;
    *json_object = 0;
    *owned = NULL;
    static const char *const refused[] = {"grammar", "guided_grammar", "guided_regex",
                                          "guided_choice", "regex"};
    for (size_t i = 0; i < sizeof refused / sizeof *refused; i++)
        if (opt(root, refused[i]))
            return serve_err_set(err, 400, NULL, refused[i], "unsupported_constraint",
                                 "'%s' is not supported: k3 enforces JSON Schema only "
                                 "(response_format json_schema / json_object, guided_json).",
                                 refused[i]);
    json_t *rf = opt(root, "response_format");
    const char *t = rf ? json_string_value(json_object_get(rf, "type")) : NULL;
    if (t && !strcmp(t, "json_object")) {
        *json_object = 1;
        return 0;
    }
    if (t && !strcmp(t, "json_schema")) {
        json_t *js = opt(rf, "json_schema");
        json_t *s = js ? opt(js, "schema") : NULL;
        if (!js || !json_is_object(js))
            return serve_err_set(err, 400, NULL, "response_format.json_schema",
                                 "missing_required_parameter",
                                 "'response_format.json_schema' must be an object with a "
                                 "'schema'.");
        if (!s)
            return serve_err_set(err, 400, NULL, "response_format.json_schema.schema",
                                 "missing_required_parameter",
                                 "Missing required parameter: "
                                 "'response_format.json_schema.schema'.");
        *schema = s;
        return 0;
    }
    const char *keys[] = {"guided_json", "json_schema"};
    for (int k = 0; k < 2; k++) {
        json_t *g = opt(root, keys[k]);
        if (!g) continue;
        if (json_is_string(g)) { /* vLLM accepts the schema as a JSON string too */
            json_error_t je;
            *owned = json_loads(json_string_value(g), JSON_DECODE_ANY, &je);
            if (!*owned)
                return serve_err_set(err, 400, NULL, keys[k], "invalid_value",
                                     "'%s' is not valid JSON: %s.", keys[k], je.text);
            g = *owned;
        }
        *schema = g;
        return 0;
    }
    return 0;
}

/* 400 request_too_complex: the grammar would pass its size budget
 * (grammar.h); msg names the limit. */
static int too_complex_err(serve_err *err, const char *field, const char *msg) {
    return serve_err_set(err, 400, NULL, field, "request_too_complex",
                         "The structured-output grammar is too large: %s. Limits: %d grammar "
                         "nodes, %u MiB (docs/serve.md, Limits).",
                         msg, K3_G_MAX_NODES, K3_G_MAX_BYTES >> 20);
}

/* Arguments grammar of one tool: its parameters schema, which must describe
 * an object. NULL + msg when it cannot be enforced. */
static k3_gnode *tool_args(k3_gram *g, const json_t *fn, char *msg, size_t cap, int *too_complex) {
    *too_complex = 0;
    json_t *params = opt(fn, "parameters");
    if (!params) return k3_g_freeobj(g, k3_g_any(g));
    k3_gnode *n = k3_schema_compile(g, params, msg, cap, too_complex);
    int object = n != NULL;
    for (int sym = 0; n && sym < K3_SYM_COUNT; sym++) /* objects, or unions of them */
        object &= k3_gnode_has_first(n, sym) == (sym == '{');
    if (n && !object) {
        snprintf(msg, cap, "the parameters schema must describe an object");
        return NULL;
    }
    return n;
}

int serve_structured_new(const serve_engine *e, const serve_req *q, const int32_t *prompt,
                         int64_t n_prompt, struct k3_constraint **out, serve_err *err) {
    *out = NULL;
    if (q->kind != SERVE_CHAT) return 0;
    const json_t *schema;
    int json_object;
    json_t *owned;
    if (content_schema(q->root, &schema, &json_object, &owned, err)) return -1;
    const char *tc = json_is_string(q->tool_choice) ? json_string_value(q->tool_choice) : NULL;
    const char *named = NULL;
    if (json_is_object(q->tool_choice)) {
        json_t *fn = json_object_get(q->tool_choice, "function");
        named = json_string_value(json_object_get(fn ? fn : q->tool_choice, "name"));
        if (!named) {
            json_decref(owned);
            return serve_err_set(err, 400, NULL, "tool_choice", "invalid_value",
                                 "'tool_choice' must name a function: "
                                 "{\"type\":\"function\",\"function\":{\"name\":...}}.");
        }
    }
    int use_tools = q->tools && !(tc && !strcmp(tc, "none"));
    if ((named || (tc && !strcmp(tc, "required"))) && !q->tools) {
        json_decref(owned);
        return serve_err_set(err, 400, NULL, "tool_choice", "invalid_value",
                             "'tool_choice' %s needs 'tools'.",
                             named ? "naming a function" : "\"required\"");
    }
    if (!schema && !json_object && !use_tools) {
        json_decref(owned);
        return 0;
    }
    if (!e->vtrie) {
        json_decref(owned);
        return serve_err_set(err, 400, NULL, NULL, "unsupported_constraint",
                             "This model's tokenizer has no XTML control tokens: structured "
                             "output cannot be enforced.");
    }
    k3_gram *g = k3_gram_new();
    char msg[512];
    k3_gnode *content = NULL; /* JSON content, or NULL for free text */
    if (schema) {
        int too_complex;
        content = k3_schema_compile(g, schema, msg, sizeof msg, &too_complex);
        json_decref(owned);
        owned = NULL;
        if (!content && too_complex) {
            k3_gram_free(g);
            return too_complex_err(err, "response_format", msg);
        }
        if (!content) {
            k3_gram_free(g);
            return serve_err_set(err, 400, NULL, "response_format", "unsupported_schema",
                                 "This JSON Schema cannot be enforced: %s. See docs/serve.md "
                                 "(structured output) for what is supported.",
                                 msg);
        }
    } else if (json_object) {
        content = k3_g_freeobj(g, k3_g_any(g));
    }
    json_decref(owned);
    /* the calls a tools section may hold */
    k3_gnode *calls = NULL;
    if (use_tools) {
        size_t n = json_array_size(q->tools), k = 0;
        k3_gsyms *keys = k3_xcalloc(n, sizeof *keys);
        k3_gnode **rests = k3_xcalloc(n, sizeof *rests);
        size_t i;
        json_t *t;
        json_array_foreach(q->tools, i, t) {
            json_t *fn = json_object_get(t, "function");
            const char *name = json_string_value(json_object_get(fn, "name"));
            if (named && strcmp(name, named)) continue;
            int dup = 0;
            for (size_t j = 0; j < i; j++)
                dup |= !strcmp(
                    name, json_string_value(json_object_get(
                              json_object_get(json_array_get(q->tools, j), "function"), "name")));
            if (dup) continue;
            int too_complex;
            k3_gnode *args = tool_args(g, fn, msg, sizeof msg, &too_complex);
            if (!args && too_complex) { /* never a fallback: the budget is the request's */
                free(keys);
                free(rests);
                k3_gram_free(g);
                return too_complex_err(err, "tools", msg);
            }
            if (!args) {
                if (named || !strcmp(tc ? tc : "", "required")) {
                    free(keys);
                    free(rests);
                    k3_gram_free(g);
                    return serve_err_set(err, 400, NULL, "tools", "unsupported_schema",
                                         "The parameters of tool '%s' cannot be enforced: %s. "
                                         "See docs/serve.md (structured output).",
                                         name, msg);
                }
                /* tool_choice auto: this tool's arguments are held to a JSON object */
                fprintf(stderr, "k3 serve: tool '%s': arguments only held to a JSON object (%s)\n",
                        name, msg);
                args = k3_g_freeobj(g, k3_g_any(g));
            }
            k3_toolcall_gram(g, name, args, named ? 1 : MAX_CALLS, &keys[k], &rests[k]);
            k++;
        }
        if (named && k == 0) {
            free(keys);
            free(rests);
            k3_gram_free(g);
            return serve_err_set(err, 400, NULL, "tool_choice", "invalid_value",
                                 "'tool_choice' names '%s', which is not in 'tools'.", named);
        }
        k3_gnode *one = k3_g_keyed(g, keys, rests, (int)k);
        calls = k3_g_repeat(g, one, 1, named ? 1 : MAX_CALLS);
        free(keys);
        free(rests);
    }
    int forced = named || (tc && !strcmp(tc, "required"));
    k3_gnode *end_msg = k3_g_lit_ctl(g, "{C}response{S}{C}message{S}{E}");
    k3_gnode *tools_sec = NULL;
    if (calls) {
        k3_gnode *kids[3] = {k3_g_lit_ctl(g, "{C}response{S}{O}tools{S}"), calls,
                             k3_g_lit_ctl(g, "{C}tools{S}{C}message{S}{E}")};
        tools_sec = k3_g_seq(g, kids, 3);
    }
    k3_gnode *body; /* what follows <|open|>response<|sep|> */
    if (forced) {
        body = tools_sec;
    } else if (content && tools_sec) {
        /* JSON content then the end, or (first symbol <|close|>) a tools section */
        k3_gnode *json_then_end[2] = {content, end_msg};
        k3_gnode *alts[2] = {k3_g_seq(g, json_then_end, 2), tools_sec};
        body = k3_g_union(g, alts, 2);
    } else if (content) {
        k3_gnode *kids[2] = {content, end_msg};
        body = k3_g_seq(g, kids, 2);
    } else {
        /* free text, then the end or a tools section (both open with <|close|>response) */
        k3_gsyms lits[2] = {k3_g_lit_ctl(g, "{C}response{S}{C}message{S}{E}")->lit,
                            k3_g_lit_ctl(g, "{C}response{S}{O}tools{S}")->lit};
        k3_gnode *after_tools[2] = {calls, k3_g_lit_ctl(g, "{C}tools{S}{C}message{S}{E}")};
        k3_gnode *tail[2] = {NULL, k3_g_seq(g, after_tools, 2)};
        k3_gnode *kids[2] = {k3_g_text(g), k3_g_keyed(g, lits, tail, 2)};
        body = k3_g_seq(g, kids, 2);
    }
    if (!body) { /* content JSON starting with <|close|>: cannot happen for JSON */
        k3_gram_free(g);
        return serve_err_set(err, 400, NULL, "response_format", "unsupported_schema",
                             "The response format and the tools cannot be combined.");
    }
    k3_gnode *root = body;
    if (ends_in_think(e, prompt, n_prompt)) {
        k3_gnode *kids[3] = {k3_g_text(g), k3_g_lit_ctl(g, "{C}think{S}{O}response{S}"), body};
        root = k3_g_seq(g, kids, 3);
    }
    if (k3_gram_over(g)) {
        k3_gram_free(g);
        return too_complex_err(err, "tools", "the tools compile to more grammar than the limit");
    }
    *out = k3_constraint_new(e->vtrie, g, root);
    return 0;
}
