/* test_quant_roundtrip.c — quantize -> dequantize error within each format's bound.
 *
 * Affine (every width x group x scale type) and MXFP4 quantizers from
 * quant/quantize.h, read back through the reference reader k3_wmat_row, so the
 * packing is checked against the layout the kernels use. Also checks hand
 * examples of the MLX rules (zero exactly representable, constant groups) and
 * that bad arguments are rejected with a message. */
#include "base/err.h"
#include "kernels/matmul.h"
#include "quant/dtype.h"
#include "quant/quantize.h"
#include "t.h"

#include <stdint.h>

static float scale_at(k3_wfmt f, const uint8_t *p, int64_t i) {
    uint16_t h;
    float v;
    if (f == K3_W_F32) {
        memcpy(&v, p + 4 * i, 4);
        return v;
    }
    memcpy(&h, p + 2 * i, 2);
    return f == K3_W_F16 ? k3_f16_to_f32(h) : k3_bf16_to_f32(h);
}

/* Max error over W, checked against the per-group bound; returns mean |err| / |s|. */
static double check_affine(const float *W, int64_t R, int64_t K, int bits, int G, k3_wfmt sf) {
    size_t rb = k3_affine_row_bytes(K, bits), sb = k3_affine_scale_row_bytes(K, G, sf);
    uint8_t *codes = malloc(rb * (size_t)R), *sc = malloc(sb * (size_t)R),
            *bi = malloc(sb * (size_t)R);
    CHECK(k3_quantize_affine(W, R, K, bits, G, sf, codes, sc, bi) == 0, "%s", k3_errmsg());
    k3_wmat w = k3_wmat_affine(R, K, bits, G, sf, codes, sc, bi);
    float *row = malloc(sizeof(float) * (size_t)K);
    double rel = 0, n = (1 << bits) - 1;
    double fmt_eps = sf == K3_W_BF16 ? 1.0 / 256 : sf == K3_W_F16 ? 1.0 / 2048 : 1e-7;
    int bad = 0;
    for (int64_t r = 0; r < R; r++) {
        k3_wmat_row(&w, r, 0, K, row);
        for (int64_t c = 0; c < K; c++) {
            double s = fabs(scale_at(sf, sc + r * sb, c / G)),
                   b = fabs(scale_at(sf, bi + r * sb, c / G));
            double err = fabs((double)row[c] - W[r * K + c]);
            double bound = s * 1.0001 + (n * s + b) * fmt_eps + 1e-6;
            if (err > bound && bad++ < 3)
                CHECK(0, "affine%d/%d/%s r=%lld c=%lld: w %.7g deq %.7g err %.3g > %.3g", bits, G,
                      k3_wfmt_name(sf), (long long)r, (long long)c, W[r * K + c], row[c], err,
                      bound);
            rel += s > 0 ? err / s : 0;
        }
    }
    free(row);
    free(codes);
    free(sc);
    free(bi);
    return rel / (double)(R * K);
}

TEST(affine_roundtrip_every_width_group_type) {
    const int bits[] = {2, 3, 4, 5, 6, 8}, groups[] = {32, 64, 128};
    const k3_wfmt sf[] = {K3_W_BF16, K3_W_F16, K3_W_F32};
    const int64_t R = 5, K = 384;
    float *W = malloc(sizeof(float) * R * K);
    for (int64_t i = 0; i < R * K; i++) W[i] = (float)(0.1 * t_rand() + (i % 97 == 0 ? 0.3 : 0));
    for (int64_t c = 0; c < 64; c++)
        W[2 * K + c] = (float)(-1.0 - 0.01 * t_rand());      /* all negative */
    for (int64_t c = 64; c < 128; c++) W[2 * K + c] = 0.25f; /* constant */
    for (int b = 0; b < 6; b++)
        for (int g = 0; g < 3; g++)
            for (int s = 0; s < 3; s++) {
                double mean = check_affine(W, R, K, bits[b], groups[g], sf[s]);
                /* uniform rounding error averages s/4 (with f32 scales; bf16 scale
                 * rounding adds up to n*2^-9 steps); a packing bug gives far more */
                if (sf[s] == K3_W_F32)
                    CHECK(mean < 0.3, "affine%d/%d mean error %.3f steps", bits[b], groups[g],
                          mean);
            }
    free(W);
}

/* MLX nudges the scale so the edge (and therefore 0 in a group spanning it) is exact. */
TEST(affine_mlx_rules) {
    float w[32];
    for (int i = 0; i < 32; i++) w[i] = (float)i / 31.0f * 3.0f - 1.0f; /* [-1, 2] */
    w[5] = 0.0f;
    uint8_t codes[16], sc[4], bi[4];
    CHECK(k3_quantize_affine(w, 1, 32, 4, 32, K3_W_F32, codes, sc, bi) == 0);
    k3_wmat m = k3_wmat_affine(1, 32, 4, 32, K3_W_F32, codes, sc, bi);
    float out[32];
    k3_wmat_row(&m, 0, 0, 32, out);
    CHECK_NEAR(out[31], 2.0, 1e-6); /* |max| > |min|: edge = max, exact */
    CHECK_NEAR(out[5], 0.0, 1e-6);
    float s;
    memcpy(&s, sc, 4);
    CHECK(s < 0, "scale %g should be negative when the max edge is the larger", s);
    for (int i = 0; i < 32; i++) w[i] = 0.7f;
    CHECK(k3_quantize_affine(w, 1, 32, 2, 32, K3_W_BF16, codes, sc, bi) == 0);
    m = k3_wmat_affine(1, 32, 2, 32, K3_W_BF16, codes, sc, bi);
    k3_wmat_row(&m, 0, 0, 32, out);
    CHECK_NEAR(out[17], k3_bf16_to_f32(k3_f32_to_bf16(0.7f)), 1e-6);
}

