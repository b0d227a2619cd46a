/* xlate.c — chat-completions SSE chunks → semantic events (xlate.h). */
#include "serve/xlate.h"

#include <stdlib.h>
#include <string.h>

void serve_xlate_init(serve_xlate *x) {
    memset(x, 0, sizeof *x);
    x->calls = json_array();
}

void serve_xlate_free(serve_xlate *x) {
    k3_buf_free(&x->line);
    json_decref(x->calls);
    memset(x, 0, sizeof *x);
}

static void send_ready_calls(serve_xlate *x, const serve_xlate_ops *ops, void *ctx, k3_buf *out) {
    size_t i;
    json_t *c;
    json_array_foreach(x->calls, i, c) {
        if (json_is_true(json_object_get(c, "sent")) || !json_object_get(c, "args_seen")) continue;
        ops->tool_call(ctx, json_string_value(json_object_get(c, "id")),
                       json_string_value(json_object_get(c, "name")),
                       json_string_value(json_object_get(c, "arguments")), out);
        json_object_set_new(c, "sent", json_true());
    }
}

static void finish(serve_xlate *x, const serve_xlate_ops *ops, void *ctx, k3_buf *out) {
    if (x->ended) return;
    x->ended = 1;
    size_t i;
    json_t *c;
    json_array_foreach(x->calls, i, c) json_object_set_new(c, "args_seen", json_true());
    send_ready_calls(x, ops, ctx, out);
    ops->finish(ctx, x->failed ? "error" : x->finish[0] ? x->finish : "stop", &x->usage, out);
}

static void on_chunk(serve_xlate *x, const serve_xlate_ops *ops, void *ctx, json_t *d,
                     k3_buf *out) {
    json_t *err = json_object_get(d, "error");
    if (err) {
        x->failed = 1;
        ops->error(ctx, err, out);
        return;
    }
    json_t *u = json_object_get(d, "usage");
    if (json_is_object(u)) {
        x->usage.prompt_tokens = (int)json_integer_value(json_object_get(u, "prompt_tokens"));
        x->usage.completion_tokens =
            (int)json_integer_value(json_object_get(u, "completion_tokens"));
        x->usage.cached_tokens = (int)json_integer_value(
            json_object_get(json_object_get(u, "prompt_tokens_details"), "cached_tokens"));
    }
    json_t *ch = json_array_get(json_object_get(d, "choices"), 0);
    if (!ch) return;
    json_t *fr = json_object_get(ch, "finish_reason");
    if (json_is_string(fr)) snprintf(x->finish, sizeof x->finish, "%s", json_string_value(fr));
    json_t *delta = json_object_get(ch, "delta");
    json_t *r = json_object_get(delta, "reasoning_content");
    if (json_is_string(r) && json_string_length(r))
        ops->reasoning(ctx, json_string_value(r), json_string_length(r), out);
    json_t *t = json_object_get(delta, "content");
    if (json_is_string(t) && json_string_length(t))
        ops->content(ctx, json_string_value(t), json_string_length(t), out);
    size_t i;
    json_t *tc;
    json_array_foreach(json_object_get(delta, "tool_calls"), i, tc) {
        size_t idx = (size_t)json_integer_value(json_object_get(tc, "index"));
        if (idx > 1024) continue;
        while (json_array_size(x->calls) <= idx)
            json_array_append_new(
                x->calls, json_pack("{s:s,s:s,s:s}", "id", "", "name", "", "arguments", ""));
        json_t *c = json_array_get(x->calls, idx);
        json_t *id = json_object_get(tc, "id");
        if (json_is_string(id)) json_object_set(c, "id", id);
        json_t *fn = json_object_get(tc, "function");
        json_t *name = json_object_get(fn, "name");
        if (json_is_string(name)) json_object_set(c, "name", name);
        json_t *args = json_object_get(fn, "arguments");
        if (json_is_string(args) && !json_is_string(id)) { /* the arguments fragment */
            const char *old = json_string_value(json_object_get(c, "arguments"));
            size_t on = strlen(old), an = json_string_length(args);
            char *cat = malloc(on + an + 1);
            memcpy(cat, old, on);
            memcpy(cat + on, json_string_value(args), an + 1);
            json_object_set_new(c, "arguments", json_stringn(cat, on + an));
            json_object_set_new(c, "args_seen", json_true());
            free(cat);
        }
    }
    send_ready_calls(x, ops, ctx, out);
}

void serve_xlate_feed(serve_xlate *x, const serve_xlate_ops *ops, void *ctx, const char *b,
                      size_t n, int done, k3_buf *out) {
    if (n) k3_buf_put(&x->line, b, n);
    for (;;) {
        const char *s = x->line.s;
        size_t len = x->line.n;
        const char *end = s ? memmem(s, len, "\n\n", 2) : NULL;
        if (!end) break;
        size_t ev = (size_t)(end - s);
        /* one event: "data: {...}" (comments start with ':') */
        if (ev > 6 && !memcmp(s, "data: ", 6)) {
            if (ev - 6 == 6 && !memcmp(s + 6, "[DONE]", 6)) {
                finish(x, ops, ctx, out);
            } else {
                json_t *d = json_loadb(s + 6, ev - 6, 0, NULL);
                if (d) on_chunk(x, ops, ctx, d, out);
                json_decref(d);
            }
        }
        memmove(x->line.s, s + ev + 2, len - ev - 2);
        x->line.n = len - ev - 2;
    }
    if (done) finish(x, ops, ctx, out);
}
