/* test_kernels_i8.c — the opt-in int8-activation decode path (kernels/matvec_i8.h).
 *
 * - the AVX-512 activation quantizer is bitwise the scalar one (ties, zero
 *   blocks, tiny and huge blocks);
 * - the VNNI kernel equals the scalar reference of the same arithmetic:
 *   bitwise on data where every float step is exact (power-of-two scales,
 *   integer activations), within f32 accumulation rounding on random data,
 *   for MLX affine 2/4/8 bits x group 32/64/128 x bf16/f16/f32 scales and
 *   MXFP4, odd row counts, column counts ending inside a 64-byte chunk;
 * - the reference is within the int8 rounding bound of the exact f32 product:
 *   |y - W x| <= sum_b (d_b / 2) sum_{c in b} |w_c| (+ f32 rounding);
 * - 2 threads give bitwise the 1-thread result;
 * - the column-block product is bitwise k3_matvec_i8 on each block's view;
 * - MXFP4 views narrower than 256 columns keep f32 activations;
 * - the switch: off by default, k3_matvec unchanged when off and routed to
 *   the kernel when on, unsupported formats and K3_KERNELS=avx2 fall back.
 * Kernel checks are skipped (with a note) on CPUs without AVX-512 VNNI. */
#include "kernels/runtime.h"
#include "kernels/matmul.h"
#include "kernels/matvec_i8.h"
#include "quant/dtype.h"
#include "colblocks_check.h"
#include "helpers.h"
#include "t.h"

#include <omp.h>
#include <stdint.h>

/* Scale and bias of group g: random, or powers of two when `exact`. */
static void affine_group_params(int exact, int64_t g, float *s, float *b) {
    if (exact) {
        *s = ldexpf(1.0f, -8 + (int)(g % 2));
        *b = g % 3 ? -0.125f : 0.0625f;
    } else {
        *s = (float)(0.01 + 0.02 * t_rand());
        *b = (float)(0.5 * t_rand());
        if (g % 7 == 5) *s *= 1e-6f, *b *= 1e-6f; /* a group of tiny weights */
    }
}

/* A random matrix (fmt MXFP4 or AFFINE) with 5 bytes of row padding; exact: scales and
 * biases powers of two (owned_mat.h's make_mat has neither option). */
static owned_mat make_i8_mat(k3_wfmt fmt, int64_t R, int64_t K, int bits, int group, k3_wfmt sfmt,
                             int exact) {
    owned_mat m = {0};
    m.w.fmt = fmt;
    m.w.rows = R;
    m.w.cols = K;
    m.w.bits = fmt == K3_W_MXFP4 ? 4 : bits;
    m.w.group = group;
    m.w.scale_fmt = sfmt;
    m.w.row_stride = (size_t)K * (size_t)m.w.bits / 8 + 5;
    m.data = malloc(m.w.row_stride * (size_t)R + 1);
    for (size_t i = 0; i < m.w.row_stride * (size_t)R; i++)
        m.data[i] = (uint8_t)(t_rand() * 128 + 128);
    m.w.data = m.data;
    const int64_t ng = K / group;
    if (fmt == K3_W_MXFP4) {
        m.w.scale_stride = (size_t)ng + 3;
        m.scales = malloc(m.w.scale_stride * (size_t)R + 1);
        for (size_t i = 0; i < m.w.scale_stride * (size_t)R; i++)
            m.scales[i] = (uint8_t)(124 + (int)(t_rand() * 4)); /* 2^-7 .. 2^1 */
        if (!exact) {
            m.scales[0] = 0; /* subnormal 2^-127 */
            if (ng > 1) m.scales[1] = 1;
        }
        m.w.scales = m.scales;
        return m;
    }
    m.w.scale_stride = m.w.bias_stride = (size_t)ng * esize(sfmt) + 2;
    m.scales = malloc(m.w.scale_stride * (size_t)R + 1);
    m.biases = malloc(m.w.bias_stride * (size_t)R + 1);
    for (int64_t r = 0; r < R; r++)
        for (int64_t g = 0; g < ng; g++) {
            float s, b;
            affine_group_params(exact, g + r, &s, &b);
            put_scalar(sfmt, m.scales + r * m.w.scale_stride, g, s);
            put_scalar(sfmt, m.biases + r * m.w.bias_stride, g, b);
        }
    m.w.scales = m.scales;
    m.w.biases = m.biases;
    return m;
}

