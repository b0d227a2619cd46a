/* test_model_moe.c — the one-region MoE and split products against their
 * straightforward forms, bit for bit.
 *
 * k3_rowpar_matmul (work items over column blocks and row chunks, one
 * parallel region) must equal the composition it replaces: k3_matmul on each
 * column-block view, then k3_tree_reduce. k3_routed_experts (blocks in one
 * region, serial kernels) must equal k3_routed_experts_ref (the loop over
 * blocks and experts with the threaded kernels) on real fixtures, with the
 * few-token kernel on and off, and with 1 and 2 threads. With it off, the
 * reference is the pre-parallel code exactly. k3_mlp_partial for one token
 * (gate and up in one region) must equal two k3_matvec calls + SiTU + the
 * blocked down product. */
#include "k3.h"
#include "kernels/matmul.h"
#include "model/moe.h"
#include "model/ops.h"
#include "model/rowpar.h"
#include "gen/synth.h"
#include "quant/dtype.h"
#include "helpers.h"
#include "t.h"

#include <jansson.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <stdint.h>

static uint64_t g_rng = 0x9e3779b97f4a7c15ull;

static double rnd(void) { /* uniform in [-1, 1) */
    g_rng = g_rng * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(g_rng >> 11) / (double)(1ull << 52) - 1.0;
}

/* The composition k3_rowpar_matmul replaces: a k3_matmul per column block
 * (X's block copied out), then the canonical tree. */
static void rowpar_composed(int nb, const k3_wmat *W, const float *X, int64_t T, float *Y) {
    int64_t bc = W->cols / nb, R = W->rows;
    float *xb = malloc(sizeof(float) * (size_t)(T * bc));
    float *leaves = malloc(sizeof(float) * (size_t)(nb * T * R)), *leaf[K3_ROWPAR_BLOCKS];
    for (int b = 0; b < nb; b++) {
        k3_wmat Wb = k3_wmat_cols(W, b * bc, bc);
        for (int64_t t = 0; t < T; t++)
            memcpy(xb + t * bc, X + t * W->cols + b * bc, sizeof(float) * (size_t)bc);
        leaf[b] = leaves + (int64_t)b * T * R;
        k3_matmul(&Wb, xb, T, leaf[b]);
    }
    k3_tree_reduce(leaf, nb, T * R);
    memcpy(Y, leaf[0], sizeof(float) * (size_t)(T * R));
    free(xb);
    free(leaves);
}

typedef struct {
    k3_wfmt fmt;
    int bits, group;
} fmt_case;

/* k3_rowpar_matmul of an R x K matrix of format f at T tokens, TP tp (a
 * rank's slice: K columns, 8/tp blocks), against the sliced composition,
 * bitwise, at 1 and 2 threads. */
static void check_rowpar(k3_model *m, fmt_case f, int64_t R, int64_t K, int64_t T, int tp) {
    owned_mat w = make_mat(f.fmt, R, K, f.bits, f.group, K3_W_F32);
    m->tp_size = tp;
    int nb = k3_rowpar_local_blocks(m, &w.w);
    CHECK(nb == 8 / tp, "%d blocks", nb);
    float *X = malloc(sizeof(float) * (size_t)(T * K)),
          *ref = malloc(sizeof(float) * (size_t)(T * R)),
          *y = malloc(sizeof(float) * (size_t)(T * R));
    for (int64_t j = 0; j < T * K; j++) X[j] = (float)rnd();
    rowpar_composed(nb, &w.w, X, T, ref);
    for (int nt = 1; nt <= 2; nt++) {
        omp_set_num_threads(nt);
        k3_rowpar_matmul(m, &w.w, X, T, y);
        CHECK(!memcmp(y, ref, sizeof(float) * (size_t)(T * R)),
              "%s %lldx%lld tp %d T %lld threads %d differs", k3_wfmt_name(f.fmt), (long long)R,
              (long long)K, tp, (long long)T, nt);
    }
    free(X), free(ref), free(y);
    free_mat(&w);
}

/* Every format, odd rows, T from decode to past the 256-token pass, TP 1 and
 * 2 (a rank's slice has half the columns and half the blocks). */
TEST(rowpar_bitwise_equals_sliced_composition) {
    const fmt_case f[] = {{K3_W_BF16, 0, 0},   {K3_W_F32, 0, 0},     {K3_W_F16, 0, 0},
                          {K3_W_MXFP4, 4, 32}, {K3_W_AFFINE, 4, 64}, {K3_W_AFFINE, 3, 32},
                          {K3_W_AFFINE, 8, 32}};
    const int64_t Ts[] = {1, 2, 5, 9, 300};
    k3_model *m = calloc(1, sizeof *m);
    int saved = omp_get_max_threads();
    for (size_t i = 0; i < sizeof f / sizeof *f; i++)
        for (int tp = 1; tp <= 2; tp++)
            for (size_t t = 0; t < sizeof Ts / sizeof *Ts; t++)
                check_rowpar(m, f[i], 37 + 16 * (int64_t)i, 512 / tp, Ts[t], tp);
    omp_set_num_threads(saved);
    free(m);
}

