/* test_gen_bench_start.c — the states benchmarks start from, on the fixtures.
 *
 * Replay (gen/replay.h): a line's prompt is prefilled once and both passes
 * start from copies of that state. The plain pass then sees bitwise the
 * logits it sees after a prefill of its own (a hash over every logits row the
 * forced choice reads), the speculative pass too, with the same counts; a
 * pass leaves its start unchanged, and a start one token different gives
 * another hash (the hash does see the state).
 *
 * Depth (gen/depth.h): a context filled on 1, 2 or 3 threads leaves bitwise
 * the same state, compared by the logits of the tokens fed after it on one
 * thread (and a context one token shorter gives other logits: the probe sees
 * the fill); the caller's thread count is restored after the fill. */
#include "gen/depth.h"
#include "gen/replay.h"
#include "k3.h"
#include "helpers.h"
#include "t.h"

#include <omp.h>

enum { NP = 48, NA = 40, SPEC = 8 };

static k3_model *load(const char *dir) {
    k3_load_opts o = {.tp_size = 1, .pp_size = 1};
    k3_model *m = k3_model_load(dir, &o);
    CHECK(m != NULL, "%s: %s", dir, k3_errmsg());
    return m;
}

/* A prompt with a repeated phrase and an answer that quotes it, so the
 * drafter proposes and the speculative pass verifies. */
static void line_ids(int V, int32_t *p, int32_t *a) {
    for (int i = 0; i < NP; i++) p[i] = (int32_t)(i < 24 ? (i * 37 + 11) % V : (i * 53 + 3) % V);
    for (int i = 0; i < NA; i++) a[i] = p[(i + 4) % 24];
}

/* A pass from its own prefill of p. */
static void fresh_pass(k3_model *m, const int32_t *p, const int32_t *a, int spec,
                       k3_replay_pass *r) {
    k3_seq *s = k3_replay_prefill(m, p, NP);
    CHECK(s != NULL, "%s", k3_errmsg());
    if (!s) return;
    CHECK(!k3_replay_pass_run(m, s, p, NP, a, NA, spec, NULL, 1, r), "%s", k3_errmsg());
    CHECK(k3_seq_len(s) == NP, "the start grew to %lld", (long long)k3_seq_len(s));
    k3_seq_free(s);
}

static int same_counts(const k3_replay_pass *x, const k3_replay_pass *y) {
    return x->tokens == y->tokens && x->steps == y->steps && x->verify_steps == y->verify_steps &&
           x->drafted == y->drafted && x->accepted == y->accepted;
}

static void replay_case(const char *dir) {
    k3_model *m = load(dir);
    if (!m) return;
    int V = k3_model_vocab(m);
    int32_t p[NP], a[NA];
    line_ids(V, p, a);
    k3_replay_pass plain, spec, again;
    fresh_pass(m, p, a, 0, &plain);
    fresh_pass(m, p, a, SPEC, &spec);
    k3_replay_line line;
    CHECK(!k3_replay_line_run(m, p, NP, a, NA, SPEC, NULL, 1, &line), "%s", k3_errmsg());
    CHECK(line.plain.digest == plain.digest,
          "%s: plain pass from the shared prefill %016llx, "
          "from its own %016llx",
          dir, (unsigned long long)line.plain.digest, (unsigned long long)plain.digest);
    CHECK(line.spec.digest == spec.digest, "%s: speculative pass %016llx, from its own %016llx",
          dir, (unsigned long long)line.spec.digest, (unsigned long long)spec.digest);
    CHECK(same_counts(&line.plain, &plain) && same_counts(&line.spec, &spec), "%s", dir);
    CHECK(spec.verify_steps > 0 && spec.accepted > 0, "%s: %lld verify steps, %lld accepted", dir,
          (long long)spec.verify_steps, (long long)spec.accepted);
    CHECK(line.prefill_cpu_s > 0, "%s: prefill CPU %g s", dir, line.prefill_cpu_s);

    /* two passes from one start see the same logits */
    k3_seq *s = k3_replay_prefill(m, p, NP);
    CHECK(!k3_replay_pass_run(m, s, p, NP, a, NA, 0, NULL, 1, &again) &&
          again.digest == plain.digest);
    CHECK(!k3_replay_pass_run(m, s, p, NP, a, NA, 0, NULL, 1, &again) &&
          again.digest == plain.digest);
    CHECK(k3_replay_pass_run(m, s, p, NP - 1, a, NA, 0, NULL, 1, &again) == -1,
          "a start that read another prompt length is refused");
    k3_seq_free(s);

    /* the hash sees the state: one prompt token changed */
    p[NP - 1] = (p[NP - 1] + 1) % V;
    fresh_pass(m, p, a, 0, &again);
    CHECK(again.digest != plain.digest, "%s: another prompt, same hash", dir);
    k3_model_free(m);
}

TEST(replay_passes_start_from_one_prefill_bitwise) {
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/tiny-bf16", t_fixtures());
    replay_case(dir);
    replay_case("tests/fixtures/mlx-mixed");
}

/* Logits of PROBE tokens fed on one thread after a fill on `threads`. */
enum { PROBE = 5 };
static float *after_fill(k3_model *m, int64_t D, int threads) {
    int V = k3_model_vocab(m);
    omp_set_num_threads(1);
    k3_seq *s = k3_depth_fill(m, D, threads, NULL, NULL);
    CHECK(s != NULL, "%s", k3_errmsg());
    CHECK(omp_get_max_threads() == 1, "fill left %d threads", omp_get_max_threads());
    if (!s) return NULL;
    CHECK(k3_seq_len(s) == D);
    int32_t t[PROBE] = {3, 1, 4, 1, 5};
    float *L = malloc(sizeof(float) * (size_t)V * PROBE);
    CHECK(!k3_forward(s, t, PROBE, L, 1), "%s", k3_errmsg());
    k3_seq_free(s);
    return L;
}

static void depth_case(const char *dir, int max_threads) {
    k3_model *m = load(dir);
    if (!m) return;
    const int64_t D = K3_DEPTH_CHUNK + 300; /* two chunks, the second partial */
    size_t bytes = sizeof(float) * (size_t)k3_model_vocab(m) * PROBE;
    float *one = after_fill(m, D, 1);
    for (int th = 2; one && th <= max_threads; th++) {
        float *l = after_fill(m, D, th);
        CHECK(l && !memcmp(l, one, bytes), "%s: fill on %d threads differs from 1 (max %g)", dir,
              th, l ? t_max_diff(l, one, (int64_t)(bytes / sizeof(float))) : -1.0);
        free(l);
    }
    float *shorter = max_threads > 2 ? after_fill(m, D - 1, 2) : NULL;
    CHECK(max_threads <= 2 || (shorter && memcmp(shorter, one, bytes)),
          "%s: one token less, same logits", dir);
    free(shorter);
    free(one);
    k3_model_free(m);
}

TEST(depth_fill_state_does_not_depend_on_its_threads) {
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/tiny-bf16", t_fixtures());
    depth_case(dir, 3);
    depth_case("tests/fixtures/mlx-mixed", 2);
    omp_set_num_threads(2);
    CHECK(k3_depth_fill(NULL, -1, 1, NULL, NULL) == NULL, "a negative depth is refused");
}

int main(void) {
    RUN(replay_passes_start_from_one_prefill_bitwise);
    RUN(depth_fill_state_does_not_depend_on_its_threads);
    return t_done();
}
