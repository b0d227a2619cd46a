/* openai.c — builds OpenAI chat/completion responses and SSE chunks (openai.h). */
#include "serve/openai.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/mem.h"
#include "serve/logprobs.h"

void serve_resp_init(serve_resp *r, serve_kind kind, const char *model, unsigned long long id_seq) {
    memset(r, 0, sizeof *r);
    r->kind = kind;
    r->created = (long long)time(NULL);
    snprintf(r->model, sizeof r->model, "%s", model ? model : "");
    snprintf(r->id, sizeof r->id, "%s-%llx%04llx", kind == SERVE_CHAT ? "chatcmpl" : "cmpl",
             (unsigned long long)r->created, id_seq);
    r->tool_calls = json_array();
}

void serve_resp_free(serve_resp *r) {
    free(r->content);
    free(r->reasoning);
    json_decref(r->tool_calls);
    json_decref(r->lp_all);
    json_decref(r->lp_pending);
    memset(r, 0, sizeof *r);
}

static void append(char **buf, size_t *len, size_t *cap, const char *s, size_t n) {
    if (*len + n + 1 > *cap) {
        size_t c = *cap ? *cap : 256;
        while (c < *len + n + 1) c *= 2;
        *buf = k3_xrealloc(*buf, c);
        *cap = c;
    }
    memcpy(*buf + *len, s, n);
    *len += n;
    (*buf)[*len] = 0;
}

/* The envelope every chunk/response shares. */
static json_t *envelope(const serve_resp *r, int chunk) {
    const char *obj = r->kind == SERVE_COMPLETION ? "text_completion"
                      : chunk                     ? "chat.completion.chunk"
                                                  : "chat.completion";
    return json_pack("{s:s,s:s,s:I,s:s}", "id", r->id, "object", obj, "created",
                     (json_int_t)r->created, "model", r->model);
}

/* "data: <compact json>\n\n"; steals doc. */
static char *sse(json_t *doc) {
    char *j = doc ? json_dumps(doc, JSON_COMPACT) : NULL;
    json_decref(doc);
    if (!j) j = serve_err_fallback_json(); /* never NULL into strlen */
    if (!j) j = k3_xstrdup("{}");
    size_t n = strlen(j);
    char *s = k3_xmalloc(n + 9);
    memcpy(s, "data: ", 6);
    memcpy(s + 6, j, n);
    memcpy(s + 6 + n, "\n\n", 3);
    free(j);
    return s;
}

void serve_resp_add_logprob(serve_resp *r, json_t *entry) {
    if (!r->lp_all && !r->streaming) r->lp_all = json_array();
    if (!r->lp_pending) r->lp_pending = json_array();
    if (!r->streaming) json_array_append(r->lp_all, entry);
    json_array_append_new(r->lp_pending, entry);
}

/* The choice's logprobs value for these entries (chat or legacy shape). */
static json_t *logprobs_value(const serve_resp *r, const json_t *entries, long long *offset) {
    if (!entries || !json_array_size(entries)) return json_null();
    if (r->kind == SERVE_COMPLETION) return serve_logprobs_legacy(entries, offset);
    return json_pack("{s:o}", "content", json_copy((json_t *)entries)); /* pending is cleared */
}

/* A chunk whose only choice carries `delta` (chat) or `text` (completions),
 * and the logprobs of the tokens generated since the previous chunk. */
static char *choice_chunk(serve_resp *r, json_t *delta, const char *finish) {
    json_t *ch = json_pack("{s:i}", "index", r->index);
    if (r->kind == SERVE_CHAT) {
        json_object_set_new(ch, "delta", delta);
    } else {
        json_t *t = json_object_get(delta, "content");
        json_object_set_new(ch, "text", t ? json_incref(t) : json_string(""));
        json_decref(delta);
    }
    json_object_set_new(ch, "logprobs", logprobs_value(r, r->lp_pending, &r->lp_offset));
    if (r->lp_pending) json_array_clear(r->lp_pending);
    json_object_set_new(ch, "finish_reason", finish ? json_string(finish) : json_null());
    json_t *doc = envelope(r, 1);
    json_object_set_new(doc, "choices", json_pack("[o]", ch));
    return sse(doc);
}

char *serve_resp_role_chunk(serve_resp *r) {
    return choice_chunk(r, json_pack("{s:s,s:s}", "role", "assistant", "content", ""), NULL);
}

char *serve_resp_text(serve_resp *r, const char *channel, const char *text, size_t len) {
    int reasoning = !strcmp(channel, "reasoning") && r->kind == SERVE_CHAT;
    if (reasoning)
        append(&r->reasoning, &r->reasoning_len, &r->reasoning_cap, text, len);
    else
        append(&r->content, &r->content_len, &r->content_cap, text, len);
    json_t *delta = json_object();
    if (reasoning) {
        json_object_set_new(delta, "reasoning_content", json_stringn(text, len));
        json_object_set_new(delta, "reasoning", json_stringn(text, len));
    } else {
        json_object_set_new(delta, "content", json_stringn(text, len));
    }
    return choice_chunk(r, delta, NULL);
}