static double e2m1_half_gap(double a) {
    return a <= 2 ? 0.25 : a <= 4 ? 0.5 : 1.0;
}

TEST(mxfp4_roundtrip) {
    const int64_t R = 7, K = 256;
    float *W = malloc(sizeof(float) * R * K);
    for (int64_t i = 0; i < R * K; i++) W[i] = (float)(t_rand() * (1 << (i / 32 % 9)) * 0.01);
    for (int i = 0; i < 32; i++) W[32 + i] = 0.0f; /* zero group */
    W[64] = 6.0f;                                  /* exactly at the top of the range */
    uint8_t *p = malloc(R * K / 2), *sc = malloc(R * K / 32);
    CHECK(k3_quantize_mxfp4(W, R, K, p, sc) == 0);
    k3_wmat m = k3_wmat_mxfp4(R, K, p, sc);
    float row[256];
    for (int64_t r = 0; r < R; r++) {
        k3_wmat_row(&m, r, 0, K, row);
        for (int64_t c = 0; c < K; c++) {
            double x = k3_e8m0_to_f32(sc[r * K / 32 + c / 32]), w = W[r * K + c];
            double err = fabs(row[c] - w);
            CHECK(err <= e2m1_half_gap(fabs(w) / x) * x * 1.0001, "r%lld c%lld w %.7g deq %.7g",
                  (long long)r, (long long)c, w, row[c]);
        }
    }
    CHECK(row[0] == row[0]);
    k3_wmat_row(&m, 0, 64, 32, row);
    CHECK(row[0] == 6.0f, "6.0 should be exact, got %g", row[0]);
    CHECK(sc[1] == 127, "zero group scale %d", sc[1]);
    free(W);
    free(p);
    free(sc);
}

/* Nearest value with ties to even: 0.25 -> 0, 1.25 -> 1, 5 -> 4 (scale 1). */
TEST(mxfp4_ties_to_even) {
    float w[32] = {0.25f, 1.25f, 5.0f, -2.5f, 6.0f, 0.75f};
    uint8_t p[16], sc[1];
    CHECK(k3_quantize_mxfp4(w, 1, 32, p, sc) == 0);
    CHECK(sc[0] == 127);
    k3_wmat m = k3_wmat_mxfp4(1, 32, p, sc);
    float out[32];
    k3_wmat_row(&m, 0, 0, 32, out);
    CHECK(out[0] == 0.0f && out[1] == 1.0f && out[2] == 4.0f && out[3] == -2.0f && out[4] == 6.0f &&
              out[5] == 1.0f,
          "%g %g %g %g %g %g", out[0], out[1], out[2], out[3], out[4], out[5]);
}

TEST(bad_arguments_rejected) {
    float w[64] = {0};
    uint8_t b[256];
    CHECK(k3_quantize_affine(w, 1, 64, 7, 32, K3_W_BF16, b, b, b) == -1);
    CHECK(strstr(k3_errmsg(), "bits 7"), "%s", k3_errmsg());
    CHECK(k3_quantize_affine(w, 1, 48, 4, 32, K3_W_BF16, b, b, b) == -1);
    CHECK(strstr(k3_errmsg(), "multiple"), "%s", k3_errmsg());
    CHECK(k3_quantize_affine(w, 1, 64, 4, 16, K3_W_BF16, b, b, b) == -1);
    CHECK(k3_quantize_mxfp4(w, 1, 40, b, b) == -1);
}

/* Quantized weights through the fast kernels give the product of the dequantized weights. */
TEST(quantized_product_matches_dequantized) {
    const int64_t R = 9, K = 192;
    float *W = malloc(sizeof(float) * R * K), x[192], y[9], yr[9];
    for (int64_t i = 0; i < R * K; i++) W[i] = (float)t_rand();
    for (int i = 0; i < K; i++) x[i] = (float)t_rand();
    uint8_t codes[9 * 192], sc[9 * 12], bi[9 * 12];
    CHECK(k3_quantize_affine(W, R, K, 6, 64, K3_W_BF16, codes, sc, bi) == 0);
    k3_wmat m = k3_wmat_affine(R, K, 6, 64, K3_W_BF16, codes, sc, bi);
    k3_matvec(&m, x, y);
    k3_matvec_ref(&m, x, yr);
    for (int r = 0; r < R; r++) CHECK_NEAR(y[r], yr[r], 1e-4);
    free(W);
}

int main(void) {
    t_seed(7);
    RUN(affine_roundtrip_every_width_group_type);
    RUN(affine_mlx_rules);
    RUN(mxfp4_roundtrip);
    RUN(mxfp4_ties_to_even);
    RUN(bad_arguments_rejected);
    RUN(quantized_product_matches_dequantized);
    return t_done();
}
