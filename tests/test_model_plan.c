/* test_model_plan.c — a sequence's memory at a given context (model/plan.h):
 * the planned bytes equal what a real sequence allocates (state block plus
 * each MLA layer's latent cache at the capacity it grew to), and the checks
 * name the figure and the option when RAM or --cache-mb cannot hold it. */
#include "base/err.h"
#include "model/model.h"
#include "model/plan.h"
#include "t.h"

static k3_model *load(void) {
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/tiny-bf16", t_fixtures());
    k3_model *m = k3_model_load(dir, NULL);
    CHECK(m, "load %s: %s", dir, k3_errmsg());
    return m;
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
            bytes += sizeof(float) * (uint64_t)s->lc[i].cap *
                     (uint64_t)(c->kv_lora_rank + (c->qk_rope_head_dim ? c->qk_rope_head_dim : 1));
    k3_seq_free(s);
    free(tok), free(logits);
    return bytes;
}

TEST(planned_bytes_match_a_real_sequence) {
    k3_model *m = load();
    if (!m) return;
    static const int64_t ns[] = {1, 64, 65, 300};
    for (size_t i = 0; i < sizeof ns / sizeof *ns; i++) {
        uint64_t plan = k3_seq_plan_bytes(m, ns[i]), held = held_bytes(m, ns[i]);
        CHECK(plan == held, "n=%lld: planned %llu bytes, a sequence holds %llu", (long long)ns[i],
              (unsigned long long)plan, (unsigned long long)held);
    }
    CHECK(k3_seq_plan_bytes(m, K3_CTX_MAX) > k3_seq_plan_bytes(m, 4096));
    k3_model_free(m);
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
    return t_done();
}
