/* test_kernels_mla_tile.c — the tiled MLA attention (kernels/mla_tile.h)
 * against its scalar double reference, and its thread independence:
 *   - awkward sizes: cache lengths 1, 31, 33, 70 and over several splits
 *     (not multiples of the block), head counts 1, 8 and 96, ranks 256 and
 *     512 (absorbed: K = V = latents) and odd widths (expanded: K != V, with
 *     and without the shared RoPE keys), decode and causal chunks of queries;
 *   - several sequences of different lengths in one step, sharing a scratch;
 *   - 1, 2 and 3 threads bitwise equal, in the AVX-512 and the AVX2 tiles;
 *   - a bf16 cache (K16, V16, P16) against the double reference reading the
 *     same bf16 values, on the same sizes, and bitwise equal to the f32
 *     kernel over the widened values (it is that kernel on widened blocks);
 *   - batch invariance: a row's output is bitwise the same alone, among 96
 *     heads or a TP rank's 24, as a query of a 9-row verify pass, over a cache
 *     longer than its causal length, and on 1, 2 and 3 threads, for lengths
 *     around the split boundary and one cached token, f32 and bf16, ranks 256
 *     and 512; and rows run in batches (a lowered cap on the partials) give
 *     the bits of one batch.
 * Errors are relative to max|V| (the output is a convex combination of V). */
#include "kernels/runtime.h"
#include "kernels/mla_tile.h"
#include "quant/dtype.h"
#include "t.h"

#include <omp.h>

static float *rand_floats(int64_t n, float scale) {
    float *p = malloc(sizeof(float) * (size_t)(n > 0 ? n : 1));
    for (int64_t i = 0; i < n; i++) p[i] = (float)t_rand() * scale;
    return p;
}

typedef struct {
    k3_mla_tile_args a;
    float *K, *V, *P, *q, *qp;
} tcase;

/* nh heads x nt queries over n cached rows; shared = 1: K = V (absorbed). */
static tcase make_case(int nh, int nt, int64_t n, int dk, int dv, int dp, int shared) {
    tcase c;
    int64_t ldk = dk + (shared ? 0 : 3), ldv = shared ? ldk : dv + 5, ldp = dp + 1;
    c.K = rand_floats(n * ldk, 1), c.P = rand_floats(n * ldp, 1);
    c.V = shared ? c.K : rand_floats(n * ldv, 1);
    c.q = rand_floats((int64_t)nh * nt * dk, 1), c.qp = rand_floats((int64_t)nh * nt * dp, 1);
    c.a = (k3_mla_tile_args){.K = c.K,
                             .V = shared ? c.K : c.V,
                             .P = c.P,
                             .ldk = ldk,
                             .ldv = shared ? ldk : ldv,
                             .ldp = ldp,
                             .n = n,
                             .dk = dk,
                             .dv = shared ? dk : dv,
                             .dp = dp,
                             .q = c.q,
                             .qp = c.qp,
                             .nh = nh,
                             .nt = nt,
                             .q_h = (int64_t)nt * dk,
                             .q_t = dk,
                             .qp_h = dp,
                             .qp_t = (int64_t)nh * dp,
                             .off = n - nt};
    c.a.dv = shared ? dk : dv;
    c.a.o_h = c.a.dv, c.a.o_t = (int64_t)nh * c.a.dv;
    c.a.scale = 1.0f / sqrtf((float)(dk + dp));
    return c;
}

static void free_case(tcase *c) {
    if (c->V != c->K) free(c->V);
    free(c->K), free(c->P), free(c->q), free(c->qp);
}

static float *run(tcase *c, int ref) {
    size_t nout = (size_t)(c->a.nh * c->a.nt * c->a.dv);
    float *out = malloc(sizeof(float) * nout);
    float *scratch = aligned_alloc(64, (k3_mla_tile_scratch(&c->a) * sizeof(float) + 63) / 64 * 64);
    c->a.out = out;
    k3_mla_tile(&c->a, scratch, ref);
    free(scratch);
    return out;
}

static double max_err(const float *x, const float *y, size_t n) {
    double e = 0;
    for (size_t i = 0; i < n; i++) e = fmax(e, fabs((double)x[i] - y[i]));
    return e;
}

static double g_worst;

