/* test_model_seq.c — sequence API semantics on the tiny-bf16 fixture: a clone
 * continues exactly like the original, reset equals a fresh sequence, logits=NULL
 * only fills the caches, all=0 returns the last row, long inputs are split into
 * passes transparently, bad token ids are refused without touching the
 * caches, and a freed sequence's state block, kept for the next sequence,
 * starts it from zero (or is overwritten whole by a clone). */
#include "k3.h"
#include "model/model.h"
#include "helpers.h"
#include "t.h"

int k3_forward_path(k3_seq *s, const int32_t *tokens, int64_t n, float *logits, int all, int path);

static k3_model *g_m;
static int g_V;
static const int32_t g_tok[12] = {5, 17, 3, 900, 42, 42, 7, 1, 0, 998, 64, 3};

TEST(clone_continues_like_the_original) {
    k3_seq *s = k3_seq_new(g_m);
    float *a = calloc((size_t)g_V, 4), *b = calloc((size_t)g_V, 4);
    CHECK(k3_forward(s, g_tok, 8, NULL, 0) == 0, "%s", k3_errmsg());
    k3_seq *c = k3_seq_clone(s);
    CHECK(k3_seq_len(c) == 8);
    CHECK(k3_forward(s, g_tok + 8, 4, a, 0) == 0 && k3_forward(c, g_tok + 8, 4, b, 0) == 0);
    CHECK(t_max_diff(a, b, g_V) == 0.0f, "clone differs by %g", t_max_diff(a, b, g_V));
    k3_seq_free(c);
    k3_seq_free(s);
    free(a);
    free(b);
}

TEST(reset_equals_fresh_and_last_row) {
    k3_seq *s = k3_seq_new(g_m), *f = k3_seq_new(g_m);
    int64_t n = 12 * (int64_t)g_V;
    float *a = calloc((size_t)n, 4), *b = calloc((size_t)n, 4), *last = calloc((size_t)g_V, 4);
    CHECK(k3_forward(s, g_tok, 12, NULL, 0) == 0);
    k3_seq_reset(s);
    CHECK(k3_seq_len(s) == 0);
    CHECK(k3_forward(s, g_tok, 12, a, 1) == 0 && k3_forward(f, g_tok, 12, b, 1) == 0);
    CHECK(t_max_diff(a, b, n) == 0.0f, "reset differs from fresh by %g", t_max_diff(a, b, n));
    k3_seq_reset(s);
    CHECK(k3_forward(s, g_tok, 12, last, 0) == 0);
    /* the head runs as a matvec here and as a matmul above: equal up to rounding */
    CHECK(t_max_diff(last, b + 11 * g_V, g_V) < 1e-5f, "last row differs by %g",
          t_max_diff(last, b + 11 * g_V, g_V));
    k3_seq_free(s);
    k3_seq_free(f);
    free(a);
    free(b);
    free(last);
}

/* 1200 tokens: k3_forward splits them into passes of at most 512; the logits must
 * match one unsplit pass (k3_forward_path) to rounding. */
TEST(long_input_is_chunked_transparently) {
    enum { N = 1200 };
    int32_t *tok = malloc(sizeof *tok * N);
    for (int i = 0; i < N; i++) tok[i] = (int32_t)((i * 7919 + 13) % g_V);
    float *a = calloc((size_t)N * (size_t)g_V, 4), *b = calloc((size_t)N * (size_t)g_V, 4);
    k3_seq *s = k3_seq_new(g_m), *u = k3_seq_new(g_m);
    CHECK(k3_forward(s, tok, N, a, 1) == 0 && k3_forward_path(u, tok, N, b, 1, 0) == 0, "%s",
          k3_errmsg());
    CHECK(k3_seq_len(s) == N);
    float mx = 0;
    for (int64_t i = 0; i < (int64_t)N * g_V; i++) mx = fabsf(b[i]) > mx ? fabsf(b[i]) : mx;
    float d = t_max_diff(a, b, (int64_t)N * g_V);
    CHECK(d <= 1e-5f * mx, "chunked differs by %g (max %g)", d, mx);
    k3_seq_free(s);
    k3_seq_free(u);
    free(tok);
    free(a);
    free(b);
}

TEST(bad_tokens_are_refused) {
    k3_seq *s = k3_seq_new(g_m);
    int32_t bad[3] = {1, g_V, 2}, neg = -1;
    CHECK(k3_forward(s, bad, 3, NULL, 0) == -1 && strstr(k3_errmsg(), "out of range"), "%s",
          k3_errmsg());
    CHECK(k3_forward(s, &neg, 1, NULL, 0) == -1);
    CHECK(k3_forward(s, bad, 0, NULL, 0) == -1);
    CHECK(k3_seq_len(s) == 0, "a refused call must not advance the sequence");
    k3_seq_free(s);
}

/* Freed blocks are kept (up to K3_SPARE_STATES): a new sequence or a clone
 * that gets one, dirty from a finished sequence, computes exactly like a
 * sequence whose block was never used. */
