/* fuzz_tokenizer.c — libFuzzer target for the tokenizer: the tiktoken.model
 * and tokenizer_config.json parsers, encoding, decoding and the streaming
 * detokenizer.
 *
 * First input byte picks the mode:
 *   0: ranks file = the rest (no config)
 *   1: ranks file and config JSON = the rest split at the first "\n\n\n"
 *   2+: text encoded by a fixed learned vocabulary; decode must give the
 *       bytes back and the streaming decoder must equal k3_utf8_sanitize
 * Every tokenizer that loads is also used to encode and decode. */
#include "../tests/tok/learn_bpe.h"
#include "text/tokenizer.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static const char CORPUS[] = "The tokenizer merges byte pairs by rank. the the the and and of "
                             "你好世界 中文 こんにちは 🚀🚀 naïve café 1234567890 \n\n    x = y;\n"
                             "<|open|>message<|sep|> I'm we'll they're DON'T";

static k3_tokenizer *fixed_tokenizer(void) {
    static k3_tokenizer *t;
    if (!t) {
        lb_vocab v;
        lb_learn(&v, CORPUS, sizeof CORPUS - 1, 200);
        size_t n;
        char *ranks = lb_ranks_text(&v, &n);
        t = k3_tok_from_memory(ranks, n, NULL, 0, "fuzz-vocab");
        free(ranks);
        lb_free(&v);
        if (!t) abort();
    }
    return t;
}

/* Encode, decode, stream: the invariants every tokenizer must keep. */
static void exercise(const k3_tokenizer *t, const char *s, size_t n) {
    for (int allow = 0; allow < 2; allow++) {
        int32_t *ids;
        size_t nid, dn;
        if (k3_tok_encode(t, s, n, allow, &ids, &nid)) abort(); /* encoding cannot fail */
        char *back = k3_tok_decode_bytes(t, ids, nid, 0, &dn);
        if (dn != n || memcmp(back, s, n)) abort();
        size_t want_len;
        char *want = k3_tok_decode(t, ids, nid, 0, &want_len);
        k3_detok *d = k3_detok_new(t, 0);
        char *got = malloc(want_len + 4);
        size_t gn = 0, len;
        for (size_t i = 0; i < nid; i++) {
            const char *out = k3_detok_push(d, ids[i], &len);
            if (gn + len > want_len) abort();
            memcpy(got + gn, out, len), gn += len;
        }
        const char *out = k3_detok_flush(d, &len);
        if (gn + len != want_len) abort();
        memcpy(got + gn, out, len), gn += len;
        if (memcmp(got, want, want_len)) abort();
        free(got);
        free(want);
        k3_detok_free(d);
        free(back);
        free(ids);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    const char *rest = (const char *)data + 1;
    size_t n = size - 1;
    if (data[0] >= 2) {
        exercise(fixed_tokenizer(), rest, n);
        return 0;
    }
    const char *config = NULL;
    size_t ranks_len = n, config_len = 0;
    if (data[0] == 1) {
        const char *sep = memmem(rest, n, "\n\n\n", 3);
        if (sep) {
            ranks_len = (size_t)(sep - rest);
            config = sep + 3;
            config_len = n - ranks_len - 3;
        }
    }
    k3_tokenizer *t = k3_tok_from_memory(rest, ranks_len, config, config_len, "fuzz");
    if (t) {
        exercise(t, rest, n);
        k3_tok_free(t);
    }
    return 0;
}