/* A random activation with awkward blocks: all-zero, tiny, huge, single spikes. */
static void make_x(float *x, int64_t K) {
    for (int64_t c = 0; c < K; c++) {
        int64_t b = c / 32;
        double v = t_rand();
        if (b % 5 == 1)
            v = 0.0;
        else if (b % 5 == 2)
            v *= 1e-20;
        else if (b % 5 == 3)
            v *= 1e6;
        else if (b % 5 == 4 && c % 32 != 7)
            v *= 1e-3; /* one spike dominates the block */
        x[c] = (float)v;
    }
}

/* Integer activations whose block maxima are 127: d = 1 and q = x exactly. The other
 * values are small so that every partial sum of the products stays exact in f32. */
static void make_x_exact(float *x, int64_t K) {
    for (int64_t c = 0; c < K; c++) x[c] = (float)(int)(t_rand() * 4.0);
    for (int64_t b = 0; b < K / 32; b++) x[b * 32 + (b * 5) % 32] = b & 1 ? -127.0f : 127.0f;
}

/* The CPU runs the int8 kernels (AVX-512 VNNI + VBMI). */
static int has_vnni(void) {
    return k3_cpu_has_avx512_vnni() && k3_cpu_has_avx512_vbmi();
}

TEST(quantizer_simd_is_ref_bitwise) {
    if (!has_vnni()) {
        printf("  (no AVX-512 VNNI: skipped)\n");
        return;
    }
    const int64_t ns[] = {32, 96, 224, 1056};
    for (size_t t = 0; t < sizeof ns / sizeof ns[0]; t++) {
        const int64_t n = ns[t], nb = n / 32;
        float *x = malloc(sizeof(float) * (size_t)n);
        make_x(x, n);
        /* exact ties: block max 127 -> inv 1, values k + 0.5 round to even */
        for (int i = 0; i < 32; i++) x[i] = i == 0 ? 127.0f : (float)(i - 16) + 0.5f;
        int8_t q1[1056], q2[1056];
        float d1[33], d2[33];
        int32_t s1[33], s2[33];
        k3_i8_quantize_ref(x, n, q1, d1, s1);
        k3_i8_quantize_avx512(x, n, q2, d2, s2);
        CHECK(!memcmp(q1, q2, (size_t)n), "n=%lld: q differs", (long long)n);
        CHECK(!memcmp(d1, d2, sizeof(float) * (size_t)nb), "n=%lld: d differs", (long long)n);
        CHECK(!memcmp(s1, s2, sizeof(int32_t) * (size_t)nb), "n=%lld: sums differ", (long long)n);
        CHECK(q1[1] == -14 && q1[2] == -14 && q1[3] == -12, "ties to even: %d %d %d", q1[1], q1[2],
              q1[3]);
        if (nb > 1) CHECK(d1[1] == 0.0f && s1[1] == 0, "zero block: d %g", d1[1]);
        free(x);
    }
}

/* sum of |terms| of the reference sum for row r, for the f32-rounding bound. */
static double abs_terms(const k3_wmat *W, int64_t r, const float *x) {
    const int64_t K = W->cols;
    int8_t *q = malloc((size_t)K);
    float d[256], xs[256];
    int32_t is[256];
    k3_i8_quantize_ref(x, K, q, d, is);
    float *w = malloc(sizeof(float) * (size_t)K);
    k3_wmat_row(W, r, 0, K, w);
    double s = 0;
    for (int64_t c = 0; c < K; c++) s += fabs((double)w[c] * d[c / 32] * q[c]);
    if (W->fmt == K3_W_AFFINE) { /* |s code| <= |w| + |b|, and the bias terms |b xs| */
        k3_i8_group_sums(d, is, K, W->group, xs);
        const uint8_t *bi = W->biases + (size_t)r * W->bias_stride;
        for (int64_t g = 0; g < K / W->group; g++) {
            double b = fabs(k3_wmat_elt(W->scale_fmt, bi, g));
            for (int64_t c = g * W->group; c < (g + 1) * W->group; c++)
                s += b * fabs((double)d[c / 32] * q[c]) * 2;
        }
    }
    free(q);
    free(w);
    return s;
}

/* The int8 rounding bound of the reference vs the f32 product, plus f32 rounding slack. */
static double int8_bound(const k3_wmat *W, int64_t r, const float *x) {
    const int64_t K = W->cols;
    int8_t *q = malloc((size_t)K);
    float d[256];
    int32_t is[256];
    k3_i8_quantize_ref(x, K, q, d, is);
    float *w = malloc(sizeof(float) * (size_t)K);
    k3_wmat_row(W, r, 0, K, w);
    double bound = 0, slack = 0;
    for (int64_t c = 0; c < K; c++) {
        bound += d[c / 32] / 2 * (1 + 1e-6) * fabs(w[c]);
        slack += fabs((double)w[c] * x[c]);
    }
    free(q);
    free(w);
    return bound + 1e-5 * slack + abs_terms(W, r, x) * 1e-6 + 1e-35;
}

