/* request.c — OpenAI request body → serve_req, with field-naming errors.
 *
 * Each field has a small checker; the first failing check fills serve_err
 * with a 400 (404 for an unknown model) naming the field the way the OpenAI
 * API does ("messages[0].content[1].text"). JSON null counts as "absent" for
 * every optional field, since official clients send explicit nulls. */
#include "serve/request.h"

#include "base/utf8safe.h"
#include "text/chat.h"

#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Build a parameter name like "messages[2].content" (truncated if huge). */
static void pname(char *p, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void pname(char *p, size_t cap, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(p, cap, fmt, ap);
    va_end(ap);
}

/* ---- field helpers: each returns 0, or -1 with err filled ---- */

static int type_err(serve_err *err, const char *param, const char *want, const json_t *v) {
    static const char *names[] = {"object", "array",   "string",  "integer",
                                  "number", "boolean", "boolean", "null"};
    int t = (int)json_typeof(v);
    const char *got = t >= 0 && t < 8 ? names[t] : "value";
    return serve_err_set(err, 400, NULL, param, "invalid_type",
                         "Invalid type for '%s': expected %s, but got %s.", param, want, got);
}

/* Optional field: NULL when missing or JSON null. */
static json_t *opt(const json_t *obj, const char *key) {
    json_t *v = json_object_get(obj, key);
    return v && !json_is_null(v) ? v : NULL;
}

static int get_number(const json_t *root, const char *key, double lo, double hi, double *out,
                      serve_err *err) {
    json_t *v = opt(root, key);
    if (!v) return 0;
    if (!json_is_number(v)) return type_err(err, key, "a number", v);
    double x = json_number_value(v);
    if (!(x >= lo && x <= hi))
        return serve_err_set(err, 400, NULL, key, "invalid_value",
                             "'%s' must be between %g and %g, got %g.", key, lo, hi, x);
    *out = x;
    return 0;
}

static int get_int(const json_t *root, const char *key, long long lo, long long hi, int *present,
                   long long *out, serve_err *err) {
    json_t *v = opt(root, key);
    if (present) *present = v != NULL;
    if (!v) return 0;
    if (json_is_real(v) && json_real_value(v) == floor(json_real_value(v)) &&
        fabs(json_real_value(v)) < 9e15)
        *out = (long long)json_real_value(v); /* 16.0 is an integer to JS clients */
    else if (json_is_integer(v))
        *out = json_integer_value(v);
    else
        return type_err(err, key, "an integer", v);
    if (*out < lo || *out > hi)
        return serve_err_set(err, 400, NULL, key, "invalid_value",
                             "'%s' must be between %lld and %lld, got %lld.", key, lo, hi, *out);
    return 0;
}

static int get_bool(const json_t *obj, const char *key, const char *param, int *out,
                    serve_err *err) {
    json_t *v = opt(obj, key);
    if (!v) return 0;
    if (!json_is_boolean(v)) return type_err(err, param, "a boolean", v);
    *out = json_is_true(v);
    return 0;
}

/* ---- messages ---- */

/* A keyword-valued string (a role, a type, an enum value) compared with
 * strcmp must not hide bytes after a U+0000: "user\u0000x" is not "user". */
static int is_keyword(const json_t *s) {
    return json_is_string(s) && strlen(json_string_value(s)) == json_string_length(s);
}

static int check_content(const json_t *c, const char *param, int nullable, serve_err *err) {
    char p[96];
    if (!c || json_is_null(c)) {
        if (nullable) return 0;
        return serve_err_set(err, 400, NULL, param, "missing_required_parameter",
                             "Missing required parameter: '%s'.", param);
    }
    if (json_is_string(c)) return 0;
    if (!json_is_array(c)) return type_err(err, param, "a string or an array of content parts", c);
    size_t i;
    json_t *part;
    json_array_foreach(c, i, part) {
        pname(p, sizeof p, "%s[%zu]", param, i);
        if (!json_is_object(part)) return type_err(err, p, "an object", part);
        json_t *t = json_object_get(part, "type");
        if (!json_is_string(t))
            return serve_err_set(err, 400, NULL, p, "invalid_value",
                                 "'%s.type' must be a string such as \"text\".", p);
        if (!is_keyword(t) || strcmp(json_string_value(t), "text"))
            return serve_err_set(err, 400, NULL, p, "invalid_value",
                                 "Content part type '%s' in '%s' is not supported (text only).",
                                 json_string_value(t), p);
        json_t *text = json_object_get(part, "text");
        pname(p, sizeof p, "%s[%zu].text", param, i);
        if (!json_is_string(text)) return type_err(err, p, "a string", text ? text : json_null());
    }
    return 0;
}

static int check_tool_calls(const json_t *tc, const char *param, serve_err *err) {
    char p[96];
    if (!json_is_array(tc)) return type_err(err, param, "an array", tc);
    size_t i;
    json_t *call;
    json_array_foreach(tc, i, call) {
        pname(p, sizeof p, "%s[%zu]", param, i);
        if (!json_is_object(call)) return type_err(err, p, "an object", call);
        json_t *fn = json_object_get(call, "function");
        pname(p, sizeof p, "%s[%zu].function", param, i);
        if (!json_is_object(fn)) return type_err(err, p, "an object", fn ? fn : json_null());
        json_t *name = json_object_get(fn, "name");
        pname(p, sizeof p, "%s[%zu].function.name", param, i);
        if (!json_is_string(name)) return type_err(err, p, "a string", name ? name : json_null());
        json_t *args = opt(fn, "arguments");
        pname(p, sizeof p, "%s[%zu].function.arguments", param, i);
        if (args && !json_is_string(args) && !json_is_object(args))
            return type_err(err, p, "a string", args);
    }
    return 0;
}

static int check_message(const json_t *m, size_t i, serve_err *err) {
    char p[96];
    pname(p, sizeof p, "messages[%zu]", i);
    if (!json_is_object(m)) return type_err(err, p, "an object", m);
    json_t *role = json_object_get(m, "role");
    pname(p, sizeof p, "messages[%zu].role", i);
    if (!json_is_string(role)) return type_err(err, p, "a string", role ? role : json_null());
    const char *r = is_keyword(role) ? json_string_value(role) : "";
    if (!strcmp(r, "developer")) { /* OpenAI's newer name for system (the renderer knows system) */
        json_object_set_new((json_t *)m, "role", json_string("system"));
        r = "system";
    }
    int is_asst = !strcmp(r, "assistant");
    if (strcmp(r, "system") && strcmp(r, "user") && !is_asst && strcmp(r, "tool"))
        return serve_err_set(err, 400, NULL, p, "invalid_value",
                             "'%s' must be one of system, developer, user, assistant, tool; got "
                             "'%s'.",
                             p, r);
    pname(p, sizeof p, "messages[%zu].content", i);
    if (check_content(json_object_get(m, "content"), p, is_asst, err)) return -1;
    static const char *str_fields[] = {"name", "tool_call_id", "reasoning_content", "reasoning"};
    for (size_t k = 0; k < 4; k++) {
        json_t *v = opt(m, str_fields[k]);
        pname(p, sizeof p, "messages[%zu].%s", i, str_fields[k]);
        if (v && !json_is_string(v)) return type_err(err, p, "a string", v);
    }
    json_t *tc = opt(m, "tool_calls");
    pname(p, sizeof p, "messages[%zu].tool_calls", i);
    if (tc && check_tool_calls(tc, p, err)) return -1;
    return 0;
}

static int parse_messages(serve_req *q, serve_err *err) {
    json_t *ms = json_object_get(q->root, "messages");
    if (!ms || json_is_null(ms))
        return serve_err_set(err, 400, NULL, "messages", "missing_required_parameter",
                             "Missing required parameter: 'messages'.");
    if (!json_is_array(ms)) return type_err(err, "messages", "an array", ms);
    if (json_array_size(ms) == 0)
        return serve_err_set(err, 400, NULL, "messages", "empty_array",
                             "'messages' must contain at least one message.");
    size_t i;
    json_t *m;
    json_array_foreach(ms, i, m) if (check_message(m, i, err)) return -1;
    q->messages = ms;
    return 0;
}

/* ---- tools, tool_choice, response_format, thinking ---- */

static int parse_tools(serve_req *q, serve_err *err) {
    char p[64];
    json_t *tools = opt(q->root, "tools");
    if (tools) {
        if (!json_is_array(tools)) return type_err(err, "tools", "an array", tools);
        size_t i;
        json_t *t;
        json_array_foreach(tools, i, t) {
            pname(p, sizeof p, "tools[%zu]", i);
            if (!json_is_object(t)) return type_err(err, p, "an object", t);
            json_t *fn = json_object_get(t, "function");
            pname(p, sizeof p, "tools[%zu].function", i);
            if (!json_is_object(fn)) return type_err(err, p, "an object", fn ? fn : json_null());
            json_t *name = json_object_get(fn, "name");
            pname(p, sizeof p, "tools[%zu].function.name", i);
            if (!json_is_string(name))
                return type_err(err, p, "a string", name ? name : json_null());
        }
        q->tools = json_array_size(tools) ? tools : NULL;
    }
    json_t *tc = opt(q->root, "tool_choice");
    if (tc) {
        if (json_is_string(tc)) {
            const char *s = is_keyword(tc) ? json_string_value(tc) : "";
            if (strcmp(s, "auto") && strcmp(s, "none") && strcmp(s, "required"))
                return serve_err_set(err, 400, NULL, "tool_choice", "invalid_value",
                                     "'tool_choice' must be auto, none, required or an object; "
                                     "got '%s'.",
                                     s);
        } else if (!json_is_object(tc)) {
            return type_err(err, "tool_choice", "a string or an object", tc);
        }
        q->tool_choice = tc;
    }
    return 0;
}

static int parse_response_format(serve_req *q, serve_err *err) {
    json_t *rf = opt(q->root, "response_format");
    if (!rf) return 0;
    if (!json_is_object(rf)) return type_err(err, "response_format", "an object", rf);
    json_t *t = json_object_get(rf, "type");
    if (!json_is_string(t))
        return type_err(err, "response_format.type", "a string", t ? t : json_null());
    const char *s = is_keyword(t) ? json_string_value(t) : "";
    if (strcmp(s, "text") && strcmp(s, "json_object") && strcmp(s, "json_schema"))
        return serve_err_set(err, 400, NULL, "response_format.type", "invalid_value",
                             "'response_format.type' must be text, json_object or json_schema; "
                             "got '%s'.",
                             s);
    q->response_format = rf;
    return 0;
}

/* `thinking` may be a boolean or Moonshot's {"type":"enabled"|"disabled"};
 * chat_template_kwargs.thinking / .enable_thinking override it. */
static int parse_thinking(serve_req *q, serve_err *err) {
    json_t *th = opt(q->root, "thinking");
    if (th && json_is_object(th)) {
        json_t *t = json_object_get(th, "type");
        if (!json_is_string(t))
            return type_err(err, "thinking.type", "a string", t ? t : json_null());
        q->thinking = strcmp(json_string_value(t), "disabled") != 0;
    } else if (get_bool(q->root, "thinking", "thinking", &q->thinking, err)) {
        return -1;
    }
    json_t *kw = opt(q->root, "chat_template_kwargs");
    if (kw) {
        if (!json_is_object(kw)) return type_err(err, "chat_template_kwargs", "an object", kw);
        if (get_bool(kw, "enable_thinking", "chat_template_kwargs.enable_thinking", &q->thinking,
                     err) ||
            get_bool(kw, "thinking", "chat_template_kwargs.thinking", &q->thinking, err))
            return -1;
    }
    json_t *eff = opt(q->root, "reasoning_effort");
    if (eff) {
        if (!json_is_string(eff)) return type_err(err, "reasoning_effort", "a string", eff);
        const char *e = NULL; /* one mapping for every route (text/chat.h) */
        int on = is_keyword(eff) ? k3_chat_effort_map(json_string_value(eff), &e) : -1;
        if (on < 0)
            return serve_err_set(err, 400, NULL, "reasoning_effort", "invalid_value",
                                 "'reasoning_effort' must be " K3_CHAT_EFFORT_VALUES "; got '%s'.",
                                 json_string_value(eff));
        if (!on) q->thinking = 0;
        q->reasoning_effort = e;
    }
    return 0;
}

/* ---- completion prompt ---- */

static int parse_prompt(serve_req *q, serve_err *err) {
    json_t *p = json_object_get(q->root, "prompt");
    if (!p || json_is_null(p))
        return serve_err_set(err, 400, NULL, "prompt", "missing_required_parameter",
                             "Missing required parameter: 'prompt'.");
    if (json_is_array(p)) {
        if (json_array_size(p) != 1 || !json_is_string(json_array_get(p, 0)))
            return serve_err_set(err, 400, NULL, "prompt", "invalid_value",
                                 "'prompt' must be a string or an array of exactly one string.");
        p = json_array_get(p, 0);
    }
    if (!json_is_string(p)) return type_err(err, "prompt", "a string", p);
    q->prompt = json_string_value(p);
    q->prompt_len = json_string_length(p);
    if (q->prompt_len == 0)
        return serve_err_set(err, 400, NULL, "prompt", "invalid_value",
                             "'prompt' must not be empty.");
    return 0;
}

/* ---- sampling and output options ---- */

static int parse_sampling(serve_req *q, serve_err *err) {
    long long v = 0;
    int present = 0;
    if (get_number(q->root, "temperature", 0, 2, &q->temperature, err) ||
        get_number(q->root, "top_p", 0, 1, &q->top_p, err) ||
        get_number(q->root, "min_p", 0, 1, &q->min_p, err) ||
        get_number(q->root, "repetition_penalty", 1e-6, 100, &q->repetition_penalty, err))
        return -1;
    if (get_int(q->root, "top_k", -1, 1 << 30, &present, &v, err)) return -1;
    if (present) q->top_k = v < 0 ? 0 : (int)v;
    if (get_int(q->root, "seed", INT64_MIN, INT64_MAX, &q->has_seed, &v, err)) return -1;
    if (q->has_seed) q->seed = (uint64_t)v;
    return get_bool(q->root, "speculative", "speculative", &q->speculative, err);
}

static int parse_max_tokens(serve_req *q, const serve_limits *lim, serve_err *err) {
    const char *keys[] = {"max_completion_tokens", "max_tokens"};
    q->max_tokens = lim->max_tokens_cap;
    for (int k = 0; k < 2; k++) {
        long long v = 0;
        int present = 0;
        if (get_int(q->root, keys[k], LLONG_MIN, LLONG_MAX, &present, &v, err)) return -1;
        if (!present) continue;
        if (v <= 0)
            return serve_err_set(err, 400, NULL, keys[k], "invalid_value",
                                 "'%s' must be at least 1, got %lld.", keys[k], v);
        q->max_tokens = v < lim->max_tokens_cap ? (int)v : lim->max_tokens_cap;
        break; /* max_completion_tokens wins over the deprecated max_tokens */
    }
    return 0;
}

/* Stop sequences are matched as C strings: one holding U+0000 is refused
 * rather than cut short (it would stop at its first part). */
static int add_stop(serve_req *q, const json_t *s, const char *param, serve_err *err) {
    if (!json_string_length(s)) return 0;
    if (!is_keyword(s))
        return serve_err_set(err, 400, NULL, param, "invalid_value",
                             "'%s' must not contain U+0000.", param);
    q->stop[q->n_stop++] = json_string_value(s);
    return 0;
}

static int parse_stop(serve_req *q, serve_err *err) {
    json_t *s = opt(q->root, "stop");
    if (!s) return 0;
    if (json_is_string(s)) return add_stop(q, s, "stop", err);
    if (!json_is_array(s)) return type_err(err, "stop", "a string or an array of strings", s);
    if (json_array_size(s) > SERVE_MAX_STOP)
        return serve_err_set(err, 400, NULL, "stop", "invalid_value",
                             "'stop' may hold at most %d sequences, got %zu.", SERVE_MAX_STOP,
                             json_array_size(s));
    size_t i;
    json_t *e;
    json_array_foreach(s, i, e) {
        char p[32];
        pname(p, sizeof p, "stop[%zu]", i);
        if (!json_is_string(e)) return type_err(err, p, "a string", e);
        if (add_stop(q, e, p, err)) return -1;
    }
    return 0;
}

static int parse_output_options(serve_req *q, serve_err *err) {
    if (get_bool(q->root, "stream", "stream", &q->stream, err)) return -1;
    json_t *so = opt(q->root, "stream_options");
    if (so) {
        if (!json_is_object(so)) return type_err(err, "stream_options", "an object", so);
        if (get_bool(so, "include_usage", "stream_options.include_usage", &q->include_usage, err))
            return -1;
    }
    long long v = 0;
    int present = 0;
    json_t *lp = opt(q->root, "logprobs");
    if (lp && q->kind == SERVE_CHAT) {
        if (get_bool(q->root, "logprobs", "logprobs", &q->logprobs, err)) return -1;
    } else if (lp) {
        if (get_int(q->root, "logprobs", 0, 5, &present, &v, err)) return -1;
        q->logprobs = v > 0;
        q->top_logprobs = (int)v;
    }
    if (get_int(q->root, "top_logprobs", 0, 20, &present, &v, err)) return -1;
    if (present) q->top_logprobs = (int)v;
    json_t *salt = opt(q->root, "cache_salt"); /* prompt-cache scope (as in vLLM) */
    if (salt) {
        if (!json_is_string(salt)) return type_err(err, "cache_salt", "a string", salt);
        if (!json_string_length(salt) || json_string_length(salt) > 1024)
            return serve_err_set(err, 400, NULL, "cache_salt", "invalid_value",
                                 "'cache_salt' must be a non-empty string of at most 1024 bytes.");
        q->cache_salt = json_string_value(salt);
        q->cache_salt_len = json_string_length(salt);
    }
    return 0;
}

static int parse_test_fields(serve_req *q, const serve_limits *lim, serve_err *err) {
    json_t *ft = opt(q->root, "k3_test_force_tokens");
    json_t *fx = opt(q->root, "k3_test_force_text");
    json_t *dl = opt(q->root, "k3_test_prefill_deadline_tokens");
    if (dl && !lim->test_mode)
        return serve_err_set(err, 400, NULL, "k3_test_prefill_deadline_tokens", "test_mode_only",
                             "Test fields are only accepted by a server started with --test-mode.");
    if (dl && get_int(q->root, "k3_test_prefill_deadline_tokens", 0, INT64_MAX,
                      &q->has_test_deadline_tokens, &q->test_deadline_tokens, err))
        return -1;
    if (!ft && !fx) return 0;
    if (!lim->test_mode)
        return serve_err_set(err, 400, NULL, ft ? "k3_test_force_tokens" : "k3_test_force_text",
                             "test_mode_only",
                             "Forced output is only accepted by a server started with "
                             "--test-mode.");
    if (ft) {
        if (!json_is_array(ft) || json_array_size(ft) == 0)
            return serve_err_set(err, 400, NULL, "k3_test_force_tokens", "invalid_value",
                                 "'k3_test_force_tokens' must be a non-empty array of ids.");
        size_t i;
        json_t *e;
        json_array_foreach(
            ft, i, e) if (!json_is_integer(e) || json_integer_value(e) < 0 ||
                          json_integer_value(e) >
                              INT32_MAX) return serve_err_set(err, 400, NULL,
                                                              "k3_test_force_tokens",
                                                              "invalid_value",
                                                              "'k3_test_force_tokens[%zu]' must be "
                                                              "a non-negative integer id.",
                                                              i);
        q->force_tokens = ft;
    }
    if (fx) {
        if (!json_is_string(fx)) return type_err(err, "k3_test_force_text", "a string", fx);
        q->force_text = json_string_value(fx);
        q->force_text_len = json_string_length(fx);
    }
    return 0;
}

static int parse_model(serve_req *q, const serve_limits *lim, serve_err *err) {
    json_t *m = opt(q->root, "model");
    if (!m) return 0;
    if (!json_is_string(m)) return type_err(err, "model", "a string", m);
    if (!serve_model_known(lim, json_string_value(m))) {
        char got[200], have[200]; /* clipped on character boundaries */
        k3_utf8_escape(got, sizeof got, json_string_value(m), json_string_length(m), 0);
        k3_utf8_escape(have, sizeof have, lim->model_name, strlen(lim->model_name), 0);
        return serve_err_set(err, 404, NULL, "model", "model_not_found",
                             "The model '%s' does not exist (this server serves '%s').", got, have);
    }
    return 0;
}

int serve_model_known(const serve_limits *lim, const char *model) {
    if (!lim->model_name || !strcmp(model, lim->model_name)) return 1;
    for (int i = 0; i < lim->n_aliases; i++)
        if (!strcmp(model, lim->aliases[i])) return 1;
    return 0;
}

static void set_defaults(serve_req *q, serve_kind kind) {
    memset(q, 0, sizeof *q);
    q->kind = kind;
    q->n = 1;
    q->thinking = 1;
    q->temperature = 1.0;
    q->top_p = 1.0;
    q->speculative = -1;
    q->repetition_penalty = 1.0;
}

int serve_req_parse(const char *body, size_t len, serve_kind kind, const serve_limits *lim,
                    serve_req *q, serve_err *err) {
    set_defaults(q, kind);
    if (!serve_utf8_valid(body, len))
        return serve_err_set(err, 400, NULL, NULL, "invalid_utf8",
                             "The request body is not valid UTF-8.");
    json_error_t je;
    json_t *root = json_loadb(body, len, JSON_ALLOW_NUL, &je);
    if (!root)
        return serve_err_set(err, 400, NULL, NULL, "invalid_json",
                             "The request body is not valid JSON: %s (line %d, column %d).",
                             je.text, je.line, je.column);
    return serve_req_from_json(root, kind, lim, q, err);
}

int serve_req_from_json(json_t *root, serve_kind kind, const serve_limits *lim, serve_req *q,
                        serve_err *err) {
    set_defaults(q, kind);
    q->root = root;
    int rc = -1;
    if (!json_is_object(q->root)) {
        serve_err_set(err, 400, NULL, NULL, "invalid_json",
                      "The request body must be a JSON object.");
        goto out;
    }
    if (parse_model(q, lim, err)) goto out;
    if (kind == SERVE_CHAT) {
        if (parse_messages(q, err) || parse_tools(q, err) || parse_response_format(q, err) ||
            parse_thinking(q, err))
            goto out;
    } else if (parse_prompt(q, err)) {
        goto out;
    }
    if (parse_sampling(q, err) || parse_max_tokens(q, lim, err) || parse_stop(q, err) ||
        parse_output_options(q, err) || parse_test_fields(q, lim, err) ||
        serve_req_parse_openai(q, lim, err))
        goto out;
    rc = 0;
out:
    if (rc) serve_req_free(q);
    return rc;
}

void serve_req_free(serve_req *q) {
    if (q->root) json_decref(q->root);
    q->root = NULL;
    free(q->logit_bias);
    q->logit_bias = NULL;
    q->n_logit_bias = 0;
}
