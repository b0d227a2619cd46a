/* test_gen_constrain.c — token-level constrained decoding (gen/constrain.h)
 * on a synthetic tokenizer of K3's size (163,840 ids, multi-byte ranks):
 *   - the trie mask equals a brute-force check of every token's bytes;
 *   - random constrained generations (uniform random logits, sampled from
 *     the mask, closed within the budget) always decode to JSON that
 *     jansson parses, with the schema's keys;
 *   - prints the mask cost per token (not asserted: machines vary). */
#include <jansson.h>
#include <stdint.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "gen/constrain.h"
#include "gen/synth.h"
#include "t.h"
#include "text/jsonschema.h"
#include "text/tokenizer.h"

/* The sanitizer build (ASan + UBSan, ~10x slower) runs the same checks on
 * fewer samples: every 6th prefix and a sparser stride through the middle of
 * the vocabulary for the brute force, one generation per budget instead of 4. */
#ifdef __SANITIZE_ADDRESS__
enum { BRUTE_EVERY = 6, MID_STRIDE = 4 * 38, REPS = 1 };
#else
enum { BRUTE_EVERY = 3, MID_STRIDE = 38, REPS = 4 };
#endif

static k3_tokenizer *tok;
static k3_vtrie *trie;
static int32_t ctl[4];
static int vocab = K3_TOK_K3_VOCAB;

static const char *SCHEMA =
    "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\"},\"age\":{\"type\":"
    "\"integer\"},\"tags\":{\"type\":\"array\",\"items\":{\"type\":\"string\",\"maxLength\":8},"
    "\"maxItems\":4},\"kind\":{\"enum\":[\"cat\",\"dog\"]}},\"required\":[\"name\",\"age\","
    "\"tags\",\"kind\"]}";

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* JSON value then <|end_of_msg|>, as the server wraps content. */
static k3_constraint *make(void) {
    k3_gram *g = k3_gram_new();
    json_t *s = json_loads(SCHEMA, 0, NULL);
    char err[256];
    k3_gnode *v = k3_schema_compile(g, s, err, sizeof err, NULL);
    json_decref(s);
    k3_gnode *kids[2] = {v, k3_g_lit_ctl(g, "{E}")};
    return k3_constraint_new(trie, g, k3_g_seq(g, kids, 2));
}

static uint64_t rs = 0x9E3779B97F4A7C15ull;
static uint64_t rnd(void) {
    rs ^= rs << 13;
    rs ^= rs >> 7;
    rs ^= rs << 17;
    return rs;
}

TEST(constrain_mask_matches_brute_force) {
    /* walk a few steps along a fixed valid text, comparing masks */
    const char *text =
        "{\"name\": \"Ann \\\"Lee\\\"\", \"age\": 42, \"tags\": [\"x\"], \"kind\": \"dog\"}";
    k3_constraint *c = make();
    float *logits = malloc(sizeof(float) * (size_t)vocab);
    int32_t *ids;
    size_t n;
    k3_tok_encode(tok, text, strlen(text), 0, &ids, &n);
    int mismatches = 0;
    for (size_t step = 0; step <= n; step++) {
        for (int i = 0; i < vocab; i++) logits[i] = 0;
        k3_constraint_mask(c, logits, 1 << 20);
        if (step % BRUTE_EVERY == 0) {
            /* brute force: copy the grammar state through a fresh constraint
             * fed the same prefix, then try each token's bytes */
            for (int32_t id = 0; id < vocab; id += 1) {
                k3_constraint *b = make();
                int ok = 1;
                for (size_t k = 0; k < step && ok; k++) ok = k3_constraint_accept(b, ids[k]) == 0;
                ok = ok && k3_constraint_accept(b, id) == 0;
                k3_constraint_free(b);
                if (ok != (logits[id] == 0) && mismatches++ < 5)
                    printf("  step %zu id %d: brute %d mask %d\n", step, id, ok, logits[id] == 0);
                if (id > 2000 && id < vocab - 300)
                    id += MID_STRIDE - 1; /* sample the middle of the vocab */
            }
        }
        if (step < n) CHECK(k3_constraint_accept(c, ids[step]) == 0, "step %zu", step);
    }
    CHECK(mismatches == 0, "%d mismatches", mismatches);
    free(ids);
    free(logits);
    k3_constraint_free(c);
}

/* Drafts: k3_constraint_fits counts the leading ids the grammar takes from
 * its present state (the first refused ends the run) and leaves the state
 * as it was, so the text's own ids still advance it afterwards. */
