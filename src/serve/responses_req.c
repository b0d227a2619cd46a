/* responses_req.c — the Responses API request side (serve/apis.h): a
 * Responses request →
 * chat request (instructions → system, input items → messages,
 * function_call / function_call_output → tool calls and tool messages,
 * item_reference → the stored item, reasoning.effort → thinking +
 * reasoning_effort, text.format → response_format, max_output_tokens →
 * max_tokens, function tools → chat tools). Pure: fuzzed by
 * fuzz/fuzz_api_request.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/mem.h"
#include "base/buf.h"
#include "serve/apis.h"
#include "text/chat.h"

/* ---------------- request translation ---------------- */

static json_t *opt(const json_t *o, const char *k) {
    json_t *v = json_object_get(o, k);
    return v && !json_is_null(v) ? v : NULL;
}

static int bad(serve_err *e, const char *param, const char *msg) {
    return serve_err_set(e, 400, NULL, param, "invalid_value", "%s", msg);
}

/* A message's content: a string, or input_text / output_text parts, which
 * the chat template renders back to back: kept as one string, so a request
 * of many parts costs the store (and the chat parser) its text only. */
static json_t *content_text(const json_t *c, const char *param, serve_err *e) {
    if (json_is_string(c)) return json_incref((json_t *)c);
    if (!json_is_array(c)) {
        bad(e, param, "content must be a string or an array of text parts.");
        return NULL;
    }
    k3_buf text = {0};
    size_t i;
    json_t *p;
    json_array_foreach(c, i, p) {
        const char *t = json_string_value(json_object_get(p, "type"));
        json_t *tx = json_object_get(p, "text");
        if (!t || (strcmp(t, "input_text") && strcmp(t, "output_text") && strcmp(t, "text")) ||
            !json_is_string(tx)) {
            k3_buf_free(&text);
            serve_err_set(e, 400, NULL, param, "invalid_value",
                          "Content part type '%s' is not supported (input_text / output_text "
                          "only).",
                          t ? t : "?");
            return NULL;
        }
        k3_buf_put(&text, json_string_value(tx), json_string_length(tx));
    }
    json_t *out = json_stringn(text.s ? text.s : "", text.n);
    k3_buf_free(&text);
    return out;
}

/* The stored (listed) form of an input message: its text as one part. */
static json_t *stored_message(const char *role, const json_t *text) {
    return json_pack("{s:s,s:s,s:s,s:[{s:s,s:O}]}", "type", "message", "role", role, "status",
                     "completed", "content", "type",
                     strcmp(role, "assistant") ? "input_text" : "output_text", "text", text);
}

/* The last message if it is an assistant message without content yet. */
static json_t *open_assistant(json_t *msgs) {
    json_t *m = json_array_get(msgs, json_array_size(msgs) - 1);
    return m && !strcmp(json_string_value(json_object_get(m, "role")), "assistant") ? m : NULL;
}

static int input_item(json_t *msgs, const json_t *it, const char *type, const char *p,
                      json_t **reasoning_p, json_t *stored, serve_err *e);

static int input_items(json_t *msgs, const json_t *input, const serve_rscope *rs, json_t *stored,
                       serve_err *e) {
    if (json_is_string(input)) {
        json_array_append_new(msgs, json_pack("{s:s,s:O}", "role", "user", "content", input));
        if (stored) json_array_append_new(stored, stored_message("user", input));
        return 0;
    }
    if (!json_is_array(input))
        return bad(e, "input", "'input' must be a string or an array of items.");
    json_t *reasoning = NULL; /* owned: a copy of the text, U+0000 and all */
    size_t i;
    json_t *it;
    json_array_foreach(input, i, it) {
        char p[64];
        snprintf(p, sizeof p, "input[%zu]", i);
        if (!json_is_object(it)) {
            json_decref(reasoning);
            return bad(e, p, "Each input item must be an object.");
        }
        const char *type = json_string_value(json_object_get(it, "type"));
        json_t *ref = NULL; /* an item_reference resolved from the store */
        if (type && !strcmp(type, "item_reference")) {
            const char *rid = json_string_value(json_object_get(it, "id"));
            ref = rid && rs && rs->store ? serve_rstore_item(rs->store, rs->key, rs->key_len, rid)
                                         : NULL;
            if (!ref) json_decref(reasoning);
            if (!ref)
                return serve_err_set(e, 400, NULL, p, "item_not_found",
                                     "Item with id '%.64s' not found.", rid ? rid : "?");
            it = ref;
            type = json_string_value(json_object_get(it, "type"));
            if (stored) json_array_append(stored, ref); /* listed as it was stored */
        }
        int rc = input_item(msgs, it, type, p, &reasoning, ref ? NULL : stored, e);
        json_decref(ref);
        if (rc) {
            json_decref(reasoning);
            return -1;
        }
    }
    json_decref(reasoning);
    return 0;
}

