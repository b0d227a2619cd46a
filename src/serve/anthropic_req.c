/* anthropic_req.c — an Anthropic Messages request → chat request
 * (serve/apis.h), after anthropic_check.c validated it: system, text /
 * tool_use / tool_result / thinking blocks, tools with input_schema,
 * tool_choice auto/any/tool/none, thinking enabled (budget_tokens → effort
 * low < 4096 <= high < 16384 <= max), adaptive or disabled/absent (off),
 * output_config (effort; format → response_format json_schema),
 * stop_sequences. Pure: fuzzed by fuzz/fuzz_api_request.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "serve/apis.h"

static json_t *opt(const json_t *o, const char *k) {
    json_t *v = json_object_get(o, k);
    return v && !json_is_null(v) ? v : NULL;
}

static int bad(serve_err *e, const char *param, const char *msg) {
    return serve_err_set(e, 400, NULL, param, "invalid_value", "%s", msg);
}

/* text of a string or of text blocks */
static json_t *block_text(const json_t *c, const char *param, serve_err *e) {
    if (json_is_string(c)) return json_incref((json_t *)c);
    json_t *parts = json_array();
    size_t i;
    json_t *b;
    json_array_foreach(c, i, b) {
        if (strcmp(json_string_value(json_object_get(b, "type")) ?: "", "text") ||
            !json_is_string(json_object_get(b, "text"))) {
            json_decref(parts);
            bad(e, param, "only text blocks are supported here.");
            return NULL;
        }
        json_array_append_new(
            parts, json_pack("{s:s,s:O}", "type", "text", "text", json_object_get(b, "text")));
    }
    return parts;
}

static int message(json_t *msgs, const json_t *m, size_t i, serve_err *e) {
    char p[64];
    snprintf(p, sizeof p, "messages.%zu", i);
    const char *role = json_string_value(json_object_get(m, "role"));
    if (!role || (strcmp(role, "user") && strcmp(role, "assistant")))
        return bad(e, p, "role must be user or assistant.");
    json_t *c = json_object_get(m, "content");
    if (json_is_string(c)) {
        json_array_append_new(msgs, json_pack("{s:s,s:O}", "role", role, "content", c));
        return 0;
    }
    if (!json_is_array(c)) return bad(e, p, "content must be a string or an array of blocks.");
    json_t *text = json_array(), *calls = json_array();
    json_t *thinking = NULL; /* borrowed; a string or absent */
    size_t k;
    json_t *b;
    json_array_foreach(c, k, b) {
        const char *t = json_string_value(json_object_get(b, "type"));
        if (!t) t = "";
        if (!strcmp(t, "text") && json_is_string(json_object_get(b, "text"))) {
            json_array_append_new(
                text, json_pack("{s:s,s:O}", "type", "text", "text", json_object_get(b, "text")));
        } else if (!strcmp(t, "tool_use") && !strcmp(role, "assistant")) {
            json_t *id = json_object_get(b, "id"), *name = json_object_get(b, "name");
            json_t *input = opt(b, "input");
            if (!json_is_string(id) || !json_is_string(name) || (input && !json_is_object(input)))
                goto fail_block;
            char *args = input ? json_dumps(input, JSON_COMPACT) : strdup("{}");
            json_array_append_new(calls,
                                  json_pack("{s:O,s:s,s:{s:O,s:s}}", "id", id, "type", "function",
                                            "function", "name", name, "arguments", args));
            free(args);
        } else if (!strcmp(t, "tool_result") && !strcmp(role, "user")) {
            json_t *id = json_object_get(b, "tool_use_id");
            if (!json_is_string(id)) goto fail_block;
            json_t *rc = opt(b, "content");
            json_t *ct = rc ? block_text(rc, p, e) : json_string("");
            if (!ct) goto fail;
            if (json_is_true(json_object_get(b, "is_error")) && json_is_string(ct)) {
                size_t n = json_string_length(ct); /* the text may hold U+0000 */
                char *s = malloc(n + 7);
                if (s) {
                    memcpy(s, "Error: ", 7);
                    memcpy(s + 7, json_string_value(ct), n);
                    json_decref(ct);
                    ct = json_stringn(s, n + 7);
                }
                free(s);
            }
            /* tool results come right after the assistant turn that called them */
            json_array_append_new(msgs, json_pack("{s:s,s:O,s:o}", "role", "tool", "tool_call_id",
                                                  id, "content", ct));
        } else if (!strcmp(t, "thinking") && !strcmp(role, "assistant")) {
            thinking = json_object_get(b, "thinking");
        } else if (!strcmp(t, "redacted_thinking")) {
            continue;
        } else {
            goto fail_block;
        }
    }
    if (json_array_size(text) || json_array_size(calls) || !strcmp(role, "assistant")) {
        json_t *mm = json_pack("{s:s,s:O}", "role", role, "content", text);
        if (json_array_size(calls)) json_object_set(mm, "tool_calls", calls);
        if (json_is_string(thinking)) json_object_set(mm, "reasoning_content", thinking);
        json_array_append_new(msgs, mm);
    }
    json_decref(text);
    json_decref(calls);
    return 0;
fail_block:
    serve_err_set(e, 400, NULL, p, "invalid_value",
                  "content block %zu is not supported here (text, tool_use in "
                  "assistant turns, tool_result in user turns, thinking).",
                  k);
fail:
    json_decref(text);
    json_decref(calls);
    return -1;
}