/* Decode on matrices wide enough that the threads claim many row groups or
 * items (rowpar.c: one token walks row groups with the blocks inside; a few
 * tokens take (block, row chunk) items): the same bits as the sliced
 * composition, at 1 and 2 threads, TP 1 and 2 (12 tokens: the few-token
 * kernel for bf16, MXFP4 and f16, the panel tile for affine). */
TEST(rowpar_decode_tokens_many_groups) {
    const fmt_case f[] = {
        {K3_W_BF16, 0, 0}, {K3_W_MXFP4, 4, 32}, {K3_W_AFFINE, 4, 64}, {K3_W_F16, 0, 0}};
    const int64_t Ts[] = {1, 3, 8, 12};
    k3_model *m = calloc(1, sizeof *m);
    int saved = omp_get_max_threads();
    for (size_t i = 0; i < sizeof f / sizeof *f; i++)
        for (int tp = 1; tp <= 2; tp++)
            for (size_t t = 0; t < sizeof Ts / sizeof *Ts; t++)
                check_rowpar(m, f[i], 517, 2048 / tp, Ts[t], tp);
    omp_set_num_threads(saved);
    free(m);
}

/* Tree sums of odd counts: k3_tree_reduce_into == k3_tree_reduce. */
TEST(tree_reduce_into_same_bits) {
    for (int n = 1; n <= 9; n++) {
        int64_t len = 1000 + 37 * n;
        float *a = malloc(sizeof(float) * (size_t)(n * len)), *b = malloc(sizeof *b * n * len);
        float *pa[16], *pb[16], *out = malloc(sizeof(float) * (size_t)len);
        for (int64_t j = 0; j < n * len; j++) a[j] = b[j] = (float)(rnd() * 1e3);
        for (int i = 0; i < n; i++) pa[i] = a + i * len, pb[i] = b + i * len;
        k3_tree_reduce(pa, n, len);
#pragma omp parallel num_threads(2)
        k3_tree_reduce_into(pb, n, len, out);
        CHECK(!memcmp(out, pa[0], sizeof(float) * (size_t)len), "n = %d", n);
        free(a), free(b), free(out);
    }
}

static const char *g_fixtures[] = {"tiny-bf16",
                                   "tiny-mxfp4",
                                   "tests/fixtures/mlx-mixed",
                                   "tests/fixtures/heads4-sharded",
                                   "tests/fixtures/plain-variants",
                                   "tests/fixtures/f32-flat-grouped"};

static k3_model *load_fixture(const char *name) {
    char dir[1024];
    if (!strncmp(name, "tests/", 6))
        snprintf(dir, sizeof dir, "%s", name);
    else
        snprintf(dir, sizeof dir, "%s/%s", t_fixtures(), name);
    k3_model *m = k3_model_load(dir, NULL);
    CHECK(m, "load %s: %s", dir, k3_errmsg());
    return m;
}

/* One MoE layer on random inputs: new vs reference, bitwise. */
static void check_routed(const k3_model *m, const k3_moe_w *w, int64_t T, const char *name) {
    const k3_config *c = m->c;
    int64_t D = c->hidden_size, L = c->routed_expert_hidden_size, X = L ? L : D;
    float *x = malloc(sizeof(float) * (size_t)(T * D)),
          *xin = malloc(sizeof(float) * (size_t)(T * X));
    for (int64_t i = 0; i < T * D; i++) x[i] = (float)rnd();
    if (L)
        k3_matmul(&w->lat_down, x, T, xin);
    else
        memcpy(xin, x, sizeof(float) * (size_t)(T * D));
    float *ref = malloc(sizeof(float) * (size_t)(T * X)),
          *y = malloc(sizeof(float) * (size_t)(T * X));
    float *nofew = malloc(sizeof(float) * (size_t)(T * X));
    for (int few = 0; few <= 8; few += 8) {
        k3_moe_set_few_tokens(few);
        omp_set_num_threads(2);
        k3_routed_experts_ref(m, w, x, xin, T, X, ref);
        if (!few) memcpy(nofew, ref, sizeof(float) * (size_t)(T * X));
        for (int nt = 1; nt <= 2; nt++) {
            omp_set_num_threads(nt);
            k3_routed_experts(m, w, x, xin, T, X, y);
            CHECK(!memcmp(y, ref, sizeof(float) * (size_t)(T * X)),
                  "%s T %lld few %d threads %d differs from the reference", name, (long long)T, few,
                  nt);
        }
    }
    double mx = 0, md = 0; /* the few-token kernel changes rounding only */
    for (int64_t i = 0; i < T * X; i++) {
        mx = fmax(mx, fabs(nofew[i]));
        md = fmax(md, fabs((double)nofew[i] - y[i]));
    }
    CHECK(md <= 1e-5 * mx + 1e-30, "%s T %lld: few-token kernel off by %g of %g", name,
          (long long)T, md, mx);
    k3_moe_set_few_tokens(8);
    free(x), free(xin), free(ref), free(y), free(nofew);
}

