/* test_kernels_matmul.c — every AVX2 kernel against the scalar reference.
 *
 * Random weights in every format (f32/f16/bf16, MXFP4, affine bits 2..8 x
 * group 32/64/128 x scale type bf16/f16/f32) with awkward shapes: odd row
 * counts, K not a multiple of 8/32/64/256 for float formats, odd token counts,
 * padded row strides and column-sliced views. Products must match
 * k3_matmul_ref within a bound derived from f32 accumulation, and threaded
 * products must be bitwise identical to single-threaded ones (each output is
 * computed by the same instruction sequence whatever the row split). Where
 * the CPU has AVX-512 the quantized decode kernels run in both the AVX-512
 * and the forced AVX2-only family, and the AVX-512 prefill tile must give
 * the AVX2 tile's bits. The serial entries must give the threaded
 * bits, and the few-token kernel must be within the same bound with a
 * per-token result that does not depend on T. */
#include "kernels/avx512.h"
#include "kernels/runtime.h"
#include "kernels/matmul.h"
#include "quant/dtype.h"
#include "colblocks_check.h"
#include "helpers.h"
#include "t.h"

#include <omp.h>
#include <stdint.h>

/* Bound on |fast - ref| per output: f32 accumulation of K products. */
static void abs_products(const k3_wmat *W, const float *X, int64_t T, double *bound) {
    float *row = malloc(sizeof(float) * (size_t)(W->cols + 1));
    for (int64_t r = 0; r < W->rows; r++) {
        k3_wmat_row(W, r, 0, W->cols, row);
        for (int64_t t = 0; t < T; t++) {
            double s = 0;
            for (int64_t c = 0; c < W->cols; c++) s += fabs((double)row[c] * X[t * W->cols + c]);
            bound[t * W->rows + r] = 2e-6 * sqrt((double)W->cols + 1) * s + 1e-30;
        }
    }
    free(row);
}

static int n_compared;

/* |y - ref| within the f32-accumulation bound for every output. */
static void within_bound(const char *what, const k3_wmat *W, int64_t T, const char *kind,
                         const float *y, const float *ref, const double *bound) {
    int bad = 0;
    for (int64_t i = 0; i < T * W->rows && bad < 3; i++) {
        double d = fabs((double)y[i] - (double)ref[i]);
        if (!(d <= bound[i])) {
            bad++;
            CHECK(0, "%s R=%lld K=%lld T=%lld: out %lld %s %.9g ref %.9g (bound %.3g)", what,
                  (long long)W->rows, (long long)W->cols, (long long)T, (long long)i, kind, y[i],
                  ref[i], bound[i]);
        }
    }
}

/* The serial entries give the threaded bits (y); the few-token kernel is
 * within the bound and its token t does not depend on T (bitwise equal to a
 * one-token call on that token), checked with 1 and 2 threads. */
static void check_serial_and_few(const char *what, const k3_wmat *W, const float *X, int64_t T,
                                 const float *y, const float *ref, const double *bound) {
    int64_t R = W->rows, K = W->cols;
    float *ys = malloc(sizeof(float) * (size_t)(T * R)),
          *yf = malloc(sizeof(float) * (size_t)(T * R));
    float *y1 = malloc(sizeof(float) * (size_t)R);
    omp_set_num_threads(2);
    if (T == 1)
        k3_matvec_serial(W, X, ys);
    else
        k3_matmul_serial(W, X, T, ys);
    CHECK(memcmp(ys, y, sizeof(float) * (size_t)(T * R)) == 0,
          "%s R=%lld K=%lld T=%lld: serial entry differs from the threaded one", what, (long long)R,
          (long long)K, (long long)T);
    for (int nt = 1; nt <= 2; nt++) {
        omp_set_num_threads(nt);
        k3_matmul_few(W, X, T, yf);
        within_bound(what, W, T, "few", yf, ref, bound);
        for (int64_t t = 0; t<T; t += T> 2 ? T - 1 : 1) {
            k3_matmul_few(W, X + t * K, 1, y1);
            CHECK(memcmp(y1, yf + t * R, sizeof(float) * (size_t)R) == 0,
                  "%s R=%lld K=%lld T=%lld: few-token result of token %lld depends on T", what,
                  (long long)R, (long long)K, (long long)T, (long long)t);
        }
    }
    free(ys);
    free(yf);
    free(y1);
}

/* Compare fast vs ref for matvec (T=1) and matmul, and threads 1 vs 2. */
static void check_product(const char *what, const k3_wmat *W, int64_t T) {
    int64_t R = W->rows, K = W->cols;
    float *X = malloc(sizeof(float) * (size_t)(T * K + 1));
    for (int64_t i = 0; i < T * K; i++) X[i] = (float)t_rand();
    float *ref = malloc(sizeof(float) * (size_t)(T * R)),
          *y1 = malloc(sizeof(float) * (size_t)(T * R)),
          *y2 = malloc(sizeof(float) * (size_t)(T * R));
    double *bound = malloc(sizeof(double) * (size_t)(T * R));
    abs_products(W, X, T, bound);
    k3_matmul_ref(W, X, T, ref);
    omp_set_num_threads(1);
    if (T == 1)
        k3_matvec(W, X, y1);
    else
        k3_matmul(W, X, T, y1);
    omp_set_num_threads(2);
    if (T == 1)
        k3_matvec(W, X, y2);
    else
        k3_matmul(W, X, T, y2);
    within_bound(what, W, T, "fast", y1, ref, bound);
    CHECK(memcmp(y1, y2, sizeof(float) * (size_t)(T * R)) == 0,
          "%s R=%lld K=%lld T=%lld: 2 threads differ from 1", what, (long long)R, (long long)K,
          (long long)T);
    check_serial_and_few(what, W, X, T, y1, ref, bound);
    n_compared++;
    free(X);
    free(ref);
    free(y1);
    free(y2);
    free(bound);
}

static const int64_t Ts[] = {1, 2, 3, 5, 7, 13};

TEST(avx2_available) {
    CHECK(k3_cpu_has_avx2(), "this test machine should have AVX2+FMA (CI does)");
    CHECK(!strcmp(k3_kernels_name(), k3_cpu_has_avx512() ? "avx512" : "avx2"), "%s",
          k3_kernels_name());
}