/* Fast vs reference, and 1/2/3 threads bitwise equal. */
static void check_case(int nh, int nt, int64_t n, int dk, int dv, int dp, int shared) {
    tcase c = make_case(nh, nt, n, dk, dv, dp, shared);
    size_t nout = (size_t)(nh * nt * c.a.dv);
    float *ref = run(&c, 1);
    omp_set_num_threads(1);
    float *one = run(&c, 0);
    omp_set_num_threads(2);
    float *two = run(&c, 0);
    omp_set_num_threads(3);
    float *three = run(&c, 0);
    double e = max_err(one, ref, nout);
    g_worst = fmax(g_worst, e);
    CHECK(e <= 1e-6, "nh=%d nt=%d n=%lld dk=%d dv=%d dp=%d: error %g", nh, nt, (long long)n, dk, dv,
          dp, e);
    CHECK(!memcmp(one, two, sizeof(float) * nout), "nh=%d nt=%d n=%lld: 2 threads differ", nh, nt,
          (long long)n);
    CHECK(!memcmp(one, three, sizeof(float) * nout), "nh=%d nt=%d n=%lld: 3 threads differ", nh, nt,
          (long long)n);
    free(ref), free(one), free(two), free(three);
    free_case(&c);
}

static void absorbed_sizes(void) {
    static const int64_t ns[] = {1, 31, 33, 70, 1100};
    static const int heads[] = {1, 8, 96};
    for (int ri = 0; ri < 2; ri++)
        for (size_t h = 0; h < 3; h++)
            for (size_t k = 0; k < sizeof ns / sizeof *ns; k++) {
                if (heads[h] == 96 && ns[k] > 100 && ri == 0) continue; /* keep it quick */
                check_case(heads[h], 1, ns[k], ri ? 512 : 256, 0, 64, 1);
                if (ns[k] >= 3) check_case(heads[h], 3, ns[k], ri ? 512 : 256, 0, 64, 1);
            }
}

TEST(tile_absorbed_matches_reference) {
    t_seed(40);
    g_worst = 0;
    absorbed_sizes();
    printf("  absorbed (%s): max error %.3g of max|V|\n", k3_kernels_name(), g_worst);
}

TEST(tile_expanded_odd_widths) {
    static const int dks[] = {1, 17, 128}, dvs[] = {1, 19, 128}, dps[] = {0, 3, 64};
    static const int64_t ns[] = {1, 5, 32, 97, 600};
    t_seed(41);
    g_worst = 0;
    for (size_t a = 0; a < 3; a++)
        for (size_t k = 0; k < sizeof ns / sizeof *ns; k++) {
            int64_t nt = ns[k] < 40 ? ns[k] : 40;
            check_case(1, (int)nt, ns[k], dks[a], dvs[(a + 1) % 3], dps[a], 0);
            check_case(2, 1, ns[k], dks[a], dvs[a], dps[(a + 2) % 3], 0);
        }
    printf("  expanded (%s): max error %.3g of max|V|\n", k3_kernels_name(), g_worst);
}

/* One step over sequences of different lengths, each its own cache, one scratch. */
TEST(tile_sequences_of_different_lengths) {
    static const int64_t ns[] = {700, 1, 45, 129};
    t_seed(42);
    size_t cap = 0;
    tcase c[4];
    for (int s = 0; s < 4; s++) {
        c[s] = make_case(8, s == 2 ? 4 : 1, ns[s], 256, 0, 64, 1);
        size_t need = k3_mla_tile_scratch(&c[s].a);
        cap = need > cap ? need : cap;
    }
    float *scratch = aligned_alloc(64, (cap * sizeof(float) + 63) / 64 * 64);
    for (int s = 0; s < 4; s++) {
        size_t nout = (size_t)(c[s].a.nh * c[s].a.nt * c[s].a.dv);
        float *ref = run(&c[s], 1), *out = malloc(sizeof(float) * nout);
        c[s].a.out = out;
        k3_mla_tile(&c[s].a, scratch, 0);
        double e = max_err(out, ref, nout);
        CHECK(e <= 1e-6, "sequence %d (n=%lld): error %g", s, (long long)ns[s], e);
        free(ref), free(out);
        free_case(&c[s]);
    }
    free(scratch);
}

/* ---- a bf16 cache ----------------------------------------------------------- */

