/* test_kernels_prep.c — the memory of prepared activations (kernels/scratch.h).
 *
 * The bookkeeping: k3_prep_buf hands a preparation back ready only inside an
 * open span, for the same kind, input address, shape word and size, and
 * never after another open or a close (nested spans included); shape 0 is
 * never kept; more keys than slots evict the least recently used.
 *
 * The kernels: a product computed as 16-row claims inside a span (as the
 * work-stealing loops call it, with several inputs interleaved) is bitwise
 * the product computed in one call outside any span, for MXFP4 and affine
 * 2-8 bits, plain and in column blocks, with exact and int8 activations, in
 * the AVX-512 and the AVX2 family; and an input rewritten between two spans
 * is prepared again (a stale preparation would give the old input's
 * product). */
#include "kernels/runtime.h"
#include "kernels/matmul.h"
#include "kernels/matvec_i8.h"
#include "kernels/scratch.h"
#include "helpers.h"
#include "t.h"

#include <stdint.h>

static int ready_of(int kind, const void *x, uint64_t shape, size_t bytes) {
    int ready = -1;
    k3_prep_buf(kind, x, shape, bytes, &ready);
    return ready;
}

TEST(bookkeeping) {
    static float a[64], b[64];
    const uint64_t s = k3_prep_shape(64, 1, 2, 3);
    CHECK(ready_of(K3_PREP_AFFINE, a, s, 256) == 0);
    CHECK(ready_of(K3_PREP_AFFINE, a, s, 256) == 0, "kept outside a span");
    k3_prep_open();
    CHECK(ready_of(K3_PREP_AFFINE, a, s, 256) == 0, "kept from before the span");
    CHECK(ready_of(K3_PREP_AFFINE, a, s, 256) == 1, "not kept inside the span");
    CHECK(ready_of(K3_PREP_MXFP4, a, s, 256) == 0, "another kind");
    CHECK(ready_of(K3_PREP_AFFINE, b, s, 256) == 0, "another input");
    CHECK(ready_of(K3_PREP_AFFINE, a, k3_prep_shape(64, 1, 2, 4), 256) == 0, "another shape");
    CHECK(ready_of(K3_PREP_AFFINE, a, s, 512) == 0, "another size");
    CHECK(ready_of(K3_PREP_AFFINE, a, 0, 256) == 0);
    CHECK(ready_of(K3_PREP_AFFINE, a, 0, 256) == 0, "shape 0 kept");
    CHECK(ready_of(K3_PREP_AFFINE, a, s, 256) == 1, "lost among 7 other keys");
    k3_prep_open(); /* nested: the inner span starts afresh */
    CHECK(ready_of(K3_PREP_AFFINE, a, s, 256) == 0, "kept into a nested span");
    CHECK(ready_of(K3_PREP_AFFINE, a, s, 256) == 1);
    k3_prep_close(); /* back in the outer span, which may have changed x meanwhile */
    CHECK(ready_of(K3_PREP_AFFINE, a, s, 256) == 0, "kept across a nested close");
    for (int i = 0; i < 9; i++) ready_of(K3_PREP_I8, b, k3_prep_shape(i + 1, 0, 0, 0), 64);
    CHECK(ready_of(K3_PREP_AFFINE, a, s, 256) == 0, "9 later keys did not evict it");
    for (int i = 0; i < 20; i++) { /* two keys used in turn among others: both stay */
        ready_of(K3_PREP_I8, b, k3_prep_shape(100 + i, 0, 0, 0), 64);
        CHECK(ready_of(K3_PREP_AFFINE, a, s, 256) == 1, "round %d", i); /* made just above */
        CHECK(ready_of(K3_PREP_MXFP4, b, s, 256) == (i > 0), "round %d", i);
    }
    k3_prep_close();
    CHECK(ready_of(K3_PREP_AFFINE, a, s, 256) == 0, "kept after the close");
    float x[48], *xb[3] = {x, x + 16, x + 32};
    const float *cx[3] = {xb[0], xb[1], xb[2]};
    CHECK(k3_prep_blocks_shape(cx, 3, 16, 1, 2) == k3_prep_shape(16, 1, 2, 3));
    cx[2] = x + 33;
    CHECK(k3_prep_blocks_shape(cx, 3, 16, 1, 2) == 0, "blocks apart named by xb[0]");
}

enum { NX = 3, NB = 4 };

/* y[i] = W x[i] for the NX inputs: whole products outside any span (want)
 * and 16-row claims in a span, the inputs taken in turn per claim (got). */