/* thinking enabled (budget_tokens → effort: < 4096 low, < 16384 high, else
 * max) or adaptive (the renderer's default effort) turn K3's thinking on;
 * output_config.effort, when given, sets the effort (medium → high, xhigh →
 * max); disabled or absent: off, Anthropic's default. */
static void set_thinking(const json_t *req, json_t *chat) {
    json_t *th = opt(req, "thinking");
    const char *tt = th ? json_string_value(json_object_get(th, "type")) : NULL;
    const char *effort = NULL;
    if (tt && !strcmp(tt, "enabled")) {
        json_int_t b = json_integer_value(json_object_get(th, "budget_tokens"));
        effort = b < 4096 ? "low" : b < 16384 ? "high" : "max";
    }
    const char *oe = json_string_value(json_object_get(opt(req, "output_config"), "effort"));
    if (oe)
        effort = !strcmp(oe, "low")                             ? "low"
                 : !strcmp(oe, "medium") || !strcmp(oe, "high") ? "high"
                                                                : "max";
    int on = tt && (!strcmp(tt, "enabled") || !strcmp(tt, "adaptive"));
    json_object_set_new(chat, "thinking", json_boolean(on));
    if (on && effort) json_object_set_new(chat, "reasoning_effort", json_string(effort));
}

/* Structured outputs (output_config.format, or the beta's output_format):
 * the chat path's response_format json_schema, enforced by the same grammar. */
static void set_output_format(const json_t *req, json_t *chat) {
    json_t *f = opt(opt(req, "output_config"), "format");
    if (!f) f = opt(req, "output_format");
    if (!f) return;
    json_object_set_new(chat, "response_format",
                        json_pack("{s:s,s:{s:s,s:O,s:b}}", "type", "json_schema", "json_schema",
                                  "name", "output", "schema", json_object_get(f, "schema"),
                                  "strict", 1));
}

/* Messages request → chat request, or NULL + e. */
json_t *serve_anthropic_to_chat(const json_t *req, int count_only, serve_err *e) {
    if (serve_anthropic_check(req, count_only, e)) return NULL;
    json_t *msgs = json_array();
    json_t *sys = opt(req, "system");
    if (sys) {
        json_t *t = block_text(sys, "system", e);
        if (!t) goto fail;
        json_array_append_new(msgs, json_pack("{s:s,s:o}", "role", "system", "content", t));
    }
    json_t *ms = json_object_get(req, "messages");
    if (!json_is_array(ms) || !json_array_size(ms)) {
        bad(e, "messages", "'messages' must be a non-empty array.");
        goto fail;
    }
    size_t i;
    json_t *m;
    json_array_foreach(ms, i, m) if (!json_is_object(m) || message(msgs, m, i, e)) goto fail;
    json_t *chat = json_pack("{s:o}", "messages", msgs);
    msgs = NULL;
    json_t *mt = opt(req, "max_tokens"); /* required unless count_only: checked */
    if (mt) json_object_set(chat, "max_tokens", mt);
    static const char *const copy[] = {"model",      "temperature",        "top_p",
                                       "top_k",      "k3_test_force_text", "k3_test_force_tokens",
                                       "speculative"};
    for (size_t k = 0; k < sizeof copy / sizeof *copy; k++)
        if (opt(req, copy[k])) json_object_set(chat, copy[k], opt(req, copy[k]));
    if (opt(req, "stop_sequences")) json_object_set(chat, "stop", opt(req, "stop_sequences"));
    json_t *tools = opt(req, "tools");
    if (tools) {
        json_t *ct = json_array();
        json_t *t;
        json_array_foreach(tools, i, t) {
            json_t *name = json_object_get(t, "name");
            const char *type = json_string_value(json_object_get(t, "type"));
            if (!json_is_string(name) || (type && strcmp(type, "custom"))) {
                json_decref(ct);
                json_decref(chat);
                bad(e, "tools",
                    "only client tools {name, description, input_schema} are supported.");
                return NULL;
            }
            json_t *fn = json_pack("{s:O}", "name", name);
            if (opt(t, "description")) json_object_set(fn, "description", opt(t, "description"));
            if (opt(t, "input_schema")) json_object_set(fn, "parameters", opt(t, "input_schema"));
            json_array_append_new(ct, json_pack("{s:s,s:o}", "type", "function", "function", fn));
        }
        json_object_set_new(chat, "tools", ct);
    }
    json_t *tc = opt(req, "tool_choice");
    if (tc) {
        const char *t = json_string_value(json_object_get(tc, "type"));
        if (t && !strcmp(t, "auto"))
            json_object_set_new(chat, "tool_choice", json_string("auto"));
        else if (t && !strcmp(t, "any"))
            json_object_set_new(chat, "tool_choice", json_string("required"));
        else if (t && !strcmp(t, "none"))
            json_object_set_new(chat, "tool_choice", json_string("none"));
        else if (t && !strcmp(t, "tool") && json_is_string(json_object_get(tc, "name")))
            json_object_set_new(chat, "tool_choice",
                                json_pack("{s:s,s:{s:O}}", "type", "function", "function", "name",
                                          json_object_get(tc, "name")));
        else {
            json_decref(chat);
            bad(e, "tool_choice", "tool_choice.type must be auto, any, tool (with name) or none.");
            return NULL;
        }
    }
    set_thinking(req, chat);
    set_output_format(req, chat);
    return chat;
fail:
    json_decref(msgs);
    return NULL;
}