TEST(routed_experts_bitwise_equal_reference) {
    int saved = omp_get_max_threads();
    for (size_t f = 0; f < sizeof g_fixtures / sizeof *g_fixtures; f++) {
        k3_model *m = load_fixture(g_fixtures[f]);
        if (!m) continue;
        int done = 0;
        for (int l = 0; l < m->c->num_hidden_layers && !done; l++) {
            if (!m->L[l].is_moe) continue;
            for (int64_t T = 1; T <= 9; T++) check_routed(m, &m->L[l].moe, T, g_fixtures[f]);
            check_routed(m, &m->L[l].moe, 33, g_fixtures[f]);
            done = 1;
        }
        CHECK(done, "%s has no MoE layer", g_fixtures[f]);
        k3_model_free(m);
    }
    omp_set_num_threads(saved);
}

/* Many experts per token (K3 takes 16; the fixtures take 2-3, whose sums
 * are the same in any order), 8 column blocks, bf16 and MXFP4 experts: the
 * one-token schedule (moe.c) must add the experts in the reference's order. */
TEST(routed_experts_many_per_token) {
    char dir[] = "/tmp/k3-test-moe-XXXXXX";
    if (!mkdtemp(dir)) {
        CHECK(0, "mkdtemp");
        return;
    }
    int saved = omp_get_max_threads();
    for (int mx = 0; mx <= 1; mx++) {
        k3_synth_opts o = {.mxfp4 = mx, .seed = 7};
        json_t *over = json_pack("{s:i, s:i, s:i, s:i}", "num_experts", 24, "num_experts_per_token",
                                 12, "moe_intermediate_size", 256, "routed_expert_hidden_size", 64);
        json_t *cfg = k3_synth_config("tiny", over, &o);
        CHECK(cfg && !k3_synth_write(dir, cfg, &o), "synth: %s", k3_errmsg());
        json_decref(over), json_decref(cfg);
        k3_model *m = k3_model_load(dir, NULL);
        CHECK(m, "load: %s", k3_errmsg());
        if (!m) break;
        for (int l = 0; l < m->c->num_hidden_layers; l++)
            if (m->L[l].is_moe) {
                CHECK(k3_rowpar_local_blocks(m, &m->L[l].moe.ed[0]) == 8, "blocks");
                for (int64_t T = 1; T <= 3; T++)
                    check_routed(m, &m->L[l].moe, T, mx ? "synth mxfp4" : "synth bf16");
                break;
            }
        k3_model_free(m);
    }
    omp_set_num_threads(saved);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    CHECK(!system(cmd), "rm %s", dir);
}

/* One token of a dense MLP large enough for the one-region gate+up path:
 * the same bits as two k3_matvec calls + SiTU + the blocked down product. */
TEST(mlp_one_token_bitwise) {
    k3_config cfg = {0};
    cfg.situ_beta = 4.0;
    cfg.situ_linear_beta = 25.0;
    k3_model *m = calloc(1, sizeof *m);
    m->c = &cfg;
    int saved = omp_get_max_threads();
    const k3_wfmt fmts[] = {K3_W_BF16, K3_W_AFFINE};
    for (int f = 0; f < 2; f++) {
        int64_t D = 256, I = 333;
        owned_mat gm = make_mat(fmts[f], I, D, 4, 64, K3_W_F32),
                  um = make_mat(fmts[f], I, D, 4, 64, K3_W_F32),
                  dm = make_mat(K3_W_BF16, D, I, 0, 0, K3_W_F32);
        k3_mlp_w w = {gm.w, um.w, dm.w};
        float *x = malloc(sizeof(float) * (size_t)D), *g = malloc(sizeof(float) * (size_t)I);
        float *u = malloc(sizeof(float) * (size_t)I), *ref = malloc(sizeof(float) * (size_t)D);
        float *y = malloc(sizeof(float) * (size_t)D);
        for (int64_t i = 0; i < D; i++) x[i] = (float)rnd();
        k3_matvec(&w.gate, x, g);
        k3_matvec(&w.up, x, u);
        k3_situ_vec(u, g, I, (float)cfg.situ_beta, (float)cfg.situ_linear_beta);
        k3_rowpar_matmul(m, &w.down, u, 1, ref);
        for (int nt = 1; nt <= 2; nt++) {
            omp_set_num_threads(nt);
            k3_mlp_partial(m, &w, x, 1, y);
            CHECK(!memcmp(y, ref, sizeof(float) * (size_t)D), "format %d threads %d", f, nt);
        }
        free(x), free(g), free(u), free(ref), free(y);
        free_mat(&gm), free_mat(&um), free_mat(&dm);
    }
    omp_set_num_threads(saved);
    free(m);
}

int main(void) {
    RUN(rowpar_bitwise_equals_sliced_composition);
    RUN(rowpar_decode_tokens_many_groups);
    RUN(routed_experts_many_per_token);
    RUN(tree_reduce_into_same_bits);
    RUN(routed_experts_bitwise_equal_reference);
    RUN(mlp_one_token_bitwise);
    return t_done();
}
