/* logprobs.c — log_softmax entries for the logprobs API fields (logprobs.h). */
#include "serve/logprobs.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/mem.h"

/* {token, logprob, bytes} for one id. The token text is its bytes with
 * invalid UTF-8 replaced (a token may hold part of a character); `bytes`
 * keeps the exact bytes, as OpenAI does. */
static json_t *token_obj(const k3_tokenizer *tok, int32_t id, double lp) {
    size_t n = 0;
    const char *b = k3_tok_token_bytes(tok, id, &n);
    size_t tl = 0;
    char *text = k3_utf8_sanitize(b ? b : "", b ? n : 0, &tl);
    json_t *bytes = json_array();
    for (size_t i = 0; i < n; i++) json_array_append_new(bytes, json_integer((unsigned char)b[i]));
    json_t *o = json_pack("{s:s%,s:f,s:o}", "token", text, tl, "logprob", lp, "bytes", bytes);
    free(text);
    return o;
}

/* log of the softmax normaliser, in double. */
static double log_norm(const float *logits, int vocab) {
    double mx = -INFINITY;
    for (int i = 0; i < vocab; i++)
        if (logits[i] > mx) mx = logits[i];
    double sum = 0;
    for (int i = 0; i < vocab; i++) sum += exp((double)logits[i] - mx);
    return mx + log(sum);
}

/* Indices of the top_n logits, best first (ties: lower id first). */
static int top_ids(const float *l, int vocab, int top_n, int32_t *out) {
    int n = 0;
    for (int i = 0; i < vocab; i++) {
        if (n == top_n && !(l[i] > l[out[n - 1]])) continue; /* not better than the worst kept */
        int k = n < top_n ? n++ : n - 1;                     /* append, or replace the worst */
        while (k > 0 && l[i] > l[out[k - 1]]) {
            out[k] = out[k - 1];
            k--;
        }
        out[k] = i;
    }
    return n;
}

json_t *serve_logprob_entry(const k3_tokenizer *tok, const float *logits, int vocab, int32_t id,
                            int top_n) {
    double z = log_norm(logits, vocab);
    double lp = id >= 0 && id < vocab ? (double)logits[id] - z : -INFINITY;
    json_t *e = token_obj(tok, id, isfinite(lp) ? lp : -9999.0);
    json_t *top = json_array();
    int32_t ids[20];
    if (top_n > 20) top_n = 20;
    int n = top_n > 0 ? top_ids(logits, vocab, top_n, ids) : 0;
    for (int i = 0; i < n; i++)
        json_array_append_new(top, token_obj(tok, ids[i], (double)logits[ids[i]] - z));
    json_object_set_new(e, "top_logprobs", top);
    return e;
}

json_t *serve_logprobs_legacy(const json_t *entries, long long *offset) {
    json_t *tokens = json_array(), *lps = json_array(), *tops = json_array(), *offs = json_array();
    size_t i;
    json_t *e;
    json_array_foreach(entries, i, e) {
        json_array_append(tokens, json_object_get(e, "token"));
        json_array_append(lps, json_object_get(e, "logprob"));
        json_t *m = json_object();
        size_t k;
        json_t *t;
        json_array_foreach(json_object_get(e, "top_logprobs"), k, t) json_object_set(
            m, json_string_value(json_object_get(t, "token")), json_object_get(t, "logprob"));
        json_array_append_new(tops, m);
        json_array_append_new(offs, json_integer(*offset));
        *offset += (long long)json_array_size(json_object_get(e, "bytes"));
    }
    return json_pack("{s:o,s:o,s:o,s:o}", "tokens", tokens, "token_logprobs", lps, "top_logprobs",
                     tops, "text_offset", offs);
}