static int n_checked;

/* SIMD vs reference (tol 0: bitwise), threads 1 vs 2, reference vs f32 within the bound. */
static void check_mat(const char *what, const k3_wmat *W, int exact) {
    const int64_t R = W->rows, K = W->cols;
    float *x = malloc(sizeof(float) * (size_t)K);
    float *ref = malloc(sizeof(float) * (size_t)R), *y1 = malloc(sizeof(float) * (size_t)R),
          *y2 = malloc(sizeof(float) * (size_t)R), *f32 = malloc(sizeof(float) * (size_t)R);
    if (exact)
        make_x_exact(x, K);
    else
        make_x(x, K);
    k3_matvec_i8_ref(W, x, ref);
    k3_matvec_ref(W, x, f32);
    omp_set_num_threads(1);
    k3_matvec_i8(W, x, y1);
    omp_set_num_threads(2);
    k3_matvec_i8(W, x, y2);
    int bad = 0;
    for (int64_t r = 0; r < R && bad < 3; r++) {
        double tol = exact ? 0.0 : 1e-6 * sqrt((double)K / 16 + 8) * abs_terms(W, r, x) + 1e-38;
        double e = fabs((double)y1[r] - ref[r]);
        if (!(e <= tol)) {
            bad++;
            CHECK(0, "%s R=%lld K=%lld row %lld: simd %.9g ref %.9g (tol %.3g)", what, (long long)R,
                  (long long)K, (long long)r, y1[r], ref[r], tol);
        }
        double b = int8_bound(W, r, x), e8 = fabs((double)ref[r] - f32[r]);
        if (!(e8 <= b)) {
            bad++;
            CHECK(0, "%s R=%lld K=%lld row %lld: int8 ref %.9g f32 %.9g (bound %.3g)", what,
                  (long long)R, (long long)K, (long long)r, ref[r], f32[r], b);
        }
    }
    CHECK(!memcmp(y1, y2, sizeof(float) * (size_t)R), "%s R=%lld K=%lld: 2 threads differ", what,
          (long long)R, (long long)K);
    n_checked++;
    free(x);
    free(ref);
    free(y1);
    free(y2);
    free(f32);
}

/* Column counts for a group: several groups, and for group 32 counts that end inside a chunk. */
static void cols_for(int group, int64_t out[4]) {
    out[0] = group;
    out[1] = 3 * group;
    out[2] = group == 32 ? 32 * 7 : 5 * group;
    out[3] = group == 32 ? 32 * 9 : 7 * group;
}

TEST(affine_simd_vs_ref_every_width_group_scale_type) {
    if (!has_vnni()) {
        printf("  (no AVX-512 VNNI: skipped)\n");
        return;
    }
    const int bits[] = {2, 3, 4, 5, 6, 8}, groups[] = {32, 64, 128};
    const k3_wfmt sf[] = {K3_W_BF16, K3_W_F16, K3_W_F32};
    const int64_t rows[] = {1, 7, 37};
    for (int b = 0; b < 6; b++)
        for (int g = 0; g < 3; g++)
            for (int s = 0; s < 3; s++) {
                int64_t cols[4];
                cols_for(groups[g], cols);
                for (int i = 0; i < 4; i++)
                    for (int exact = 0; exact < 2; exact++) {
                        char what[80];
                        snprintf(what, sizeof what, "affine%d/%d/%s%s", bits[b], groups[g],
                                 k3_wfmt_name(sf[s]), exact ? " exact" : "");
                        owned_mat m = make_i8_mat(K3_W_AFFINE, rows[(i + s) % 3], cols[i], bits[b],
                                                  groups[g], sf[s], exact);
                        check_mat(what, &m.w, exact);
                        free_mat(&m);
                    }
            }
}

TEST(mxfp4_simd_vs_ref) {
    if (!has_vnni()) {
        printf("  (no AVX-512 VNNI: skipped)\n");
        return;
    }
    const int64_t shapes[][2] = {{1, 32}, {7, 96}, {37, 224}, {3, 1056}, {61, 64}, {5, 160}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int exact = 0; exact < 2; exact++) {
            owned_mat m =
                make_i8_mat(K3_W_MXFP4, shapes[s][0], shapes[s][1], 4, 32, K3_W_F32, exact);
            check_mat(exact ? "mxfp4 exact" : "mxfp4", &m.w, exact);
            free_mat(&m);
        }
}

