/* test_serve_logprobs.c — logprob entries (serve/logprobs.h) against a
 * direct double-precision log_softmax, top-N order with ties, and the
 * /v1/completions legacy shape. */
#include <jansson.h>
#include <math.h>

#include "serve/logprobs.h"
#include "t.h"
#include "text/tokenizer.h"

TEST(entry_matches_log_softmax) {
    k3_tokenizer *tok = k3_tok_byte_level(512);
    CHECK(tok != NULL);
    enum { V = 512 };
    static float logits[V];
    t_seed(5);
    for (int i = 0; i < V; i++) logits[i] = (float)(3 * t_rand());
    logits[65] = 9.0f; /* 'A' is the best */
    logits[66] = 7.5f; /* 'B' and 'C' tie for second: lower id first */
    logits[67] = 7.5f;
    double mx = 9.0, sum = 0;
    for (int i = 0; i < V; i++) sum += exp((double)logits[i] - mx);
    double z = mx + log(sum);
    json_t *e = serve_logprob_entry(tok, logits, V, 67, 3);
    CHECK(!strcmp(json_string_value(json_object_get(e, "token")), "C"));
    CHECK_NEAR(json_real_value(json_object_get(e, "logprob")), 7.5 - z, 1e-12);
    json_t *top = json_object_get(e, "top_logprobs");
    CHECK(json_array_size(top) == 3);
    const char *want[] = {"A", "B", "C"};
    for (int k = 0; k < 3; k++) {
        json_t *t = json_array_get(top, k);
        CHECK(!strcmp(json_string_value(json_object_get(t, "token")), want[k]), "top %d", k);
    }
    CHECK_NEAR(json_real_value(json_object_get(json_array_get(top, 0), "logprob")), 9.0 - z, 1e-12);
    json_t *bytes = json_object_get(e, "bytes");
    CHECK(json_array_size(bytes) == 1 && json_integer_value(json_array_get(bytes, 0)) == 67);
    /* a lone UTF-8 lead byte: text is U+FFFD, bytes stay exact */
    json_t *e2 = serve_logprob_entry(tok, logits, V, 0xE4, 0);
    CHECK(!strcmp(json_string_value(json_object_get(e2, "token")), "\xEF\xBF\xBD"));
    CHECK(json_integer_value(json_array_get(json_object_get(e2, "bytes"), 0)) == 0xE4);
    CHECK(json_array_size(json_object_get(e2, "top_logprobs")) == 0);

    json_t *entries = json_pack("[O,O]", e, e2);
    long long off = 10;
    json_t *legacy = serve_logprobs_legacy(entries, &off);
    CHECK(off == 12);
    CHECK(json_integer_value(json_array_get(json_object_get(legacy, "text_offset"), 1)) == 11);
    CHECK(json_array_size(json_object_get(legacy, "tokens")) == 2);
    json_t *m = json_array_get(json_object_get(legacy, "top_logprobs"), 0);
    CHECK_NEAR(json_real_value(json_object_get(m, "B")), 7.5 - z, 1e-12);
    json_decref(legacy);
    json_decref(entries);
    json_decref(e);
    json_decref(e2);
    k3_tok_free(tok);
}

int main(void) {
    RUN(entry_matches_log_softmax);
    return t_done();
}