TEST(float_formats_vs_ref) {
    const int64_t shapes[][2] = {{1, 1},   {7, 13},   {33, 100}, {3, 257},
                                 {65, 64}, {5, 1031}, {50, 300}};
    const k3_wfmt fmts[] = {K3_W_F32, K3_W_F16, K3_W_BF16};
    for (int f = 0; f < 3; f++)
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
            for (size_t t = 0; t < sizeof Ts / sizeof Ts[0]; t++) {
                owned_mat m = make_mat(fmts[f], shapes[s][0], shapes[s][1], 0, 0, K3_W_F32);
                check_product(k3_wfmt_name(fmts[f]), &m.w, Ts[t]);
                free_mat(&m);
            }
}

TEST(mxfp4_vs_ref) {
    /* columns: 1..3 trailing groups after full 128-column blocks, none, one
     * block and more than a 64-group scale chunk; 67x1056 and 19x3584 are
     * large enough to be split over threads */
    const int64_t shapes[][2] = {{1, 32},  {7, 96},    {37, 224},  {3, 1056}, {61, 64},
                                 {5, 128}, {67, 1056}, {19, 3584}, {2, 2144}, {9, 2048 + 96}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (size_t t = 0; t < sizeof Ts / sizeof Ts[0]; t++) {
            owned_mat m = make_mat(K3_W_MXFP4, shapes[s][0], shapes[s][1], 4, 32, K3_W_F32);
            check_product("mxfp4", &m.w, Ts[t]);
            free_mat(&m);
        }
}

/* Rows whose every E8M0 scale is 0 (2^-127) or 1 (2^-126), so the whole
 * output is tiny and the absolute slack of the usual bound cannot hide a
 * wrong subnormal scale, and a row with a NaN scale (0xff): checked
 * relative to sum |w x|, in full 128-column blocks and trailing groups. */
TEST(mxfp4_scale_edges) {
    const int64_t Ks[] = {288, 1056, 128};
    for (int i = 0; i < 3; i++) {
        int64_t K = Ks[i];
        owned_mat m = make_mat(K3_W_MXFP4, 3, K, 4, 32, K3_W_F32);
        for (int64_t g = 0; g < K / 32; g++) {
            m.scales[g] = 0;
            m.scales[m.w.scale_stride + g] = 1;
            m.scales[2 * m.w.scale_stride + g] = 127;
        }
        m.scales[2 * m.w.scale_stride + K / 32 - 1] = 255;
        float *x = malloc(sizeof(float) * (size_t)K), y[3], ref[3];
        for (int64_t c = 0; c < K; c++) x[c] = (float)(t_rand() + 0.5);
        k3_matvec(&m.w, x, y);
        k3_matmul_ref(&m.w, x, 1, ref);
        float *row = malloc(sizeof(float) * (size_t)K);
        for (int r = 0; r < 2; r++) {
            k3_wmat_row(&m.w, r, 0, K, row);
            double s = 0;
            for (int64_t c = 0; c < K; c++) s += fabs((double)row[c] * x[c]);
            CHECK(s > 0 && fabs((double)y[r] - ref[r]) <= 1e-5 * s, "K=%lld row %d: %g vs ref %g",
                  (long long)K, r, y[r], ref[r]);
        }
        CHECK(isnan(y[2]) && isnan(ref[2]), "K=%lld: NaN scale gave %g (ref %g)", (long long)K,
              y[2], ref[2]);
        /* the same rows through the few-token kernel (3 tokens) and the
         * chunked panel (17): every token equals the one-token bound */
        const int64_t Tm[] = {3, 17};
        for (int q = 0; q < 2; q++) {
            const int64_t T = Tm[q];
            float *X = malloc(sizeof(float) * (size_t)(T * K)), Y[3 * 17];
            for (int64_t t = 0; t < T; t++) memcpy(X + t * K, x, sizeof(float) * (size_t)K);
            k3_matmul(&m.w, X, T, Y);
            for (int64_t t = 0; t < T; t++) {
                for (int r = 0; r < 2; r++) {
                    k3_wmat_row(&m.w, r, 0, K, row);
                    double s = 0;
                    for (int64_t c = 0; c < K; c++) s += fabs((double)row[c] * x[c]);
                    CHECK(fabs((double)Y[t * 3 + r] - ref[r]) <= 1e-5 * s,
                          "K=%lld T=%lld row %d: %g vs ref %g", (long long)K, (long long)T, r,
                          Y[t * 3 + r], ref[r]);
                }
                CHECK(isnan(Y[t * 3 + 2]), "K=%lld T=%lld: NaN scale gave %g", (long long)K,
                      (long long)T, Y[t * 3 + 2]);
            }
            free(X);
        }
        free(row);
        free(x);
        free_mat(&m);
    }
}

TEST(affine_every_width_group_scale_type) {
    const int bits[] = {2, 3, 4, 5, 6, 8}, groups[] = {32, 64, 128};
    const k3_wfmt sf[] = {K3_W_BF16, K3_W_F16, K3_W_F32};
    const int64_t rows[] = {1, 7, 37}, mult[] = {1, 3, 5};
    const int64_t tt[] = {1, 3, 5};
    for (int b = 0; b < 6; b++)
        for (int g = 0; g < 3; g++)
            for (int s = 0; s < 3; s++)
                for (int i = 0; i < 3; i++) {
                    char what[64];
                    snprintf(what, sizeof what, "affine%d/%d/%s", bits[b], groups[g],
                             k3_wfmt_name(sf[s]));
                    owned_mat m = make_mat(K3_W_AFFINE, rows[i], groups[g] * mult[(i + s) % 3],
                                           bits[b], groups[g], sf[s]);
                    check_product(what, &m.w, tt[(i + b) % 3]);
                    free_mat(&m);
                }
}

/* Decode (T = 1) on every affine width and group with column counts that end
 * inside a kernel block (1..9 groups: AVX-512 blocks are 64..256 columns),
 * rows below and above a thread split, in the default family (AVX-512 where
 * the CPU has it) and the forced AVX2 one; activations of 2^-100 and 2^100
 * checked relative to sum |w x| (the AVX-512 kernel scales x by powers of
 * two up to 2^15 either way). */
TEST(affine_decode_awkward_cols) {
    const int bits[] = {2, 3, 4, 5, 6, 8}, groups[] = {32, 64, 128};
    const int64_t mult[] = {1, 2, 3, 5, 7, 9}, rows[] = {1, 3, 17, 70};
    const k3_kernels_mode modes[] = {K3_KERNELS_AUTO, K3_KERNELS_AVX2};
    for (int mo = 0; mo < 2; mo++) {
        k3_kernels_set_mode(modes[mo]);
        for (int b = 0; b < 6; b++)
            for (int g = 0; g < 3; g++)
                for (int i = 0; i < 6; i++) {
                    char what[64];
                    snprintf(what, sizeof what, "affine%d/%d %s", bits[b], groups[g],
                             k3_kernels_name());
                    owned_mat m = make_mat(K3_W_AFFINE, rows[(i + b) % 4], groups[g] * mult[i],
                                           bits[b], groups[g], i % 2 ? K3_W_BF16 : K3_W_F16);
                    check_product(what, &m.w, 1);
                    int64_t K = m.w.cols, R = m.w.rows;
                    float *x = malloc(sizeof(float) * (size_t)K),
                          *row = malloc(sizeof(float) * (size_t)K);
                    float *y = malloc(sizeof(float) * (size_t)R),
                          *ref = malloc(sizeof(float) * (size_t)R);
                    for (int e = -100; e <= 100; e += 200) {
                        for (int64_t c = 0; c < K; c++) x[c] = ldexpf((float)t_rand() - 0.5f, e);
                        k3_matvec(&m.w, x, y);
                        k3_matvec_ref(&m.w, x, ref);
                        for (int64_t r = 0; r < R; r++) {
                            k3_wmat_row(&m.w, r, 0, K, row);
                            double s = 0;
                            for (int64_t c = 0; c < K; c++) s += fabs((double)row[c] * x[c]);
                            CHECK(fabs((double)y[r] - ref[r]) <= 2e-6 * sqrt((double)K + 1) * s,
                                  "%s K=%lld x~2^%d row %lld: %g vs ref %g", what, (long long)K, e,
                                  (long long)r, y[r], ref[r]);
                        }
                    }
                    free(x);
                    free(row);
                    free(y);
                    free(ref);
                    free_mat(&m);
                }
    }
    k3_kernels_set_mode(K3_KERNELS_AUTO);
}

/* Column and row slices (tensor parallelism) start at unaligned addresses. */
TEST(sliced_views_vs_ref) {
    owned_mat a = make_mat(K3_W_AFFINE, 21, 256, 3, 32, K3_W_BF16);
    k3_wmat v = k3_wmat_cols(&a.w, 64, 160);
    v = k3_wmat_rows(&v, 5, 11);
    check_product("affine3 slice", &v, 1);
    check_product("affine3 slice", &v, 6);
    owned_mat f = make_mat(K3_W_BF16, 19, 203, 0, 0, K3_W_F32);
    k3_wmat fv = k3_wmat_cols(&f.w, 3, 150);
    check_product("bf16 slice", &fv, 1);
    check_product("bf16 slice", &fv, 9);
    owned_mat x = make_mat(K3_W_MXFP4, 9, 320, 4, 32, K3_W_F32);
    k3_wmat xv = k3_wmat_cols(&x.w, 96, 192);
    check_product("mxfp4 slice", &xv, 1);
    check_product("mxfp4 slice", &xv, 4);
    free_mat(&a);
    free_mat(&f);
    free_mat(&x);
}

/* The column-block tests' formats and widths (K split into 1..8 blocks
 * where each block holds whole groups). */
typedef struct {
    k3_wfmt fmt;
    int bits, group;
    int64_t K;
} colblock_case;
static const colblock_case colblock_cases[] = {
    {K3_W_F32, 0, 0, 8 * 37},
    {K3_W_F16, 0, 0, 8 * 45},
    {K3_W_BF16, 0, 0, 8 * 203},
    {K3_W_BF16, 0, 0, 3 * 1024},
    {K3_W_BF16, 0, 0, 8 * 32},
    /* from 8192 columns the float formats go in pairs of rows */
    {K3_W_BF16, 0, 0, 8 * 1040},
    {K3_W_F16, 0, 0, 8 * 1027},
    {K3_W_MXFP4, 4, 32, 8 * 96},
    {K3_W_AFFINE, 4, 64, 8 * 128},
    {K3_W_AFFINE, 3, 32, 4 * 96},
    /* MXFP4: one group a block at 8 blocks (the bench preset's expert down);
     * 70 groups (past one 64-group scale chunk), 35, 14 and 10 a block; 1040
     * groups a row, past the AVX-512 column-block kernel's limit */
    {K3_W_MXFP4, 4, 32, 8 * 32},
    {K3_W_MXFP4, 4, 32, 70 * 32},
    {K3_W_MXFP4, 4, 32, 1040 * 32},
    /* affine 2-8 bits; 2-6 in whole 16-lane blocks of 256 / 128 / 64 columns (the
     * AVX-512 column-block kernel) and blocks that are not (per block) */
    {K3_W_AFFINE, 2, 128, 8 * 256},
    {K3_W_AFFINE, 5, 32, 8 * 64},
    {K3_W_AFFINE, 6, 64, 6 * 128},
    {K3_W_AFFINE, 4, 32, 6 * 160},
    {K3_W_AFFINE, 3, 128, 4 * 384},
    {K3_W_AFFINE, 8, 64, 8 * 128},
    {K3_W_AFFINE, 8, 32, 6 * 96},
    /* blocks ending inside a 16-lane block: K3's 2-bit expert down (8 x 384
     * columns) and the bench preset's 4-bit one (4 x 64) */
    {K3_W_AFFINE, 2, 64, 8 * 384},
    {K3_W_AFFINE, 4, 64, 4 * 64},
    /* narrow blocks, 2, 4 or 8 to a 16-lane block (AFFINE_CB_NARROW) at every width */
    {K3_W_AFFINE, 2, 32, 8 * 32},
    {K3_W_AFFINE, 2, 64, 8 * 64},
    {K3_W_AFFINE, 3, 32, 8 * 32},
    {K3_W_AFFINE, 4, 32, 8 * 32},
    {K3_W_AFFINE, 5, 32, 8 * 32},
    {K3_W_AFFINE, 6, 32, 8 * 32}};
#define N_COLBLOCK_CASES (sizeof colblock_cases / sizeof *colblock_cases)

/* k3_matvec_colblocks_serial == k3_matvec_serial on each block's column
 * view, bitwise: every format, odd rows, block widths that are not a
 * multiple of the vector width (float formats), 1..8 blocks, and a row view
 * starting mid-matrix; affine with bf16, f16 and f32 scales. */
TEST(colblocks_bitwise_per_block) {
    const colblock_case *f = colblock_cases;
    const k3_wfmt sfmt[3] = {K3_W_BF16, K3_W_F16, K3_W_F32};
    for (size_t i = 0; i < N_COLBLOCK_CASES; i++)
        for (int nb = 1; nb <= 8; nb++)
            for (int sf = 0; sf < (f[i].fmt == K3_W_AFFINE ? 3 : 1); sf++) {
                const int64_t K = f[i].K, R = 29;
                int64_t g = f[i].group ? f[i].group : 1;
                if (K % nb || (K / nb) % g) continue;
                owned_mat m = make_mat(f[i].fmt, R, K, f[i].bits, f[i].group, sfmt[sf]);
                k3_wmat W = k3_wmat_rows(&m.w, 3, R - 3);
                float *x = malloc(sizeof(float) * (size_t)K);
                for (int64_t c = 0; c < K; c++) x[c] = (float)(t_rand() * 2 - 1);
                const int bad = colblocks_first_diff(&W, nb, x, k3_matvec_serial);
                CHECK(bad < 0, "%s/%d K %lld nb %d block %d differs", k3_wfmt_name(f[i].fmt),
                      f[i].bits, (long long)K, nb, bad);
                free(x);
                free_mat(&m);
            }
}

/* A row's result does not depend on the rows computed beside it: the kernels
 * that run rows in pairs (float formats) or in groups of 8 (affine, AVX-512)
 * give each row, bitwise, what a one-row view of it gives. Odd row counts
 * and widths past the vector and group steps; K = 12300 for the float pairs'
 * wide-x case. */
TEST(rows_independent_of_neighbours) {
    const struct {
        k3_wfmt fmt;
        int bits, group;
        int64_t K;
    } c[] = {{K3_W_F32, 0, 0, 8 * 37 + 5}, {K3_W_F16, 0, 0, 203},     {K3_W_BF16, 0, 0, 12300},
             {K3_W_BF16, 0, 0, 8 * 32},    {K3_W_MXFP4, 4, 32, 224},  {K3_W_AFFINE, 4, 64, 448},
             {K3_W_AFFINE, 3, 32, 160},    {K3_W_AFFINE, 2, 64, 320}, {K3_W_AFFINE, 8, 64, 192}};
    for (size_t i = 0; i < sizeof c / sizeof *c; i++) {
        const int64_t K = c[i].K, R = 19;
        owned_mat m = make_mat(c[i].fmt, R, K, c[i].bits, c[i].group, K3_W_BF16);
        float *x = malloc(sizeof(float) * (size_t)K), all[19], one[19];
        for (int64_t j = 0; j < K; j++) x[j] = (float)(t_rand() * 2 - 1);
        k3_matvec_serial(&m.w, x, all);
        for (int64_t r = 0; r < R; r++) {
            k3_wmat v = k3_wmat_rows(&m.w, r, 1);
            k3_matvec_serial(&v, x, &one[r]);
        }
        CHECK(!memcmp(all, one, sizeof all), "%s/%d K %lld: a row differs from its one-row view",
              k3_wfmt_name(c[i].fmt), c[i].bits, (long long)K);
        free(x);
        free_mat(&m);
    }
}

/* A block that ends inside a 16-lane block never uses the next block's
 * scales: with an infinite scale in block 1's first group of some rows,
 * block 0 stays finite and equal to its column view's product (its padding
 * lanes would compute 0 * inf = NaN with the neighbour's scale). */
TEST(colblocks_partial_block_ignores_next_scales) {
    const struct {
        int bits, group, nb;
        int64_t K;
    } c[] = {{4, 32, 2, 2 * 160}, {2, 64, 8, 8 * 384}, {5, 32, 3, 3 * 96}};
    for (size_t i = 0; i < sizeof c / sizeof *c; i++) {
        const int64_t K = c[i].K, R = 21, bc = K / c[i].nb;
        owned_mat m = make_mat(K3_W_AFFINE, R, K, c[i].bits, c[i].group, K3_W_BF16);
        for (int64_t r = 0; r < R; r += 2)
            put_scalar(K3_W_BF16, m.scales + r * m.w.scale_stride, bc / c[i].group, INFINITY);
        float *x = malloc(sizeof(float) * (size_t)K);
        for (int64_t j = 0; j < K; j++) x[j] = (float)(t_rand() * 2 - 1);
        const int bad = colblocks_first_diff(&m.w, c[i].nb, x, k3_matvec_serial);
        CHECK(bad < 0, "affine %d-bit g%d nb %d: block %d differs", c[i].bits, c[i].group, c[i].nb,
              bad);
        float y[8][32];
        const float *xb[8];
        float *yb[8];
        for (int b = 0; b < c[i].nb; b++) xb[b] = x + b * bc, yb[b] = y[b];
        k3_matvec_colblocks_serial(&m.w, c[i].nb, xb, yb);
        int finite = 1;
        for (int64_t r = 0; r < R; r++) finite &= isfinite(y[0][r]);
        CHECK(finite, "affine %d-bit: block 0 took block 1's infinite scale", c[i].bits);
        free(x);
        free_mat(&m);
    }
}

/* k3_matmul_few_colblocks_serial against k3_matmul_few on each block's view,
 * bitwise: every format, 1..8 blocks, 2..9 tokens (4-token tiles and their
 * remainders), 29 - 3 rows (a row view, rows not a multiple of 16). */
TEST(few_colblocks_bitwise_per_block) {
    const colblock_case *f = colblock_cases;
    for (size_t i = 0; i < N_COLBLOCK_CASES; i++)
        for (int nb = 1; nb <= 8; nb++)
            for (int64_t T = 2; T <= 9; T += nb % 2 ? 3 : 2) {
                const int64_t K = f[i].K, R = 29;
                int64_t g = f[i].group ? f[i].group : 1;
                if (K % nb || (K / nb) % g) continue;
                owned_mat m = make_mat(f[i].fmt, R, K, f[i].bits, f[i].group, K3_W_BF16);
                k3_wmat W = k3_wmat_rows(&m.w, 3, R - 3);
                const int64_t bc = K / nb, n = W.rows;
                float *x = malloc(sizeof(float) * (size_t)(T * K));
                float *ref = malloc(sizeof(float) * (size_t)(nb * T * n)),
                      *got = malloc(sizeof(float) * (size_t)(nb * T * n));
                for (int64_t c = 0; c < T * K; c++) x[c] = (float)(t_rand() * 2 - 1);
                const float *xb[8];
                float *yb[8];
                for (int b = 0; b < nb; b++) {
                    xb[b] = x + b * T * bc; /* block b's [T, bc] */
                    yb[b] = got + b * T * n;
                    k3_wmat v = k3_wmat_cols(&W, b * bc, bc);
                    k3_matmul_few(&v, xb[b], T, ref + b * T * n);
                }
                k3_matmul_few_colblocks_serial(&W, nb, xb, T, yb);
                CHECK(!memcmp(got, ref, sizeof(float) * (size_t)(nb * T * n)),
                      "%s K %lld nb %d T %lld differs", k3_wfmt_name(f[i].fmt), (long long)K, nb,
                      (long long)T);
                free(x), free(ref), free(got);
                free_mat(&m);
            }
}

/* Bigger than the serial threshold so both threads really run. */
TEST(large_threaded_vs_ref) {
    owned_mat a = make_mat(K3_W_AFFINE, 301, 512, 4, 64, K3_W_BF16);
    check_product("affine4 large", &a.w, 1);
    check_product("affine4 large", &a.w, 17);
    owned_mat b = make_mat(K3_W_BF16, 299, 515, 0, 0, K3_W_F32);
    check_product("bf16 large", &b.w, 1);
    check_product("bf16 large", &b.w, 18);
    free_mat(&a);
    free_mat(&b);
}

/* The per-token result of k3_matmul does not depend on T within a kernel
 * class (prefill in chunks gives the same numbers as one big prefill when
 * every chunk has more than 8 tokens; on AVX-512, 2..8-token products take
 * the few-token kernel, whose results differ from the panel tile's in
 * rounding only, checked against the reference above). */
TEST(matmul_rows_independent_of_T) {
    owned_mat a = make_mat(K3_W_AFFINE, 40, 256, 5, 128, K3_W_F16);
    float X[20 * 256], Y20[20 * 40], Y9[9 * 40], Y7[7 * 40], Y3[3 * 40];
    for (int i = 0; i < 20 * 256; i++) X[i] = (float)t_rand();
    k3_matmul(&a.w, X, 20, Y20);
    k3_matmul(&a.w, X + 11 * 256, 9, Y9);
    CHECK(memcmp(Y20 + 11 * 40, Y9, sizeof Y9) == 0);
    k3_matmul(&a.w, X, 7, Y7);
    k3_matmul(&a.w, X + 4 * 256, 3, Y3);
    CHECK(memcmp(Y7 + 4 * 40, Y3, sizeof Y3) == 0);
    free_mat(&a);
}

/* The serial and few-token entries on every format for T = 1..9 (the
 * expert token counts of a prefill), odd rows, K off the vector width. */
TEST(few_tokens_every_format) {
    const int bits[] = {2, 3, 4, 5, 6, 8}, groups[] = {32, 64, 128};
    for (int64_t T = 1; T <= 9; T++) {
        const k3_wfmt ff[] = {K3_W_F32, K3_W_F16, K3_W_BF16};
        for (int f = 0; f < 3; f++) {
            owned_mat m = make_mat(ff[f], 7 + 2 * T, 203 + 8 * T, 0, 0, K3_W_F32);
            check_product(k3_wfmt_name(ff[f]), &m.w, T);
            free_mat(&m);
        }
        owned_mat x = make_mat(K3_W_MXFP4, 9 + T, 96 + 32 * (T % 3), 4, 32, K3_W_F32);
        check_product("mxfp4", &x.w, T);
        free_mat(&x);
        for (int b = 0; b < 6; b++) {
            int g = groups[(b + T) % 3];
            owned_mat a = make_mat(K3_W_AFFINE, 5 + T, g * (1 + T % 3), bits[b], g,
                                   T % 2 ? K3_W_BF16 : K3_W_F16);
            char what[48];
            snprintf(what, sizeof what, "affine%d/%d", bits[b], g);
            check_product(what, &a.w, T);
            free_mat(&a);
        }
    }
}

TEST(ref_mode_is_reachable) {
    owned_mat a = make_mat(K3_W_BF16, 5, 77, 0, 0, K3_W_F32);
    float x[77], y[5], r[5];
    for (int i = 0; i < 77; i++) x[i] = (float)t_rand();
    k3_kernels_set_mode(K3_KERNELS_REF);
    CHECK(!strcmp(k3_kernels_name(), "ref"));
    k3_matvec(&a.w, x, y);
    k3_matvec_ref(&a.w, x, r);
    CHECK(memcmp(y, r, sizeof y) == 0);
    k3_kernels_set_mode(K3_KERNELS_AUTO);
    free_mat(&a);
}

/* product(W, X, T, Y) against the AVX2 tile on the same X: bitwise equal at
 * 1 and 2 threads (1), or not (0). */
typedef void (*product_fn)(const k3_wmat *W, const float *X, int64_t T, float *Y);
static int same_bits_as_avx2(const k3_wmat *W, int64_t T, product_fn product) {
    float *X = malloc(sizeof(float) * (size_t)(T * W->cols));
    float *A = malloc(sizeof(float) * (size_t)(T * W->rows));
    float *B = malloc(sizeof(float) * (size_t)(T * W->rows));
    for (int64_t i = 0; i < T * W->cols; i++) X[i] = (float)t_rand();
    k3_kernels_set_mode(K3_KERNELS_AVX2);
    k3_matmul(W, X, T, A);
    int same = 1;
    for (int th = 1; th <= 2; th++) {
        omp_set_num_threads(th);
        memset(B, 0xff, sizeof(float) * (size_t)(T * W->rows));
        product(W, X, T, B);
        same &= memcmp(A, B, sizeof(float) * (size_t)(T * W->rows)) == 0;
    }
    k3_kernels_set_mode(K3_KERNELS_AUTO);
    n_compared++;
    free(X);
    free(A);
    free(B);
    return same;
}

static void matmul_in_avx512_mode(const k3_wmat *W, const float *X, int64_t T, float *Y) {
    k3_kernels_set_mode(K3_KERNELS_AVX512);
    k3_matmul(W, X, T, Y);
}

/* The AVX-512 prefill tile (32-row panels, 12-token tiles) against the AVX2
 * one (16 x 6): the same FMA sequence per output, so the bits must agree on
 * every format, panel tails (rows not a multiple of 8/16/32), K off the
 * vector width, token counts around the tile sizes, 1 and 2 threads. */
static int avx512_tile_same_bits(const k3_wmat *W, int64_t T) {
    return same_bits_as_avx2(W, T, matmul_in_avx512_mode);
}

TEST(matmul_avx512_bitwise_avx2) {
    const int64_t rows[] = {1, 7, 9, 31, 33, 45, 70, 129};
    /* above 8 (float formats: 16, MXFP4: 24): fewer tokens take the few-token
     * kernel (few_avx512_rows) */
    const int64_t toks[] = {9, 17, 11, 12, 13, 25, 64};
    const int bits[] = {2, 3, 4, 5, 6, 8};
    for (int i = 0; i < 8; i++) {
        int64_t R = rows[i], T = toks[i % 7];
        const k3_wfmt ff[] = {K3_W_F32, K3_W_F16, K3_W_BF16};
        for (int f = 0; f < 3; f++) {
            owned_mat m = make_mat(ff[f], R, 1 + 37 * (i + f) + (i % 3) * 64, 0, 0, K3_W_F32);
            CHECK(avx512_tile_same_bits(&m.w, T + 8), "%s R=%lld K=%lld T=%lld",
                  k3_wfmt_name(ff[f]), (long long)R, (long long)m.w.cols, (long long)T + 8);
            free_mat(&m);
        }
        owned_mat x = make_mat(K3_W_MXFP4, R, 32 * (1 + i), 4, 32, K3_W_F32);
        CHECK(avx512_tile_same_bits(&x.w, T + 16), "mxfp4 R=%lld", (long long)R);
        free_mat(&x);
        int g = 32 << (i % 3);
        owned_mat a =
            make_mat(K3_W_AFFINE, R, g * (1 + i % 4), bits[i % 6], g, i % 2 ? K3_W_BF16 : K3_W_F16);
        CHECK(avx512_tile_same_bits(&a.w, T), "affine%d/%d R=%lld", bits[i % 6], g, (long long)R);
        free_mat(&a);
    }
    owned_mat big = make_mat(K3_W_BF16, 257, 515, 0, 0, K3_W_F32); /* threaded panels */
    CHECK(avx512_tile_same_bits(&big.w, 37), "bf16 257x515 T=37");
    free_mat(&big);
    owned_mat q = make_mat(K3_W_AFFINE, 301, 512, 4, 64, K3_W_BF16);
    CHECK(avx512_tile_same_bits(&q.w, 29), "affine4 301x512 T=29");
    free_mat(&q);
    /* more than 4096 columns: the AVX-512 panel is packed and multiplied in
     * 1024-column chunks, each continuing the f32 partial sums of the last; the
     * chain per output is the AVX2 tile's, so the bits still agree (a last
     * chunk of 1..1023 columns, K off 8 for the float formats) */
    const int64_t kf[] = {4097, 5000, 4103, 6151};
    const k3_wfmt ff[] = {K3_W_F32, K3_W_F16, K3_W_BF16, K3_W_BF16};
    for (int f = 0; f < 4; f++) {
        owned_mat m = make_mat(ff[f], 33 + 6 * f, kf[f], 0, 0, K3_W_F32);
        CHECK(avx512_tile_same_bits(&m.w, 17 + 8 * f), "%s chunked K=%lld", k3_wfmt_name(ff[f]),
              (long long)kf[f]);
        free_mat(&m);
    }
    owned_mat xc = make_mat(K3_W_MXFP4, 35, 32 * 131, 4, 32, K3_W_F32);
    CHECK(avx512_tile_same_bits(&xc.w, 25), "mxfp4 chunked K=4192");
    free_mat(&xc);
    for (int i = 0; i < 6; i++) {
        int g = 32 << (i % 3);
        owned_mat a = make_mat(K3_W_AFFINE, 13 + 7 * i, g * (4096 / g + 1 + 3 * i), bits[i], g,
                               i % 2 ? K3_W_BF16 : K3_W_F16);
        CHECK(avx512_tile_same_bits(&a.w, 11 + 3 * i), "affine%d/%d chunked K=%lld", bits[i], g,
              (long long)a.w.cols);
        free_mat(&a);
    }
}

/* The token-lane product (matmul_tok_avx512.c), called directly whatever T,
 * against the AVX2 panel tile: the same FMA chain per output, so the same
 * bits, for every format, rows around its 12-row tiles and 48-row claims,
 * K off the vector width and past the 1024-column chunks, tokens around its
 * 16-lane vectors and 32-token blocks (half-empty last vectors included),
 * 1 and 2 threads. */
static int tok_same_bits(const k3_wmat *W, int64_t T) {
    return same_bits_as_avx2(W, T, k3_matmul_tok_avx512);
}

TEST(matmul_tok_avx512_bitwise_avx2) {
    /* last tiles of 1..11 rows; claims of 48 rows and less */
    const int64_t rows[] = {1, 5, 7, 11, 13, 20, 31, 46, 49, 90, 99, 130};
    const int64_t toks[] = {17, 2, 31, 32, 33, 47, 70};
    const int bits[] = {2, 3, 4, 5, 6, 8};
    for (int i = 0; i < 12; i++) {
        const int64_t R = rows[i], T = toks[i % 7];
        const k3_wfmt ff[] = {K3_W_F32, K3_W_F16, K3_W_BF16};
        for (int f = 0; f < 3; f++) {
            owned_mat m = make_mat(ff[f], R, 1 + 37 * (i + f) + (i % 3) * 64, 0, 0, K3_W_F32);
            CHECK(tok_same_bits(&m.w, T), "%s R=%lld K=%lld T=%lld", k3_wfmt_name(ff[f]),
                  (long long)R, (long long)m.w.cols, (long long)T);
            free_mat(&m);
        }
        owned_mat x = make_mat(K3_W_MXFP4, R, 32 * (1 + 3 * i), 4, 32, K3_W_F32);
        CHECK(tok_same_bits(&x.w, T), "mxfp4 R=%lld T=%lld", (long long)R, (long long)T);
        free_mat(&x);
        const int g = 32 << (i % 3);
        owned_mat a =
            make_mat(K3_W_AFFINE, R, g * (1 + i % 4), bits[i % 6], g, i % 2 ? K3_W_BF16 : K3_W_F16);
        CHECK(tok_same_bits(&a.w, T), "affine%d/%d R=%lld T=%lld", bits[i % 6], g, (long long)R,
              (long long)T);
        free_mat(&a);
    }
    /* wider than 4096 columns: 1024-column chunks continuing the partial sums */
    const int64_t kf[] = {4097, 5000, 6151};
    const k3_wfmt ff[] = {K3_W_F32, K3_W_BF16, K3_W_BF16};
    for (int f = 0; f < 3; f++) {
        owned_mat m = make_mat(ff[f], 50 + 7 * f, kf[f], 0, 0, K3_W_F32);
        CHECK(tok_same_bits(&m.w, 20 + 13 * f), "%s chunked K=%lld", k3_wfmt_name(ff[f]),
              (long long)kf[f]);
        free_mat(&m);
    }
    owned_mat xc = make_mat(K3_W_MXFP4, 61, 32 * 131, 4, 32, K3_W_F32);
    CHECK(tok_same_bits(&xc.w, 45), "mxfp4 chunked K=4192");
    free_mat(&xc);
    owned_mat ac = make_mat(K3_W_AFFINE, 29, 64 * 67, 4, 64, K3_W_BF16);
    CHECK(tok_same_bits(&ac.w, 32), "affine4/64 chunked K=4288");
    free_mat(&ac);
}

/* AVX-512 products of 2..8 tokens (MXFP4: 16; batched decode) read the weights in
 * place (matmul_few_avx512.c): within the bound of every format (the
 * checks above), and here bitwise: k3_matmul == k3_matmul_few for the same
 * T, each token equal to a one-token call, a row slice equal to those rows
 * of the whole, 1 and 2 threads, on shapes large enough to be threaded
 * with row and K tails (K % 16 != 0 for the float formats). */
static void few_rows_same_bits(const char *what, const k3_wmat *W, int64_t maxT) {
    const int64_t R = W->rows, K = W->cols;
    float *X = malloc(sizeof(float) * (size_t)(maxT * K));
    float *A = malloc(sizeof(float) * (size_t)(maxT * R)),
          *B = malloc(sizeof(float) * (size_t)(maxT * R));
    float *C = malloc(sizeof(float) * (size_t)(maxT * R));
    for (int64_t i = 0; i < maxT * K; i++) X[i] = (float)t_rand();
    const int64_t r0 = 13, nr = R - 13 - 7;
    k3_wmat v = k3_wmat_rows(W, r0, nr);
    for (int64_t T = 2; T <= maxT; T++) {
        k3_matmul_few(W, X, T, A);
        for (int th = 1; th <= 2; th++) {
            omp_set_num_threads(th);
            k3_matmul(W, X, T, B);
            CHECK(memcmp(A, B, sizeof(float) * (size_t)(T * R)) == 0,
                  "%s R=%lld K=%lld T=%lld threads %d: k3_matmul differs from k3_matmul_few", what,
                  (long long)R, (long long)K, (long long)T, th);
        }
        k3_matmul(&v, X, T, C);
        int same = 1;
        for (int64_t t = 0; t < T; t++) {
            same &= memcmp(C + t * nr, A + t * R + r0, sizeof(float) * (size_t)nr) == 0;
            k3_matmul_few(W, X + t * K, 1, B);
            same &= memcmp(B, A + t * R, sizeof(float) * (size_t)R) == 0;
        }
        CHECK(same, "%s R=%lld K=%lld T=%lld: a row slice or a single token differs", what,
              (long long)R, (long long)K, (long long)T);
        n_compared++;
    }
    free(X);
    free(A);
    free(B);
    free(C);
}

TEST(few_avx512_rows) {
    k3_kernels_set_mode(K3_KERNELS_AVX512);
    const k3_wfmt ff[] = {K3_W_F32, K3_W_F16, K3_W_BF16};
    for (int f = 0; f < 3; f++) {
        owned_mat m = make_mat(ff[f], 203, 301 + 2 * f, 0, 0, K3_W_F32);
        few_rows_same_bits(k3_wfmt_name(ff[f]), &m.w, 16);
        free_mat(&m);
    }
    owned_mat x = make_mat(K3_W_MXFP4, 157, 352, 4, 32, K3_W_F32);
    few_rows_same_bits("mxfp4", &x.w, 24); /* k3_matmul's few-token range for MXFP4 */
    /* the VBMI decode of the codes (where the CPU has it) gives the bits
     * of the plain AVX-512 one, subnormal and NaN scales included */
    for (int64_t g = 0; g < 157 * 352 / 32; g += 7) x.scales[g] = (uint8_t)(g % 3 ? g % 2 : 255);
    float *X = malloc(sizeof(float) * 16 * 352), *A = malloc(sizeof(float) * 16 * 157),
          *B = malloc(sizeof(float) * 16 * 157);
    for (int i = 0; i < 16 * 352; i++) X[i] = (float)t_rand();
    for (int64_t T = 2; T <= 16; T++) {
        k3_few_avx512_set_vbmi(0);
        k3_matmul_few(&x.w, X, T, A);
        k3_few_avx512_set_vbmi(1);
        k3_matmul_few(&x.w, X, T, B);
        CHECK(memcmp(A, B, sizeof(float) * (size_t)(T * 157)) == 0, "mxfp4 VBMI decode T=%lld",
              (long long)T);
    }
    free(X);
    free(A);
    free(B);
    free_mat(&x);
    const int bits[] = {2, 3, 4, 5, 6, 8};
    for (int b = 0; b < 6; b++) {
        int g = 32 << (b % 3);
        owned_mat a = make_mat(K3_W_AFFINE, 131, 3 * 128, bits[b], g, b % 2 ? K3_W_BF16 : K3_W_F16);
        few_rows_same_bits("affine", &a.w, 8);
        free_mat(&a);
    }
    k3_kernels_set_mode(K3_KERNELS_AUTO);
}

/* The bf16 few-token kernel (matmul_few_bf16_avx512.c: activations
 * de-interleaved per 32 columns, zero past K, tiles of 4 rows x up to 5
 * tokens (9 = 5 + 4, 13 = 5 + 4 + 4), column chunks of
 * 2048 at 4 tokens and 8192 at 1): within the reference bound, threaded ==
 * serial, token t independent of T and of row slices, on K with 1..31
 * columns past a multiple of 32, K past the chunks, rows around the 16-row
 * passes and the 64-row thread blocks, and a column view at an odd offset. */
TEST(few_bf16_avx512) {
    k3_kernels_set_mode(K3_KERNELS_AVX512);
    const int64_t Ks[] = {1, 17, 31, 32, 33, 95, 2047, 2080, 4127};
    const int64_t Rs[] = {21, 30, 33, 70, 131};
    for (int i = 0; i < 9; i++) {
        owned_mat m = make_mat(K3_W_BF16, Rs[i % 5], Ks[i], 0, 0, K3_W_F32);
        check_product("bf16 few", &m.w, 2 + i % 7);
        check_product("bf16 few", &m.w, 9 + i % 5);
        few_rows_same_bits("bf16 few", &m.w, 13);
        free_mat(&m);
    }
    owned_mat w = make_mat(K3_W_BF16, 25, 8225, 0, 0, K3_W_F32); /* past the 1-token chunk */
    check_product("bf16 8225", &w.w, 8);
    few_rows_same_bits("bf16 8225", &w.w, 3);
    free_mat(&w);
    owned_mat b = make_mat(K3_W_BF16, 90, 600, 0, 0, K3_W_F32);
    k3_wmat v = k3_wmat_cols(&b.w, 37, 501);
    check_product("bf16 column view", &v, 5);
    few_rows_same_bits("bf16 column view", &v, 8);
    free_mat(&b);
    k3_kernels_set_mode(K3_KERNELS_AUTO);
}

/* bf16 decode under AVX-512 on rows of K3_BF16_FEW_MIN_COLS columns and
 * more runs the few-token tile at T = 1, so a token's product is bitwise its
 * row of a 2..16-token product (a decode step and a verify pass agree), on
 * any thread count; below that width the row dots run (and may differ). */
TEST(bf16_decode_bitwise_few_tokens) {
    if (!k3_cpu_has_avx512()) return;
    k3_kernels_set_mode(K3_KERNELS_AVX512);
    const int64_t Ks[] = {K3_BF16_FEW_MIN_COLS, K3_BF16_FEW_MIN_COLS + 1, 2080, 7168, 8225};
    const int64_t Rs[] = {37, 16, 70, 33, 21};
    for (int i = 0; i < 5; i++) {
        owned_mat m = make_mat(K3_W_BF16, Rs[i], Ks[i], 0, 0, K3_W_F32);
        const int64_t R = Rs[i], K = Ks[i], T = 9;
        float *X = malloc(sizeof(float) * (size_t)(T * K)),
              *Y = malloc(sizeof(float) * (size_t)(T * R));
        float *y = malloc(sizeof(float) * (size_t)R), *y1 = malloc(sizeof(float) * (size_t)R);
        for (int64_t j = 0; j < T * K; j++) X[j] = (float)t_rand();
        CHECK(k3_bf16_few_supports(&m.w));
        k3_matmul(&m.w, X, T, Y);
        for (int64_t t = 0; t < T; t++) {
            k3_matvec(&m.w, X + t * K, y);
            k3_matvec_serial(&m.w, X + t * K, y1);
            CHECK(memcmp(y, Y + t * R, sizeof(float) * (size_t)R) == 0, "K %lld token %lld",
                  (long long)K, (long long)t);
            CHECK(memcmp(y, y1, sizeof(float) * (size_t)R) == 0);
        }
        free(X), free(Y), free(y), free(y1);
        free_mat(&m);
    }
    owned_mat n = make_mat(K3_W_BF16, 8, K3_BF16_FEW_MIN_COLS - 1, 0, 0, K3_W_F32);
    CHECK(!k3_bf16_few_supports(&n.w));
    free_mat(&n);
    k3_kernels_set_mode(K3_KERNELS_AUTO);
}

/* The AVX2-only family (what CI machines without AVX-512 run), forced. */
TEST(avx2_only_mode) {
    k3_kernels_set_mode(K3_KERNELS_AVX2);
    CHECK(!strcmp(k3_kernels_name(), "avx2"));
    float_formats_vs_ref();
    sliced_views_vs_ref();
    mxfp4_vs_ref();
    mxfp4_scale_edges();
    affine_every_width_group_scale_type();
    affine_decode_awkward_cols();
    few_tokens_every_format();
    large_threaded_vs_ref();
    k3_kernels_set_mode(K3_KERNELS_AUTO);
}

int main(void) {
    t_seed(42);
    RUN(avx2_available);
    RUN(float_formats_vs_ref);
    RUN(mxfp4_vs_ref);
    RUN(mxfp4_scale_edges);
    RUN(affine_every_width_group_scale_type);
    RUN(affine_decode_awkward_cols);
    RUN(sliced_views_vs_ref);
    RUN(colblocks_bitwise_per_block);
    RUN(rows_independent_of_neighbours);
    RUN(colblocks_partial_block_ignores_next_scales);
    RUN(few_colblocks_bitwise_per_block);
    RUN(large_threaded_vs_ref);
    RUN(matmul_rows_independent_of_T);
    RUN(few_tokens_every_format);
    RUN(ref_mode_is_reachable);
    if (k3_cpu_has_avx512()) RUN(avx2_only_mode);
    if (k3_cpu_has_avx512()) RUN(matmul_avx512_bitwise_avx2);
    if (k3_cpu_has_avx512()) RUN(matmul_tok_avx512_bitwise_avx2);
    if (k3_cpu_has_avx512()) RUN(few_avx512_rows);
    if (k3_cpu_has_avx512()) RUN(few_bf16_avx512);
    if (k3_cpu_has_avx512()) RUN(bf16_decode_bitwise_few_tokens);
    printf("  (%d products compared)\n", n_compared);
    return t_done();
}