TEST(threads_bitwise_on_parallel_shapes) {
    if (!has_vnni()) {
        printf("  (no AVX-512 VNNI: skipped)\n");
        return;
    }
    /* big enough for k3_parallel_rows to split (>= 32768 weights) */
    owned_mat a = make_i8_mat(K3_W_AFFINE, 301, 1024, 4, 64, K3_W_BF16, 0);
    check_mat("affine4/64 301x1024", &a.w, 0);
    owned_mat b = make_i8_mat(K3_W_AFFINE, 129, 2080, 2, 32, K3_W_F16, 0);
    check_mat("affine2/32 129x2080", &b.w, 0);
    owned_mat c = make_i8_mat(K3_W_MXFP4, 211, 992, 4, 32, K3_W_F32, 0);
    check_mat("mxfp4 211x992", &c.w, 0);
    owned_mat d = make_i8_mat(K3_W_AFFINE, 97, 1056, 6, 32, K3_W_BF16, 0);
    check_mat("affine6/32 97x1056", &d.w, 0);
    free_mat(&d);
    free_mat(&a);
    free_mat(&b);
    free_mat(&c);
}

/* k3_matvec_colblocks_serial on the int8 path == k3_matvec_i8 on each block's
 * column view, bitwise: every width (2..8 bits, groups 32/64/128) and MXFP4,
 * 1..8 and 16 blocks whose width is whole groups (and 64-byte chunks that end inside a
 * block; and blocks of at most a chunk, several to a chunk), 26 rows of a row view
 * (rows not a multiple of four), up to 16 blocks; past 16 the plain per-block route. */
TEST(colblocks_bitwise_per_block) {
    if (!has_vnni()) {
        printf("  (no AVX-512 VNNI: skipped)\n");
        return;
    }
    static const struct {
        k3_wfmt fmt;
        int bits, group;
        int64_t K;
    } cases[] = {{K3_W_AFFINE, 4, 64, 8 * 128},
                 {K3_W_AFFINE, 8, 32, 8 * 96},
                 {K3_W_AFFINE, 2, 128, 8 * 128},
                 {K3_W_AFFINE, 3, 32, 6 * 96},
                 {K3_W_AFFINE, 5, 64, 4 * 192},
                 {K3_W_AFFINE, 6, 32, 8 * 64},
                 {K3_W_MXFP4, 4, 32, 8 * 256},
                 {K3_W_MXFP4, 4, 32, 20 * 256},
                 {K3_W_AFFINE, 4, 32, 20 * 32},
                 /* narrow blocks (1, 2, 4 or 8 to a chunk: i8_narrow_rows) at every width */
                 {K3_W_AFFINE, 4, 64, 8 * 64},
                 {K3_W_AFFINE, 4, 32, 16 * 32},
                 {K3_W_AFFINE, 8, 32, 16 * 32},
                 {K3_W_AFFINE, 8, 64, 4 * 64},
                 {K3_W_AFFINE, 2, 32, 16 * 32},
                 {K3_W_AFFINE, 2, 64, 8 * 64},
                 {K3_W_AFFINE, 3, 32, 16 * 32},
                 {K3_W_AFFINE, 5, 32, 8 * 32},
                 {K3_W_AFFINE, 6, 64, 4 * 64},
                 {K3_W_AFFINE, 4, 128, 8 * 128}};
    k3_act_int8_set(1);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        for (int nb = 1; nb <= 20; nb++) {
            const int64_t K = cases[i].K, R = 29;
            /* 16 MXFP4 blocks of under 256 columns take the f32 kernel (narrow_mxfp4...) */
            const int n16 = nb == 16 && cases[i].fmt == K3_W_AFFINE;
            if (K % nb || (K / nb) % cases[i].group || (nb > 8 && !n16 && nb != 20)) continue;
            owned_mat m =
                make_i8_mat(cases[i].fmt, R, K, cases[i].bits, cases[i].group, K3_W_BF16, 0);
            k3_wmat W = k3_wmat_rows(&m.w, 3, R - 3);
            float *x = malloc(sizeof(float) * (size_t)K);
            make_x(x, K);
            const int bad = colblocks_first_diff(&W, nb, x, k3_matvec_i8);
            CHECK(bad < 0, "%s/%d K %lld nb %d block %d differs", k3_wfmt_name(cases[i].fmt),
                  cases[i].bits, (long long)K, nb, bad);
            n_checked++;
            free(x);
            free_mat(&m);
        }
    k3_act_int8_set(-1);
}