/* The bf16 copy of x[0..n), x rounded to what the copy holds. */
static uint16_t *to_bf16(float *x, int64_t n) {
    uint16_t *h = malloc(sizeof(uint16_t) * (size_t)(n > 0 ? n : 1));
    for (int64_t i = 0; i < n; i++) h[i] = k3_f32_to_bf16(x[i]), x[i] = k3_bf16_to_f32(h[i]);
    return h;
}

/* As check_case over a bf16 cache: the bf16 kernel against its double
 * reference, 1/2/3 threads bitwise equal, and bitwise the f32 kernel run on
 * the widened values. */
static void check_case_bf16(int nh, int nt, int64_t n, int dk, int dv, int dp, int shared) {
    tcase c = make_case(nh, nt, n, dk, dv, dp, shared);
    uint16_t *K16 = to_bf16(c.K, n * c.a.ldk), *P16 = to_bf16(c.P, n * c.a.ldp);
    uint16_t *V16 = shared ? K16 : to_bf16(c.V, n * c.a.ldv);
    size_t nout = (size_t)(nh * nt * c.a.dv);
    omp_set_num_threads(1);
    float *f32 = run(&c, 0);
    c.a.K16 = K16, c.a.V16 = V16, c.a.P16 = P16;
    float *ref = run(&c, 1), *one = run(&c, 0);
    omp_set_num_threads(2);
    float *two = run(&c, 0);
    omp_set_num_threads(3);
    float *three = run(&c, 0);
    double e = max_err(one, ref, nout);
    g_worst = fmax(g_worst, e);
    CHECK(e <= 1e-6, "bf16 nh=%d nt=%d n=%lld dk=%d dv=%d dp=%d: error %g", nh, nt, (long long)n,
          dk, dv, dp, e);
    CHECK(!memcmp(one, two, sizeof(float) * nout), "bf16 n=%lld: 2 threads differ", (long long)n);
    CHECK(!memcmp(one, three, sizeof(float) * nout), "bf16 n=%lld: 3 threads differ", (long long)n);
    CHECK(!memcmp(one, f32, sizeof(float) * nout), "bf16 nh=%d n=%lld: not the f32 kernel's bits",
          nh, (long long)n);
    free(f32), free(ref), free(one), free(two), free(three);
    if (V16 != K16) free(V16);
    free(K16), free(P16);
    free_case(&c);
}

TEST(tile_bf16_matches_reference) {
    static const int64_t ns[] = {1, 31, 33, 70, 1100};
    static const int heads[] = {1, 8, 96};
    t_seed(43);
    g_worst = 0;
    for (int ri = 0; ri < 2; ri++)
        for (size_t h = 0; h < 3; h++)
            for (size_t k = 0; k < sizeof ns / sizeof *ns; k++) {
                if (heads[h] == 96 && ns[k] > 100 && ri == 0) continue; /* keep it quick */
                check_case_bf16(heads[h], 1, ns[k], ri ? 512 : 256, 0, 64, 1);
                if (ns[k] >= 3) check_case_bf16(heads[h], 3, ns[k], ri ? 512 : 256, 0, 64, 1);
            }
    static const int dks[] = {1, 17, 128}, dvs[] = {1, 19, 128}, dps[] = {0, 3, 64};
    for (size_t a = 0; a < 3; a++) /* K != V, odd widths, with and without P */
        check_case_bf16(2, 5, 97, dks[a], dvs[(a + 1) % 3], dps[a], 0);
    printf("  bf16 (%s): max error %.3g of max|V|\n", k3_kernels_name(), g_worst);
}

/* A row wider than the 80 KiB stage: the block is widened a few tokens at a
 * time (the sums then follow sub-blocks, so compare with the reference only). */
TEST(tile_bf16_wide_rows) {
    t_seed(44);
    tcase c = make_case(2, 2, 40, 1536, 0, 64, 1);
    uint16_t *K16 = to_bf16(c.K, 40 * c.a.ldk), *P16 = to_bf16(c.P, 40 * c.a.ldp);
    c.a.K16 = c.a.V16 = K16, c.a.P16 = P16;
    float *ref = run(&c, 1), *out = run(&c, 0);
    double e = max_err(out, ref, (size_t)(2 * 2 * 1536));
    CHECK(e <= 1e-6, "bf16 rank 1536: error %g", e);
    free(ref), free(out), free(K16), free(P16);
    free_case(&c);
}

/* ---- batch invariance --------------------------------------------------------- */