char *serve_resp_tool_call(serve_resp *r, const char *name, const char *arguments) {
    size_t index = json_array_size(r->tool_calls);
    char id[64];
    if (r->index) /* the choices of one response share its id */
        snprintf(id, sizeof id, "call_%s_%d_%zu", r->id, r->index, index);
    else
        snprintf(id, sizeof id, "call_%s_%zu", r->id, index);
    json_array_append_new(r->tool_calls,
                          json_pack("{s:s,s:s,s:{s:s,s:s}}", "id", id, "type", "function",
                                    "function", "name", name, "arguments", arguments));
    /* OpenAI's streaming shape: a header delta (index, id, type, name, empty
     * arguments), then the arguments as a fragment of the same index. The
     * call is complete when it is sent (the parser needs its closing tag). */
    json_t *head = json_pack("{s:I,s:s,s:s,s:{s:s,s:s}}", "index", (json_int_t)index, "id", id,
                             "type", "function", "function", "name", name, "arguments", "");
    char *a = choice_chunk(r, json_pack("{s:[o]}", "tool_calls", head), NULL);
    json_t *frag =
        json_pack("{s:I,s:{s:s}}", "index", (json_int_t)index, "function", "arguments", arguments);
    char *b = choice_chunk(r, json_pack("{s:[o]}", "tool_calls", frag), NULL);
    size_t na = strlen(a), nb = strlen(b);
    char *both = k3_xmalloc(na + nb + 1);
    memcpy(both, a, na);
    memcpy(both + na, b, nb + 1);
    free(a);
    free(b);
    return both;
}

char *serve_resp_finish_chunk(serve_resp *r, const char *finish_reason) {
    return choice_chunk(r, json_object(), finish_reason);
}

json_t *serve_usage_json(const serve_usage *u) {
    return json_pack("{s:i,s:i,s:i,s:{s:i}}", "prompt_tokens", u->prompt_tokens,
                     "completion_tokens", u->completion_tokens, "total_tokens",
                     u->prompt_tokens + u->completion_tokens, "prompt_tokens_details",
                     "cached_tokens", u->cached_tokens);
}

char *serve_resp_usage_chunk(serve_resp *r, const serve_usage *u) {
    json_t *doc = envelope(r, 1);
    json_object_set_new(doc, "choices", json_array());
    json_object_set_new(doc, "usage", serve_usage_json(u));
    return sse(doc);
}

static json_t *chat_message(const serve_resp *r) {
    json_t *m = json_pack("{s:s}", "role", "assistant");
    int tools = json_array_size(r->tool_calls) > 0;
    /* content is null for a tool-only answer (vLLM/SGLang), else a string */
    json_object_set_new(m, "content",
                        r->content_len || !tools
                            ? json_stringn(r->content ? r->content : "", r->content_len)
                            : json_null());
    if (r->reasoning_len) {
        json_object_set_new(m, "reasoning_content", json_stringn(r->reasoning, r->reasoning_len));
        json_object_set_new(m, "reasoning", json_stringn(r->reasoning, r->reasoning_len));
    }
    if (tools) json_object_set(m, "tool_calls", r->tool_calls);
    return m;
}

json_t *serve_resp_choice(serve_resp *r, const char *finish_reason) {
    json_t *ch = json_pack("{s:i}", "index", r->index);
    if (r->kind == SERVE_CHAT)
        json_object_set_new(ch, "message", chat_message(r));
    else
        json_object_set_new(ch, "text", json_stringn(r->content ? r->content : "", r->content_len));
    long long offset = 0;
    json_object_set_new(ch, "logprobs", logprobs_value(r, r->lp_all, &offset));
    json_object_set_new(ch, "finish_reason", json_string(finish_reason));
    return ch;
}

char *serve_resp_full_n(serve_resp *const *rs, const char *const *finish, int n,
                        const serve_usage *u) {
    json_t *choices = json_array();
    for (int i = 0; i < n; i++) json_array_append_new(choices, serve_resp_choice(rs[i], finish[i]));
    json_t *doc = envelope(rs[0], 0);
    json_object_set_new(doc, "choices", choices);
    json_object_set_new(doc, "usage", serve_usage_json(u));
    char *s = doc ? json_dumps(doc, JSON_COMPACT) : NULL;
    json_decref(doc);
    return s ? s : serve_err_fallback_json();
}

char *serve_resp_full(serve_resp *r, const char *finish_reason, const serve_usage *u) {
    return serve_resp_full_n(&r, &finish_reason, 1, u);
}
