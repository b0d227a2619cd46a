/* test_model_plan.c — a sequence's memory at a given context (model/plan.h):
 * the planned bytes equal what a real sequence allocates (state block plus
 * each MLA layer's latent cache at the capacity it grew to) with f32 and bf16
 * caches, bf16 latents take half the bytes, the checks name the figure and
 * the option when RAM or --cache-mb cannot hold it, and --cache-type takes
 * f32 or bf16 only. */
#include "base/err.h"
#include "model/model.h"
#include "model/plan.h"
#include "t.h"

static k3_model *load_type(int cache_type) {
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/tiny-bf16", t_fixtures());
    k3_load_opts o = {.tp_size = 1, .pp_size = 1, .cache_type = cache_type};
    k3_model *m = k3_model_load(dir, &o);
    CHECK(m, "load %s: %s", dir, k3_errmsg());
    return m;
}

static k3_model *load(void) {
    return load_type(K3_CACHE_F32);
}

/* Bytes a sequence holds after reading n tokens, from its own caches. */
static uint64_t held_bytes(k3_model *m, int64_t n) {
    const k3_config *c = m->c;
    k3_seq *s = k3_seq_new(m);
    int32_t *tok = calloc((size_t)n, sizeof(int32_t));
    float *logits = malloc(sizeof(float) * (size_t)k3_model_vocab(m));
    for (int64_t i = 0; i < n; i++) tok[i] = (int32_t)(i * 31 % 200);
    CHECK(k3_forward(s, tok, n, logits, 0) == 0, "%s", k3_errmsg());
    uint64_t bytes = s->state_bytes;
    for (int i = 0; i < c->num_hidden_layers; i++)
        if (!m->L[i].is_kda)
            bytes += k3_cache_elem_bytes(m) * (uint64_t)s->lc[i].cap *
                     (uint64_t)(c->kv_lora_rank + (c->qk_rope_head_dim ? c->qk_rope_head_dim : 1));
    k3_seq_free(s);
    free(tok), free(logits);
    return bytes;
}

TEST(planned_bytes_match_a_real_sequence) {
    for (int type = K3_CACHE_F32; type <= K3_CACHE_BF16; type++) {
        k3_model *m = load_type(type);
        if (!m) return;
        static const int64_t ns[] = {1, 64, 65, 300};
        for (size_t i = 0; i < sizeof ns / sizeof *ns; i++) {
            uint64_t plan = k3_seq_plan_bytes(m, ns[i]), held = held_bytes(m, ns[i]);
            CHECK(plan == held, "type %d n=%lld: planned %llu bytes, a sequence holds %llu", type,
                  (long long)ns[i], (unsigned long long)plan, (unsigned long long)held);
        }
        CHECK(k3_seq_plan_bytes(m, K3_CTX_MAX) > k3_seq_plan_bytes(m, 4096));
        k3_model_free(m);
    }
}

TEST(bf16_latents_take_half) {
    k3_model *f = load_type(K3_CACHE_F32), *h = load_type(K3_CACHE_BF16);
    if (!f || !h) return;
    uint64_t state = k3_model_state_bytes(f);
    uint64_t lf = k3_seq_plan_bytes(f, 100000) - state, lh = k3_seq_plan_bytes(h, 100000) - state;
    CHECK(lf > 0 && lh * 2 == lf, "latents: f32 %llu bytes, bf16 %llu", (unsigned long long)lf,
          (unsigned long long)lh);
    k3_model_free(f), k3_model_free(h);
}

TEST(cache_type_parse) {
    int t = -1;
    CHECK(k3_cache_type_parse("f32", &t) == 0 && t == K3_CACHE_F32);
    CHECK(k3_cache_type_parse("bf16", &t) == 0 && t == K3_CACHE_BF16);
    CHECK(k3_cache_type_parse("f16", &t) < 0);
    CHECK(strstr(k3_errmsg(), "--cache-type expects f32 or bf16, got 'f16'"), "%s", k3_errmsg());
    CHECK(k3_cache_type_parse("", &t) < 0);
    k3_load_opts o = {.tp_size = 1, .pp_size = 1, .cache_type = 7};
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/tiny-bf16", t_fixtures());
    CHECK(k3_model_load(dir, &o) == NULL, "cache_type 7 was accepted");
}

TEST(checks_name_the_limit) {
    k3_model *m = load();
    if (!m) return;
    uint64_t need = k3_seq_plan_bytes(m, 100000);
    CHECK(k3_seq_plan_check(m, 100000, 0, need) == 0, "%s", k3_errmsg());
    CHECK(k3_seq_plan_check(m, 100000, 0, need - 1) < 0);
    CHECK(strstr(k3_errmsg(), "RAM available"), "%s", k3_errmsg());
    CHECK(k3_seq_plan_check(m, 100000, need - 1, need) < 0);
    CHECK(strstr(k3_errmsg(), "--cache-mb"), "%s", k3_errmsg());
    CHECK(k3_seq_plan_check(m, K3_CTX_MAX + 1, 0, 0) < 0);
    CHECK(strstr(k3_errmsg(), "1048576"), "%s", k3_errmsg());
    CHECK(k3_seq_plan_check(m, K3_CTX_MAX, 0, (uint64_t)1 << 50) == 0, "%s", k3_errmsg());
    k3_model_free(m);
}

int main(void) {
    RUN(planned_bytes_match_a_real_sequence);
    RUN(checks_name_the_limit);
    RUN(bf16_latents_take_half);
    RUN(cache_type_parse);
    return t_done();
}
