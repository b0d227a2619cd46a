/* test_model_attnres.c — the vectorized AttnRes mix (src/model/attnres.c)
 * against its scalar double reference on awkward widths (not multiples of the
 * 4/8 lanes or of the 256-column chunks), with 1 to 6 candidates; and the
 * threading contract: a single token split over D chunks gives the bits of
 * one thread, and of the same row inside a many-token call. */
#include "model/model.h"
#include "t.h"

#include <omp.h>

static const int64_t g_D[] = {1, 3, 7, 8, 255, 256, 257, 1000, 1031, 2053};

/* n candidates of T rows of D (scaled apart so the softmax is not flat), p, w. */
static float *make_inputs(int n, int64_t T, int64_t D, float **R, float **p, float **w) {
    float *all = malloc(sizeof(float) * (size_t)((n + 1) * T * D + D));
    for (int64_t i = 0; i < (n + 1) * T * D + D; i++) all[i] = (float)t_rand();
    for (int j = 0; j < n; j++) {
        R[j] = all + j * T * D;
        for (int64_t i = 0; i < T * D; i++) R[j][i] *= (float)(j + 1) * 0.7f;
    }
    *p = all + n * T * D;
    *w = *p + T * D;
    return all;
}

static double max_rel(const float *a, const float *b, int64_t n) {
    double d = 0, m = 1e-30;
    for (int64_t i = 0; i < n; i++) {
        d = fmax(d, fabs((double)a[i] - b[i]));
        m = fmax(m, fabs((double)b[i]));
    }
    return d / m;
}

TEST(fast_matches_reference) {
    t_seed(11);
    double worst = 0;
    for (size_t k = 0; k < sizeof g_D / sizeof g_D[0]; k++)
        for (int n = 1; n <= 6; n++)
            for (int64_t T = 1; T <= 3; T += 2) {
                int64_t D = g_D[k];
                float *R[6], *p, *w;
                float *all = make_inputs(n, T, D, R, &p, &w);
                float *a = malloc(sizeof(float) * (size_t)(T * D));
                float *b = malloc(sizeof(float) * (size_t)(T * D));
                k3_attnres_mix(R, n, p, w, T, D, 1e-5, a);
                k3_attnres_mix_ref(R, n, p, w, T, D, 1e-5, b);
                double e = max_rel(a, b, T * D);
                worst = fmax(worst, e);
                CHECK(e < 1e-6, "D=%lld n=%d T=%lld: rel error %g", (long long)D, n, (long long)T,
                      e);
                free(a);
                free(b);
                free(all);
            }
    printf("  attnres fast vs ref: max rel error %.3g\n", worst);
}

TEST(one_token_split_is_thread_independent) {
    t_seed(12);
    int saved = omp_get_max_threads();
    for (size_t k = 0; k < sizeof g_D / sizeof g_D[0]; k++) {
        int64_t D = g_D[k], T = 5;
        int n = 4;
        float *R[4], *p, *w;
        float *all = make_inputs(n, T, D, R, &p, &w);
        float *many = malloc(sizeof(float) * (size_t)(T * D)), *o1 = malloc(sizeof(float) * D);
        float *o2 = malloc(sizeof(float) * D), *o3 = malloc(sizeof(float) * D);
        omp_set_num_threads(2);
        k3_attnres_mix(R, n, p, w, T, D, 1e-5, many);
        float *Rl[4]; /* the last row as a one-token call */
        for (int j = 0; j < n; j++) Rl[j] = R[j] + (T - 1) * D;
        k3_attnres_mix(Rl, n, p + (T - 1) * D, w, 1, D, 1e-5, o2);
        omp_set_num_threads(3);
        k3_attnres_mix(Rl, n, p + (T - 1) * D, w, 1, D, 1e-5, o3);
        omp_set_num_threads(1);
        k3_attnres_mix(Rl, n, p + (T - 1) * D, w, 1, D, 1e-5, o1);
        CHECK(!memcmp(o1, o2, sizeof(float) * D), "D=%lld: 1 vs 2 threads", (long long)D);
        CHECK(!memcmp(o1, o3, sizeof(float) * D), "D=%lld: 1 vs 3 threads", (long long)D);
        CHECK(!memcmp(o1, many + (T - 1) * D, sizeof(float) * D),
              "D=%lld: one-token call differs from the same row of a %lld-token call", (long long)D,
              (long long)T);
        free(many);
        free(o1);
        free(o2);
        free(o3);
        free(all);
    }
    omp_set_num_threads(saved);
}

TEST(no_blocks_copies_the_partial) {
    float p[9], out[9];
    for (int i = 0; i < 9; i++) p[i] = (float)i - 4.5f;
    k3_attnres_mix(NULL, 0, p, p, 3, 3, 1e-5, out);
    CHECK(!memcmp(out, p, sizeof p));
}

int main(void) {
    RUN(fast_matches_reference);
    RUN(one_token_split_is_thread_independent);
    RUN(no_blocks_copies_the_partial);
    return t_done();
}