/* k3_matvec_serial with f32 activations whatever the switch says. */
static void matvec_f32(const k3_wmat *W, const float *x, float *y) {
    k3_act_int8_set(0);
    k3_matvec_serial(W, x, y);
    k3_act_int8_set(1);
}

/* MXFP4 views narrower than 256 columns keep f32 activations (matvec_i8.c):
 * under the switch, k3_i8_supports says no for them and yes from 256 on, and
 * the column-block product of blocks of 32..128 columns gives the f32 path's
 * bits, block by block. */
TEST(narrow_mxfp4_keeps_f32) {
    const int64_t R = 29, K = 256;
    owned_mat m = make_i8_mat(K3_W_MXFP4, R, K, 4, 32, K3_W_BF16, 0);
    float x[256];
    make_x(x, K);
    k3_act_int8_set(1);
    k3_wmat narrow = k3_wmat_cols(&m.w, 0, K - 32);
    CHECK(!k3_i8_supports(&narrow), "224 MXFP4 columns stay f32");
    CHECK(k3_i8_supports(&m.w) == has_vnni(), "256 MXFP4 columns: int8 iff VNNI");
    for (int nb = 2; nb <= 8; nb *= 2) {
        const int bad = colblocks_first_diff(&m.w, nb, x, matvec_f32);
        CHECK(bad < 0, "nb %d: block %d is not the f32 path's", nb, bad);
    }
    k3_act_int8_set(-1);
    free_mat(&m);
}

TEST(switch_and_fallbacks) {
    k3_act_int8_set(0);
    owned_mat m = make_i8_mat(K3_W_AFFINE, 33, 256, 4, 32, K3_W_BF16, 0);
    CHECK(!k3_i8_supports(&m.w), "off must mean unsupported");
    float x[256], y0[33], y0a[33], y1[33], yi[33], yf[33];
    make_x(x, 256);
    k3_matvec(&m.w, x, y0);
    k3_kernels_set_mode(K3_KERNELS_AVX2); /* its f32 kernel, for the avx2-mode check below */
    k3_matvec(&m.w, x, y0a);
    k3_kernels_set_mode(K3_KERNELS_AUTO);
    k3_act_int8_set(1);
    CHECK(k3_i8_supports(&m.w) == has_vnni(), "on: supported iff VNNI");
    k3_matvec(&m.w, x, y1);
    if (has_vnni()) {
        k3_matvec_i8(&m.w, x, yi);
        CHECK(!memcmp(y1, yi, sizeof y1), "k3_matvec on: the int8 kernel");
        CHECK(memcmp(y1, y0, sizeof y1) != 0, "int8 results differ from f32 ones");
    }
    owned_mat m3 = make_i8_mat(K3_W_AFFINE, 3, 192, 3, 64, K3_W_BF16, 0);
    CHECK(k3_i8_format_ok(&m3.w) && k3_i8_supports(&m3.w) == has_vnni(), "3-bit kernel");
    owned_mat m6 = make_i8_mat(K3_W_AFFINE, 3, 192, 7, 64, K3_W_BF16, 0);
    CHECK(!k3_i8_supports(&m6.w) && !k3_i8_format_ok(&m6.w), "7-bit has no int8 kernel");
    k3_wmat f = {.fmt = K3_W_BF16, .rows = 1, .cols = 64};
    CHECK(!k3_i8_supports(&f), "bf16 weights keep f32 activations");
    k3_kernels_set_mode(K3_KERNELS_AVX2);
    CHECK(!k3_i8_supports(&m.w), "K3_KERNELS=avx2 turns the int8 path off");
    k3_matvec(&m.w, x, yf);
    CHECK(!memcmp(yf, y0a, sizeof yf) || !k3_cpu_has_avx2(), "avx2 mode: f32 activations");
    k3_kernels_set_mode(K3_KERNELS_AUTO);
    k3_act_int8_set(0);
    k3_matvec(&m.w, x, yf);
    CHECK(!memcmp(yf, y0, sizeof yf), "off again: bitwise the f32 result");
    k3_act_int8_set(-1);
    free_mat(&m);
    free_mat(&m3);
    free_mat(&m6);
}

int main(void) {
    RUN(quantizer_simd_is_ref_bitwise);
    RUN(affine_simd_vs_ref_every_width_group_scale_type);
    RUN(mxfp4_simd_vs_ref);
    RUN(threads_bitwise_on_parallel_shapes);
    RUN(colblocks_bitwise_per_block);
    RUN(narrow_mxfp4_keeps_f32);
    RUN(switch_and_fallbacks);
    printf("  %d matrices checked\n", n_checked);
    return t_done();
}