/* One cache of N tokens (absorbed: K = V = latents of width r, shared keys of
 * width 64, f32 or its bf16 copy) and queries Q[h][t] for 96 heads x VT
 * positions: query t of head h attends the first L + t tokens. */
enum { VH = 96, VT = 9, VP = 64 };

typedef struct {
    int r;
    int64_t L, N;
    float *K, *P, *Q, *QP;
    uint16_t *K16, *P16; /* NULL: an f32 cache */
} vcase;

/* Rows h0 .. h0+nh-1 x queries t0 .. t0+nt-1 over the first n cached tokens,
 * query t0 attending L + t0 of them. */
static float *vrun(const vcase *v, int nh, int h0, int nt, int t0, int64_t n, int threads) {
    k3_mla_tile_args a = {.K = v->K,
                          .V = v->K,
                          .P = v->P,
                          .K16 = v->K16,
                          .V16 = v->K16,
                          .P16 = v->P16,
                          .ldk = v->r,
                          .ldv = v->r,
                          .ldp = VP,
                          .n = n,
                          .dk = v->r,
                          .dv = v->r,
                          .dp = VP,
                          .nh = nh,
                          .nt = nt};
    a.q = v->Q + ((int64_t)h0 * VT + t0) * v->r, a.q_h = (int64_t)VT * v->r, a.q_t = v->r;
    a.qp = v->QP + ((int64_t)h0 * VT + t0) * VP, a.qp_h = (int64_t)VT * VP, a.qp_t = VP;
    a.o_h = (int64_t)nt * v->r, a.o_t = v->r;
    a.off = v->L + t0 - 1;
    a.scale = 1.0f / sqrtf((float)(v->r + VP));
    float *out = malloc(sizeof(float) * (size_t)(nh * nt * v->r));
    float *scratch = aligned_alloc(64, (k3_mla_tile_scratch(&a) * sizeof(float) + 63) / 64 * 64);
    a.out = out;
    omp_set_num_threads(threads);
    k3_mla_tile(&a, scratch, 0);
    free(scratch);
    return out;
}

/* Row (h, t) of an output of nt queries from t0 equals row (h, t) of want (a
 * decode of query t over all 96 heads), bit for bit, for every head. */
static int same_rows(const vcase *v, const float *got, int nt, int t0, int t, const float *want) {
    for (int h = 0; h < VH; h++)
        if (memcmp(got + ((int64_t)h * nt + t - t0) * v->r, want + (int64_t)h * v->r,
                   sizeof(float) * (size_t)v->r))
            return 0;
    return 1;
}

/* A row's output, bitwise, whatever else the call holds: alone, among 96
 * heads or the 24 of a TP rank, as a query of a verify pass (nt = 9, a longer
 * cache), in a decode over a cache longer than its causal length, and on 1,
 * 2 and 3 threads. */
static void check_invariance(vcase *v) {
    const char *ty = v->K16 ? "bf16" : "f32";
    long long L = (long long)v->L;
    float *ver[4] = {0};
    for (int th = 1; th <= 3; th++) ver[th] = vrun(v, VH, 0, VT, 0, v->L + VT - 1, th);
    for (int t = 0; t < VT; t += VT - 1) { /* the first and the last query of the pass */
        int64_t len = v->L + t;
        float *dec = vrun(v, VH, 0, 1, t, len, 1);
        for (int th = 1; th <= 3; th++) {
            float *d = vrun(v, VH, 0, 1, t, len, th), *lng = vrun(v, VH, 0, 1, t, v->N, th);
            CHECK(!memcmp(d, dec, sizeof(float) * (size_t)(VH * v->r)),
                  "%s r=%d L=%lld t=%d: decode on %d threads differs", ty, v->r, L, t, th);
            CHECK(same_rows(v, lng, 1, t, t, dec),
                  "%s r=%d L=%lld t=%d: decode over %lld cached tokens (%d threads) differs", ty,
                  v->r, L, t, (long long)v->N, th);
            CHECK(same_rows(v, ver[th], VT, 0, t, dec),
                  "%s r=%d L=%lld: query %d of a verify pass (%d threads) differs from its decode",
                  ty, v->r, L, t, th);
            free(d), free(lng);
        }
        float *tp = vrun(v, 24, 72, 1, t, len, 2); /* heads 72..95: the last rank of TP4 */
        CHECK(!memcmp(tp, dec + 72 * v->r, sizeof(float) * (size_t)(24 * v->r)),
              "%s r=%d L=%lld t=%d: 24 heads differ from the same heads among 96", ty, v->r, L, t);
        static const int alone[] = {0, 37, 95};
        for (int k = 0; k < 3; k++) {
            float *one = vrun(v, 1, alone[k], 1, t, len, 1);
            CHECK(!memcmp(one, dec + alone[k] * v->r, sizeof(float) * (size_t)v->r),
                  "%s r=%d L=%lld t=%d: head %d alone differs from it among 96", ty, v->r, L, t,
                  alone[k]);
            free(one);
        }
        free(tp), free(dec);
    }
    for (int th = 1; th <= 3; th++) free(ver[th]);
}

