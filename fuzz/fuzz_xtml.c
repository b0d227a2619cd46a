/* fuzz_xtml.c — libFuzzer target for the XTML tool-call round trip. Input:
 * "NAME\nARGUMENTS". An assistant tool call with that name and that raw
 * arguments string is rendered (attribute escaping, the one-level argument
 * parser, the json-block fallback), then the rendered tools section is
 * parsed back: the name must survive escaping exactly, and typed arguments
 * must give exactly one call. The prompt goes to the parser in token form
 * (text/xtml.h), built from the segments as generation would produce it:
 * control segments are control tokens, text segments stay text, so a name
 * that contains marker spellings must also come back exactly. */
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
    k3_chat_input in;
    k3_chat_segs segs = {0};
    if (k3_chat_input_from_request(req, &in) || k3_chat_build(&x, &in, &segs))
        abort(); /* a string-arguments call always renders */
    k3_buf tf = {0};
    for (size_t i = 0; i < segs.n; i++) {
        int ctrl = -1;
        for (int c = 0; c < K3_XC_COUNT && segs.v[i].control; c++)
            if (segs.v[i].len == x.ctrl_len[c] && !memcmp(segs.v[i].text, x.ctrl[c], x.ctrl_len[c]))
                ctrl = c;
        if (ctrl >= 0)
            k3_buf_putc(&tf, (char)K3_XTML_CTRL_BYTE(ctrl));
        else
            k3_xtml_put_text(&tf, segs.v[i].text, segs.v[i].len);
    }
    k3_chat_segs_free(&segs);
    const char *prompt = tf.s ? tf.s : "";
    size_t plen = tf.n;
    int plain = name_len > 0 && !memchr(s, 0, size);
    k3_xtml t;
    k3_xtml_token_form(&x, &t);
    char jb[K3_XTML_MARKER_MAX];
    size_t jl = k3_xtml_open_prefix(&t, K3_XT_JSON, jb);
    if (plain && !memmem(prompt, plen, jb, jl)) {
        k3_tool_calls calls = {0};
        if (k3_toolcall_parse(&x, prompt, plen, &calls) != 1) abort();
        if (strlen(calls.v[0].name) != name_len || memcmp(calls.v[0].name, s, name_len)) abort();
        k3_tool_calls_free(&calls);
    }
    k3_buf_free(&tf);
    json_decref(req);
    return 0;
}
