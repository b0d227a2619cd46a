/* table.c — the per-format kernel table (see table.h): one row per weight
 * format, a column per kernel family, and the scalar reference family.
 *
 * The few-token thresholds: 2..8 tokens (the float formats up to 16, MXFP4
 * up to 24) go to the few-token kernel, which reads the weights in place
 * instead of packing panels (the panel tile wins above that; on Zen 5 the
 * few-token kernel was 1.2-1.6x faster for bf16 experts of 256x512 at 9..16
 * tokens and even on 1024x1024 and 2048x7168, while affine 4/8-bit panels
 * stayed ahead: bench/kmicro.c). For MXFP4 the token-lane kernel takes over
 * at 25 (matmul_tok_avx512.c): at K3's expert shapes (384 x 3584, 3584 x
 * 384, 3072 x 3584, one core, Zen 5) the few-token kernel ran 122-141
 * GFLOP/s from 17 to 24 tokens against 84-129 for token lanes, level at 26,
 * behind at 28. */
#include "kernels/table.h"
#include "kernels/avx2.h"
#include "kernels/avx512.h"
#include "kernels/matvec_i8.h"
#include "kernels/runtime.h"

/* k3_matvec_avx2_float_colblocks takes every float view the AVX2 family does. */
static int float_colblocks(const k3_wmat *W, int nb, const float *const *xb, float *const *y) {
    k3_matvec_avx2_float_colblocks(W, nb, xb, y);
    return 1;
}

static const k3_few_rows_kernel few_avx512 = {k3_few_avx512_prepare, k3_few_avx512_prepared_floats,
                                              k3_few_avx512_prepare_into,
                                              k3_matmul_few_rows_avx512};

/* The AVX2 family: one kernel per product whatever the format. */
#define AVX2_FLOAT                                                                                 \
    {                                                                                              \
        .takes = k3_avx2_supports, .matvec = {{NULL, k3_matvec_avx2}},                             \
        .colblocks = {{NULL, float_colblocks}}, .matmul = k3_matmul_avx2,                          \
        .few = k3_matmul_few_avx2                                                                  \
    }
#define AVX2_QUANT                                                                                 \
    {                                                                                              \
        .takes = k3_avx2_supports, .matvec = {{NULL, k3_matvec_avx2}},                             \
        .colblocks = {{NULL, NULL}}, .matmul = k3_matmul_avx2, .few = k3_matmul_few_avx2           \
    }

/* The AVX-512 family: the AVX2 decode kernels where no AVX-512 one measured
 * faster (f32, f16); bf16 rows of 1024+ columns decode through the few-token
 * tile at T = 1 (on Zen 4 one core read 16384 x 7168 from memory at 24 GB/s
 * that way against 11 through the AVX2 row dots, and 1.3-3x faster at every
 * dense shape measured: bench/RESULTS.md), their column blocks block by
 * block through it (the tile has no all-blocks form); the int8-activation
 * path first where it is on (matvec_i8.h). */
#define AVX512_FLOAT                                                                               \
    {                                                                                              \
        .takes = k3_avx2_supports,                                                                 \
        .matvec = {{k3_bf16_few_supports, k3_matvec_bf16_few_avx512}, {NULL, k3_matvec_avx2}},     \
        .colblocks = {{k3_bf16_few_supports, NULL}, {NULL, float_colblocks}},                      \
        .matmul = k3_matmul_avx512, .few = k3_matmul_few_avx512, .few_tokens = 16,                 \
        .few_rows = &few_avx512                                                                    \
    }

typedef struct {
    k3_fmt_kernels avx2, avx512;
} format_row;

static const format_row rows[] = {
    [K3_W_F32] = {AVX2_FLOAT, AVX512_FLOAT},
    [K3_W_F16] = {AVX2_FLOAT, AVX512_FLOAT},
    [K3_W_BF16] = {AVX2_FLOAT, AVX512_FLOAT},
    [K3_W_MXFP4] = {AVX2_QUANT,
                    {.takes = k3_avx2_supports,
                     .matvec = {{k3_i8_supports, k3_matvec_i8},
                                {k3_avx512_supports, k3_matvec_mxfp4_avx512},
                                {NULL, k3_matvec_avx2}},
                     .colblocks = {{k3_i8_supports, k3_matvec_i8_colblocks_avx512},
                                   {k3_avx512_supports, k3_matvec_mxfp4_colblocks_avx512},
                                   {NULL, NULL}},
                     .matmul = k3_matmul_avx512,
                     .few = k3_matmul_few_avx512,
                     .few_tokens = 24,
                     .few_rows = &few_avx512}},
    [K3_W_AFFINE] = {AVX2_QUANT,
                     {.takes = k3_avx2_supports,
                      .matvec = {{k3_i8_supports, k3_matvec_i8},
                                 {k3_avx512_supports, k3_matvec_avx512}, /* 8-bit or 2-6 */
                                 {NULL, k3_matvec_avx2}},
                      .colblocks = {{k3_i8_supports, k3_matvec_i8_colblocks_avx512},
                                    {k3_avx512_supports, k3_matvec_colblocks_avx512},
                                    {NULL, NULL}},
                      .matmul = k3_matmul_avx512,
                      .few = k3_matmul_few_avx512,
                      .few_tokens = 8,
                      .few_rows = &few_avx512}},
};

/* The reference family: no row takes anything. */
static const k3_fmt_kernels reference = {0};

const k3_fmt_kernels *k3_kernels_for(const k3_wmat *W) {
    switch (k3_kernels_active()) {
    case K3_KERNELS_AVX512:
        return &rows[W->fmt].avx512;
    case K3_KERNELS_AVX2:
        return &rows[W->fmt].avx2;
    default:
        return &reference;
    }
}