/* One input item → chat messages; its stored form is appended to stored
 * (when not NULL). */
static int input_item(json_t *msgs, const json_t *it, const char *type, const char *p,
                      json_t **reasoning_p, json_t *stored, serve_err *e) {
    json_t *reasoning = *reasoning_p;
    {
        if (!type || !strcmp(type, "message")) {
            const char *role = json_string_value(json_object_get(it, "role"));
            if (!role || (strcmp(role, "user") && strcmp(role, "assistant") &&
                          strcmp(role, "system") && strcmp(role, "developer")))
                return bad(e, p,
                           "A message item needs a role: user, assistant, system or developer.");
            json_t *c = content_text(json_object_get(it, "content"), p, e);
            if (!c) return -1;
            if (stored) json_array_append_new(stored, stored_message(role, c));
            json_t *m = json_pack("{s:s,s:o}", "role", !strcmp(role, "developer") ? "system" : role,
                                  "content", c);
            if (!strcmp(role, "assistant") && reasoning) {
                json_object_set_new(m, "reasoning_content", reasoning);
                reasoning = NULL;
            }
            json_array_append_new(msgs, m);
        } else if (!strcmp(type, "function_call")) {
            json_t *name = json_object_get(it, "name"), *args = json_object_get(it, "arguments");
            json_t *cid = json_object_get(it, "call_id");
            if (!json_is_string(name) || !json_is_string(args) || !json_is_string(cid))
                return bad(e, p, "A function_call item needs string name, arguments and call_id.");
            json_t *m = open_assistant(msgs);
            if (!m || json_object_get(m, "tool_calls") == NULL) {
                if (!m || json_string_length(json_object_get(m, "content")) ||
                    json_is_array(json_object_get(m, "content"))) {
                    m = json_pack("{s:s,s:s}", "role", "assistant", "content", "");
                    json_array_append_new(msgs, m);
                }
                json_object_set_new(m, "tool_calls", json_array());
                if (reasoning) json_object_set_new(m, "reasoning_content", reasoning);
                reasoning = NULL;
            }
            if (stored)
                json_array_append_new(stored,
                                      json_pack("{s:s,s:s,s:O,s:O,s:O}", "type", "function_call",
                                                "status", "completed", "call_id", cid, "name", name,
                                                "arguments", args));
            json_array_append_new(json_object_get(m, "tool_calls"),
                                  json_pack("{s:O,s:s,s:{s:O,s:O}}", "id", cid, "type", "function",
                                            "function", "name", name, "arguments", args));
        } else if (!strcmp(type, "function_call_output")) {
            json_t *cid = json_object_get(it, "call_id");
            if (!json_is_string(cid))
                return bad(e, p, "A function_call_output item needs a call_id.");
            json_t *out = json_object_get(it, "output");
            json_t *c = json_is_string(out) ? json_incref(out) : content_text(out, p, e);
            if (!c) return -1;
            if (stored)
                json_array_append_new(stored, json_pack("{s:s,s:s,s:O,s:O}", "type",
                                                        "function_call_output", "status",
                                                        "completed", "call_id", cid, "output", c));
            json_array_append_new(msgs, json_pack("{s:s,s:O,s:o}", "role", "tool", "tool_call_id",
                                                  cid, "content", c));
        } else if (!strcmp(type, "reasoning")) {
            /* summary (or content) text goes back as the next assistant turn's reasoning */
            json_t *parts = opt(it, "summary") ? opt(it, "summary") : opt(it, "content");
            json_t *first = json_array_get(parts, 0);
            json_t *rt = json_object_get(first, "text");
            json_decref(reasoning); /* a copy: the item may be a resolved reference */
            reasoning = json_is_string(rt)
                            ? json_stringn(json_string_value(rt), json_string_length(rt))
                            : NULL;
            if (stored)
                json_array_append_new(
                    stored, json_pack("{s:s,s:[{s:s,s:o}]}", "type", "reasoning", "summary", "type",
                                      "summary_text", "text",
                                      reasoning ? json_incref(reasoning) : json_string("")));
        } else {
            serve_err_set(e, 400, NULL, p, "unsupported_value",
                          "Input item type '%s' is not supported (message, function_call, "
                          "function_call_output, reasoning, item_reference).",
                          type);
            return -1;
        }
    }
    *reasoning_p = reasoning;
    return 0;
}

/* reasoning.effort → the chat request's reasoning_effort (the one mapping
 * of every route, text/chat.h: "none" turns thinking off). */
