/* detok.c — the streaming detokenizer (tokenizer.h), on the UTF-8 repair of
 * utf8.c.
 *
 * Generated tokens can end inside a multi-byte character (byte-level BPE
 * splits emoji and CJK), so the streaming decoder keeps the bytes of an
 * incomplete trailing sequence until the next token completes or breaks
 * it. Whatever the chunking, the concatenated output equals
 * k3_utf8_sanitize() of all bytes (chat.md §1.7). */
#include "base/mem.h"
#include "text/tokenizer.h"
#include "text/utf8.h"

#include <stdlib.h>
#include <string.h>

struct k3_detok {
    const k3_tokenizer *tok;
    int skip_special;
    uint8_t pending[4]; /* an incomplete sequence is at most 3 bytes */
    size_t npending;
    char *out; /* the text returned by the last call */
    size_t out_cap;
    uint8_t *in; /* pending ++ new bytes */
    size_t in_cap;
};

k3_detok *k3_detok_new(const k3_tokenizer *tok, int skip_special) {
    k3_detok *d = k3_xcalloc(1, sizeof *d);
    d->tok = tok;
    d->skip_special = skip_special;
    return d;
}

void k3_detok_free(k3_detok *d) {
    if (!d) return;
    free(d->out);
    free(d->in);
    free(d);
}

static void ensure_out(k3_detok *d, size_t cap) {
    if (cap <= d->out_cap) return;
    d->out = k3_xrealloc(d->out, cap);
    d->out_cap = cap;
}

const char *k3_detok_push_bytes(k3_detok *d, const char *bytes, size_t n, size_t *len) {
    /* Work on pending ++ bytes; a held tail goes back into pending. */
    size_t total = d->npending + n;
    if (total > d->in_cap) {
        d->in_cap = total * 2;
        d->in = k3_xrealloc(d->in, d->in_cap);
    }
    if (d->npending) memcpy(d->in, d->pending, d->npending);
    if (n) memcpy(d->in + d->npending, bytes, n);
    ensure_out(d, k3_utf8_repair_cap(total));
    size_t held;
    size_t w = k3_utf8_repair(d->out, d->in, total, 1, &held);
    if (held) memcpy(d->pending, d->in + total - held, held); /* d->in is NULL until used */
    d->npending = held;
    d->out[w] = 0;
    *len = w;
    return d->out;
}

const char *k3_detok_push(k3_detok *d, int32_t id, size_t *len) {
    size_t n = 0;
    const char *b = NULL;
    if (!(d->skip_special && k3_tok_special_flag(d->tok, id)))
        b = k3_tok_token_bytes(d->tok, id, &n);
    return k3_detok_push_bytes(d, b, b ? n : 0, len);
}

const char *k3_detok_flush(k3_detok *d, size_t *len) {
    ensure_out(d, k3_utf8_repair_cap(d->npending));
    size_t held;
    size_t w = k3_utf8_repair(d->out, d->pending, d->npending, 0, &held);
    d->npending = 0;
    d->out[w] = 0;
    *len = w;
    return d->out;
}