TEST(kept_state_blocks_start_clean) {
    enum { N = K3_SPARE_STATES + 1 };
    float *ref = calloc((size_t)g_V, 4), *a = calloc((size_t)g_V, 4), *b = calloc((size_t)g_V, 4);
    k3_seq *r = k3_seq_new(g_m);
    CHECK(r->state_bytes > 0, "the fixture has KDA layers");
    CHECK(k3_forward(r, g_tok, 12, NULL, 0) == 0);
    k3_seq_reset(r); /* zeroed in place: equals fresh (reset_equals_fresh_and_last_row) */
    CHECK(k3_forward(r, g_tok, 12, ref, 0) == 0);
    k3_seq *d[N];
    float *kept[N];
    for (int i = 0; i < N; i++) { /* take every kept block, and dirty them all */
        d[i] = k3_seq_new(g_m);
        kept[i] = d[i]->state;
        CHECK(k3_forward(d[i], g_tok + i % 4, 8, NULL, 0) == 0);
    }
    for (int i = 0; i < N; i++) k3_seq_free(d[i]);
    CHECK(g_m->n_spare == K3_SPARE_STATES, "%d blocks kept", g_m->n_spare);
    k3_seq *s = k3_seq_new(g_m);
    int reused = 0;
    for (int i = 0; i < N; i++) reused |= s->state == kept[i];
    CHECK(reused, "the new sequence got a kept block");
    CHECK(k3_forward(s, g_tok, 12, a, 0) == 0);
    CHECK(t_max_diff(a, ref, g_V) == 0.0f, "a kept block differs from a fresh one by %g",
          t_max_diff(a, ref, g_V));
    /* a clone into a kept (dirty) block continues like its original */
    k3_seq_reset(s);
    CHECK(k3_forward(s, g_tok, 8, NULL, 0) == 0);
    k3_seq *c = k3_seq_clone(s);
    reused = 0;
    for (int i = 0; i < N; i++) reused |= c->state == kept[i];
    CHECK(reused, "the clone got a kept block");
    CHECK(k3_forward(s, g_tok + 8, 4, a, 0) == 0 && k3_forward(c, g_tok + 8, 4, b, 0) == 0);
    CHECK(t_max_diff(a, b, g_V) == 0.0f, "clone differs by %g", t_max_diff(a, b, g_V));
    k3_seq_free(c);
    k3_seq_free(s);
    k3_seq_free(r);
    free(ref);
    free(a);
    free(b);
}

/* The reserve: refill faults blocks in piece by piece until `reserve` are
 * kept, sequences take them (and start from zero), freed ones are kept up to
 * the reserve, and a smaller reserve frees the rest. */
TEST(state_reserve_fills_and_is_taken) {
    size_t block = k3_model_state_bytes(g_m);
    k3_seq *probe = k3_seq_new(g_m);
    CHECK(block > 0 && probe->state_bytes == block);
    k3_seq_free(probe);
    CHECK(block > 3 * 4096, "the block spans several pieces (%zu bytes)", block);
    k3_seq *drain[K3_SPARE_STATES];
    for (int i = 0; i < K3_SPARE_STATES; i++) drain[i] = k3_seq_new(g_m);
    CHECK(k3_model_state_kept(g_m) == 0, "%d kept after taking them all", k3_model_state_kept(g_m));
    k3_model_state_reserve(g_m, 9 * block + block / 2, 7); /* 7 blocks: the count limits */
    g_m->refill_step = 4096;
    int calls = 0, pieces = (int)((block + 4095) / 4096);
    while (k3_model_state_refill(g_m) && calls < 1000000) calls++;
    CHECK(k3_model_state_kept(g_m) == 7, "%d kept", k3_model_state_kept(g_m));
    CHECK(calls == 7 * pieces, "%d refill calls made progress, expected %d", calls, 7 * pieces);
    CHECK(k3_model_state_refill(g_m) == 0, "a full reserve adds nothing");
    float *ref = calloc((size_t)g_V, 4), *a = calloc((size_t)g_V, 4);
    k3_seq *r = k3_seq_new(g_m); /* from the reserve: zeroed like a fresh one */
    CHECK(k3_model_state_kept(g_m) == 6);
    CHECK(k3_forward(r, g_tok, 12, a, 0) == 0);
    k3_seq_free(r);
    for (int i = 0; i < K3_SPARE_STATES; i++) k3_seq_free(drain[i]); /* kept: under the reserve */
    CHECK(k3_model_state_kept(g_m) == 7, "%d kept", k3_model_state_kept(g_m));
    k3_seq *f = k3_seq_new(g_m);
    CHECK(k3_forward(f, g_tok, 12, ref, 0) == 0);
    CHECK(t_max_diff(a, ref, g_V) == 0.0f, "a reserve block differs by %g",
          t_max_diff(a, ref, g_V));
    k3_seq_free(f);
    k3_model_state_reserve(g_m, 0, 7); /* back to the default: K3_SPARE_STATES kept */
    CHECK(k3_model_state_kept(g_m) == K3_SPARE_STATES, "%d kept", k3_model_state_kept(g_m));
    CHECK(k3_model_state_refill(g_m) == 0, "no reserve, no refill");
    g_m->refill_step = 0;
    free(ref);
    free(a);
}

TEST(model_info) {
    CHECK(k3_model_eos(g_m) == 999 && k3_model_bos(g_m) == 998);
    CHECK(k3_model_weight_bytes(g_m) > k3_model_active_bytes(g_m) &&
          k3_model_active_bytes(g_m) > 0);
}

int main(void) {
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/tiny-bf16", t_fixtures());
    k3_load_opts o = {.threads = 1, .tp_size = 1, .pp_size = 1};
    g_m = k3_model_load(dir, &o);
    if (!g_m) {
        printf("FAIL model_seq_load (%s)\n", k3_errmsg());
        return 1;
    }
    g_V = k3_model_vocab(g_m);
    RUN(clone_continues_like_the_original);
    RUN(reset_equals_fresh_and_last_row);
    RUN(long_input_is_chunked_transparently);
    RUN(bad_tokens_are_refused);
    RUN(kept_state_blocks_start_clean);
    RUN(state_reserve_fills_and_is_taken);
    RUN(model_info);
    k3_model_free(g_m);
    return t_done();
}
