/* fuzz_xtml.c — libFuzzer target for the XTML tool-call round trip. Input:
 * "NAME\nARGUMENTS". An assistant tool call with that name and that raw
 * arguments string is rendered (attribute escaping, the one-level argument
 * parser, the json-block fallback), then the rendered tools section is
 * parsed back: the name must survive escaping exactly, and typed arguments
 * must give exactly one call. Inputs with marker text are only rendered. */
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "text/chat.h"
#include "text/toolcall.h"

static json_t *make_request(const char *name, size_t nl, const char *args, size_t al) {
    json_t *fn = json_pack("{s:s%, s:s%}", "name", name, nl, "arguments", args, al);
    if (!fn) return NULL; /* not valid UTF-8 */
    return json_pack("{s:{s:b}, s:b, s:[{s:s, s:[{s:o}]}]}", "chat_template_kwargs", "thinking", 0,
                     "add_generation_prompt", 0, "messages", "role", "assistant", "tool_calls",
                     "function", fn);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static k3_xtml x;
    static int ready;
    if (!ready) ready = !k3_xtml_init(&x, NULL);
    const char *s = (const char *)data;
    const char *nl = memchr(s, '\n', size);
    if (!nl) return 0;
    size_t name_len = (size_t)(nl - s), args_len = size - name_len - 1;
    json_t *req = make_request(s, name_len, nl + 1, args_len);
    if (!req) return 0;
    size_t plen;
    char *prompt = k3_chat_render(&x, req, &plen);
    if (!prompt) abort(); /* a string-arguments call always renders */
    int plain = name_len > 0 && !memchr(s, 0, size) && !memmem(s, size, "<|", 2);
    char jb[K3_XTML_MARKER_MAX];
    size_t jl = k3_xtml_open_prefix(&x, K3_XT_JSON, jb);
    if (plain && !memmem(prompt, plen, jb, jl)) {
        k3_tool_calls calls = {0};
        if (k3_toolcall_parse(&x, prompt, plen, &calls) != 1) abort();
        if (strlen(calls.v[0].name) != name_len || memcmp(calls.v[0].name, s, name_len)) abort();
        k3_tool_calls_free(&calls);
    }
    free(prompt);
    json_decref(req);
    return 0;
}