static void products(const k3_wmat *W, float *const *x, float **want, float **got) {
    for (int i = 0; i < NX; i++) k3_matvec_serial(W, x[i], want[i]);
    k3_prep_open();
    for (int64_t r0 = 0; r0 < W->rows; r0 += 16) {
        k3_wmat v = k3_wmat_rows(W, r0, W->rows - r0 < 16 ? W->rows - r0 : 16);
        for (int i = 0; i < NX; i++) k3_matvec_serial(&v, x[i], got[i] + r0);
    }
    k3_prep_close();
}

/* The same in NB column blocks lying end to end in x[0]. */
static void block_products(const k3_wmat *W, float *const *x, float **want, float **got) {
    const int64_t bc = W->cols / NB, R = W->rows;
    const float *xb[NB];
    float *yw[NB], *yg[NB];
    for (int b = 0; b < NB; b++) {
        xb[b] = x[0] + b * bc;
        yw[b] = want[0] + b * R;
        yg[b] = got[0] + b * R;
    }
    k3_matvec_colblocks_serial(W, NB, xb, yw);
    k3_prep_open();
    for (int64_t r0 = 0; r0 < R; r0 += 16) {
        k3_wmat v = k3_wmat_rows(W, r0, R - r0 < 16 ? R - r0 : 16);
        float *y[NB];
        for (int b = 0; b < NB; b++) y[b] = yg[b] + r0;
        k3_matvec_colblocks_serial(&v, NB, xb, y);
    }
    k3_prep_close();
}

static int differ(const float *a, const float *b, int64_t n) {
    return memcmp(a, b, sizeof(float) * (size_t)n) != 0;
}

/* Every format, both activation modes, twice with x rewritten in between. */
static void claims_equal_whole(const char *family) {
    static const struct {
        k3_wfmt fmt;
        int bits, group;
    } f[] = {{K3_W_MXFP4, 4, 32},  {K3_W_AFFINE, 2, 64}, {K3_W_AFFINE, 3, 64},
             {K3_W_AFFINE, 4, 32}, {K3_W_AFFINE, 4, 64}, {K3_W_AFFINE, 5, 128},
             {K3_W_AFFINE, 6, 64}, {K3_W_AFFINE, 8, 64}, {K3_W_AFFINE, 8, 32}};
    const int64_t R = 83, K = 1024;
    float *x[NX], *want[NX], *got[NX];
    for (int i = 0; i < NX; i++) {
        x[i] = malloc(sizeof(float) * K);
        want[i] = malloc(sizeof(float) * R * NB);
        got[i] = malloc(sizeof(float) * R * NB);
    }
    for (size_t fi = 0; fi < sizeof f / sizeof f[0]; fi++) {
        owned_mat m = make_mat(f[fi].fmt, R, K, f[fi].bits, f[fi].group, K3_W_BF16);
        for (int act = 0; act < 2; act++) {
            k3_act_int8_set(act);
            for (int round = 0; round < 2; round++) { /* round 1: the same buffers, new x */
                for (int i = 0; i < NX; i++)
                    for (int64_t c = 0; c < K; c++) x[i][c] = (float)(t_rand() - 0.5);
                products(&m.w, x, want, got);
                for (int i = 0; i < NX; i++)
                    CHECK(!differ(want[i], got[i], R),
                          "%s fmt %d bits %d group %d act %d "
                          "round %d input %d",
                          family, f[fi].fmt, f[fi].bits, f[fi].group, act, round, i);
                block_products(&m.w, x, want, got);
                CHECK(!differ(want[0], got[0], R * NB),
                      "%s blocks fmt %d bits %d act %d "
                      "round %d",
                      family, f[fi].fmt, f[fi].bits, act, round);
            }
        }
        k3_act_int8_set(0);
        free_mat(&m);
    }
    for (int i = 0; i < NX; i++) {
        free(x[i]);
        free(want[i]);
        free(got[i]);
    }
}

TEST(claims_equal_whole_avx512) {
    claims_equal_whole("avx512");
}

TEST(claims_equal_whole_avx2) {
    k3_kernels_set_mode(K3_KERNELS_AVX2);
    claims_equal_whole("avx2");
    k3_kernels_set_mode(K3_KERNELS_AUTO);
}

int main(void) {
    RUN(bookkeeping);
    if (k3_cpu_has_avx2()) {
        RUN(claims_equal_whole_avx512); /* the best family the CPU has */
        RUN(claims_equal_whole_avx2);
    }
    return t_done();
}
