/* fuzz_chat_request.c — libFuzzer target: arbitrary bytes as an OpenAI chat
 * request. Rendering must either fail with a message or succeed, and the
 * per-segment encoding must decode back to exactly the rendered prompt. */
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "text/chat.h"
#include "text/pyjson.h"
#include "text/tokenizer.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static k3_tokenizer *tok;
    static k3_xtml x;
    if (!tok) {
        tok = k3_tok_byte_level(K3_TOK_K3_VOCAB);
        if (!tok || k3_xtml_init(&x, tok)) abort();
    }
    json_t *req = k3_pyjson_loads((const char *)data, size, NULL);
    if (!req) return 0;
    k3_chat_input in;
    k3_chat_segs segs = {0};
    if (k3_chat_input_from_request(req, &in) || k3_chat_build(&x, &in, &segs)) {
        if (!*k3_errmsg()) abort(); /* a failure always says why */
    } else {
        size_t plen, dlen;
        char *prompt = k3_chat_segs_join(&segs, &plen);
        k3_ids ids = {0};
        if (k3_chat_segs_encode(tok, &segs, &ids)) abort();
        char *dec = k3_tok_decode_bytes(tok, ids.ids, ids.n, 0, &dlen);
        if (dlen != plen || memcmp(dec, prompt, plen)) abort();
        free(dec);
        free(prompt);
        k3_ids_free(&ids);
    }
    k3_clearerr();
    k3_chat_segs_free(&segs);
    json_decref(req);
    return 0;
}