/* Cache lengths around the split boundary and a single cached token, f32 and
 * bf16, ranks 256 and 512. */
TEST(tile_row_is_batch_invariant) {
    const int64_t S = K3_TILE_SPLIT, Ls[] = {1, S - 1, S, S + 1, 3 * S + 5};
    t_seed(45);
    for (int ri = 0; ri < 2; ri++)
        for (size_t k = 0; k < sizeof Ls / sizeof *Ls; k++) {
            vcase v = {.r = ri ? 512 : 256, .L = Ls[k]};
            v.N = v.L + S + VT; /* the longer cache reaches a split past the longest query */
            v.K = rand_floats(v.N * v.r, 1), v.P = rand_floats(v.N * VP, 1);
            v.Q = rand_floats((int64_t)VH * VT * v.r, 1), v.QP = rand_floats(VH * VT * VP, 1);
            check_invariance(&v);
            v.K16 = to_bf16(v.K, v.N * v.r), v.P16 = to_bf16(v.P, v.N * VP);
            check_invariance(&v);
            free(v.K), free(v.P), free(v.Q), free(v.QP), free(v.K16), free(v.P16);
        }
}

/* Rows in batches (the partials' cap lowered to one group of rows, 18
 * batches of a verify pass): the same bits as one batch, on 1 and 3 threads,
 * in a smaller scratch. */
TEST(tile_row_batches_change_no_bits) {
    t_seed(46);
    vcase v = {.r = 256, .L = 3 * K3_TILE_SPLIT + 5};
    v.N = v.L + VT - 1;
    v.K = rand_floats(v.N * v.r, 1), v.P = rand_floats(v.N * VP, 1);
    v.Q = rand_floats((int64_t)VH * VT * v.r, 1), v.QP = rand_floats(VH * VT * VP, 1);
    k3_mla_tile_args a = {.n = v.N, .nh = VH, .nt = VT, .dk = v.r, .dv = v.r, .dp = VP};
    size_t whole = k3_mla_tile_scratch(&a);
    float *one = vrun(&v, VH, 0, VT, 0, v.N, 1);
    int64_t cap = k3_mla_tile_part_cap;
    k3_mla_tile_part_cap = 1;
    size_t batched = k3_mla_tile_scratch(&a);
    CHECK(batched < whole / 3, "scratch %zu floats in batches, %zu in one", batched, whole);
    for (int th = 1; th <= 3; th += 2) {
        float *b = vrun(&v, VH, 0, VT, 0, v.N, th);
        CHECK(!memcmp(b, one, sizeof(float) * (size_t)(VH * VT * v.r)),
              "rows in batches differ (%d threads)", th);
        free(b);
    }
    k3_mla_tile_part_cap = cap;
    free(one), free(v.K), free(v.P), free(v.Q), free(v.QP);
}

int main(void) {
    RUN(tile_absorbed_matches_reference);
    RUN(tile_expanded_odd_widths);
    RUN(tile_sequences_of_different_lengths);
    RUN(tile_bf16_matches_reference);
    RUN(tile_bf16_wide_rows);
    RUN(tile_row_is_batch_invariant);
    RUN(tile_row_batches_change_no_bits);
    if (k3_kernels_active() == K3_KERNELS_AVX512) { /* the AVX2 tiles too */
        k3_kernels_set_mode(K3_KERNELS_AVX2);
        RUN(tile_absorbed_matches_reference);
        RUN(tile_expanded_odd_widths);
        RUN(tile_bf16_matches_reference);
        RUN(tile_bf16_wide_rows);
        RUN(tile_row_is_batch_invariant);
        k3_kernels_set_mode(K3_KERNELS_AUTO);
    }
    return t_done();
}