TEST(constrain_fits_counts_drafts_and_keeps_the_state) {
    const char *text = "{\"name\": \"Ann\", \"age\": 42, \"tags\": [], \"kind\": \"cat\"}";
    k3_constraint *c = make();
    int32_t *ids;
    size_t n;
    k3_tok_encode(tok, text, strlen(text), 0, &ids, &n);
    CHECK(k3_constraint_fits(c, ids, (int)n) == (int)n, "the whole valid text fits");
    int32_t *bad = malloc(sizeof *bad * n);
    memcpy(bad, ids, sizeof *bad * n);
    int32_t *x;
    size_t nx;
    k3_tok_encode(tok, "x", 1, 0, &x, &nx);
    bad[n - 1] = x[0]; /* "cat" is closed (or is the enum's whole value): no x */
    CHECK(k3_constraint_fits(c, bad, (int)n) == (int)n - 1, "cut at the refused id: %d of %zu",
          k3_constraint_fits(c, bad, (int)n), n);
    CHECK(k3_constraint_fits(c, ids + 1, 2) == 0, "the text's second id cannot start it");
    for (size_t k = 0; k < n; k++) /* the state did not move */
        CHECK(k3_constraint_accept(c, ids[k]) == 0, "id %zu after the fits calls", k);
    free(x);
    free(bad);
    free(ids);
    k3_constraint_free(c);
}

TEST(constrain_random_generations_parse) {
    float *logits = malloc(sizeof(float) * (size_t)vocab);
    int bad = 0, runs = 0;
    double t_mask = 0;
    long masks = 0;
    size_t visits = 0;
    for (int budget = 50; budget <= 170; budget += 12) {
        for (int rep = 0; rep < REPS; rep++) {
            k3_constraint *c = make();
            k3_ids out = {0};
            for (int left = budget; left > 0 && !k3_constraint_done(c); left--) {
                for (int i = 0; i < vocab; i++) logits[i] = (float)(rnd() % 1000) / 100.0f;
                double t0 = now();
                int allowed = k3_constraint_mask(c, logits, left);
                t_mask += now() - t0;
                masks++;
                visits += k3_constraint_last_visits(c);
                if (!allowed) break;
                /* sample: softmax of random logits over the allowed ids */
                int32_t best = -1;
                float bv = -INFINITY;
                for (int i = 0; i < vocab; i++)
                    if (logits[i] > bv || (logits[i] == bv && rnd() % 2)) bv = logits[i], best = i;
                if (k3_constraint_accept(c, best)) break;
                k3_ids_push(&out, best);
            }
            runs++;
            size_t len = 0;
            char *text = k3_tok_decode_bytes(tok, out.ids, out.n, 0, &len);
            const char *eom = "<|end_of_msg|>";
            size_t el = strlen(eom);
            int ends = len >= el && !memcmp(text + len - el, eom, el);
            if (ends) text[len - el] = 0;
            json_t *d = ends ? json_loads(text, 0, NULL) : NULL;
            int ok = d && json_is_string(json_object_get(d, "name")) &&
                     json_is_integer(json_object_get(d, "age")) &&
                     json_is_array(json_object_get(d, "tags")) &&
                     json_is_string(json_object_get(d, "kind"));
            if (!ok && bad++ < 3) printf("  budget %d: %s\n", budget, text);
            json_decref(d);
            free(text);
            k3_ids_free(&out);
            k3_constraint_free(c);
        }
    }
    CHECK(bad == 0, "%d of %d generations invalid", bad, runs);
    printf("  mask: %.1f us per token (%ld masks, %.0f trie nodes visited per mask, %zu nodes, "
           "vocab %d)\n",
           t_mask / (double)masks * 1e6, masks, (double)visits / (double)masks,
           k3_vtrie_nodes(trie), vocab);
    free(logits);
}

int main(void) {
    char dir[] = "/tmp/k3-constrain-XXXXXX";
    if (!mkdtemp(dir) || k3_synth_tokenizer(dir, vocab)) {
        printf("FAIL constrain_setup\n");
        return 1;
    }
    tok = k3_tok_load(dir);
    const char *names[4] = {"<|open|>", "<|close|>", "<|sep|>", "<|end_of_msg|>"};
    for (int k = 0; k < 4; k++) ctl[k] = k3_tok_special_id(tok, names[k]);
    double t0 = now();
    trie = k3_vtrie_build(tok, ctl, vocab);
    printf("  trie: %zu nodes built in %.1f ms\n", k3_vtrie_nodes(trie), (now() - t0) * 1e3);
    RUN(constrain_mask_matches_brute_force);
    RUN(constrain_random_generations_parse);
    RUN(constrain_fits_counts_drafts_and_keeps_the_state);
    k3_vtrie_free(trie);
    k3_tok_free(tok);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd)) return 1;
    return t_done();
}