static int reasoning_effort(json_t *chat, const json_t *rs, serve_err *e) {
    json_t *eff = rs ? opt(rs, "effort") : NULL;
    if (!eff) return 0;
    const char *effort = NULL;
    if (!json_is_string(eff) || k3_chat_effort_map(json_string_value(eff), &effort) < 0)
        return bad(e, "reasoning.effort", "'reasoning.effort' must be " K3_CHAT_EFFORT_VALUES ".");
    json_object_set(chat, "reasoning_effort", eff);
    return 0;
}

/* Responses request → chat request (new reference), or NULL + e. */
json_t *serve_responses_to_chat(const json_t *req, json_t *history, const serve_rscope *rs,
                                json_t *stored, serve_err *e) {
    json_t *msgs = history ? history : json_array();
    json_t *instr = opt(req, "instructions");
    if (instr && !json_is_string(instr)) {
        json_decref(msgs);
        bad(e, "instructions", "'instructions' must be a string.");
        return NULL;
    }
    if (instr) /* instructions apply to this turn only: they lead the messages */
        json_array_insert_new(msgs, 0, json_pack("{s:s,s:O}", "role", "system", "content", instr));
    json_t *input = opt(req, "input");
    if (!input) {
        json_decref(msgs);
        serve_err_set(e, 400, NULL, "input", "missing_required_parameter",
                      "Missing required parameter: 'input'.");
        return NULL;
    }
    if (input_items(msgs, input, rs, stored, e)) {
        json_decref(msgs);
        return NULL;
    }
    json_t *chat = json_pack("{s:o}", "messages", msgs);
    static const char *const copy[] = {"model",
                                       "temperature",
                                       "top_p",
                                       "seed",
                                       "top_k",
                                       "cache_salt",
                                       "speculative",
                                       "k3_test_force_text",
                                       "k3_test_force_tokens"};
    for (size_t i = 0; i < sizeof copy / sizeof *copy; i++)
        if (opt(req, copy[i])) json_object_set(chat, copy[i], opt(req, copy[i]));
    if (opt(req, "max_output_tokens"))
        json_object_set(chat, "max_tokens", opt(req, "max_output_tokens"));
    json_t *tools = opt(req, "tools");
    if (tools) {
        if (!json_is_array(tools)) goto bad_tools;
        json_t *ct = json_array();
        size_t i;
        json_t *t;
        json_array_foreach(tools, i, t) {
            const char *type = json_string_value(json_object_get(t, "type"));
            if (!type || strcmp(type, "function") || !json_is_string(json_object_get(t, "name"))) {
                json_decref(ct);
                goto bad_tools;
            }
            json_t *fn = json_pack("{s:O}", "name", json_object_get(t, "name"));
            if (opt(t, "description")) json_object_set(fn, "description", opt(t, "description"));
            if (opt(t, "parameters")) json_object_set(fn, "parameters", opt(t, "parameters"));
            json_array_append_new(ct, json_pack("{s:s,s:o}", "type", "function", "function", fn));
        }
        json_object_set_new(chat, "tools", ct);
    }
    json_t *tc = opt(req, "tool_choice");
    if (tc && json_is_object(tc)) {
        json_t *name = json_object_get(tc, "name");
        if (!json_is_string(name)) {
            json_decref(chat);
            bad(e, "tool_choice",
                "'tool_choice' must be auto, none, required or "
                "{\"type\":\"function\",\"name\":...}.");
            return NULL;
        }
        json_object_set_new(
            chat, "tool_choice",
            json_pack("{s:s,s:{s:O}}", "type", "function", "function", "name", name));
    } else if (tc) {
        json_object_set(chat, "tool_choice", tc);
    }
    if (reasoning_effort(chat, opt(req, "reasoning"), e)) {
        json_decref(chat);
        return NULL;
    }
    json_t *fmt = opt(opt(req, "text"), "format");
    if (fmt) {
        const char *t = json_string_value(json_object_get(fmt, "type"));
        if (t && !strcmp(t, "json_schema"))
            json_object_set_new(chat, "response_format",
                                json_pack("{s:s,s:{s:O,s:O}}", "type", "json_schema", "json_schema",
                                          "name", opt(fmt, "name") ? opt(fmt, "name") : json_null(),
                                          "schema",
                                          opt(fmt, "schema") ? opt(fmt, "schema") : json_null()));
        else if (t && !strcmp(t, "json_object"))
            json_object_set_new(chat, "response_format", json_pack("{s:s}", "type", "json_object"));
        else if (!t || strcmp(t, "text")) {
            json_decref(chat);
            bad(e, "text.format", "'text.format.type' must be text, json_object or json_schema.");
            return NULL;
        }
    }
    return chat;
bad_tools:
    json_decref(chat);
    serve_err_set(e, 400, NULL, "tools", "unsupported_value",
                  "Only function tools ({\"type\":\"function\",\"name\":...}) are supported.");
    return NULL;
}
