/* test_model_ops.c — unit tests of the forward-pass ops against direct formulas:
 * RMSNorm, L2 norm, SiTU, the short conv and its state across calls, one KDA
 * recurrence step, MXFP4 decoding (all codes, negative zero, scale edges), the
 * transposed product of MLA, AttnRes mixing and router selection with ties and
 * groups. */
#include "io/config.h"
#include "kernels/kernels.h"
#include "model/model.h"
#include "model/ops.h"
#include "quant/dtype.h"
#include "t.h"

TEST(rmsnorm_matches_formula) {
    float x[37], w[37], y[37];
    for (int i = 0; i < 37; i++) x[i] = (float)t_rand() * 3, w[i] = 1 + (float)t_rand() * 0.1f;
    k3_rmsnorm(x, 37, w, 1e-5, y);
    double ss = 0;
    for (int i = 0; i < 37; i++) ss += (double)x[i] * x[i];
    for (int i = 0; i < 37; i++) CHECK_NEAR(y[i], x[i] / sqrt(ss / 37 + 1e-5) * w[i], 1e-6);
    k3_rmsnorm(x, 37, NULL, 1e-5, x); /* in place, no weight */
    for (int i = 0; i < 37; i++) CHECK_NEAR(x[i] * w[i], y[i], 1e-6);
}

TEST(l2norm_scaled_matches_formula) {
    float x[19], x0[19];
    for (int i = 0; i < 19; i++) x0[i] = x[i] = (float)t_rand();
    k3_l2norm_scaled(x, 19, 1e-6, 0.25f);
    double ss = 0;
    for (int i = 0; i < 19; i++) ss += (double)x0[i] * x0[i];
    for (int i = 0; i < 19; i++) CHECK_NEAR(x[i], 0.25 * x0[i] / sqrt(ss + 1e-6), 1e-7);
    float z[4] = {0, 0, 0, 0}; /* the eps keeps a zero vector finite */
    k3_l2norm_scaled(z, 4, 1e-6, 1.0f);
    CHECK(z[0] == 0.0f);
}

TEST(situ_matches_formula) {
    float ups[] = {-40, -3, -0.5f, 0, 0.7f, 2, 30, 100}, gates[] = {-9, -1, 0, 0.3f, 2, 8};
    for (size_t i = 0; i < sizeof ups / 4; i++)
        for (size_t j = 0; j < sizeof gates / 4; j++) {
            double u = ups[i], g = gates[j];
            double act = 4.0 * tanh(g / 4.0) / (1 + exp(-g));
            CHECK_NEAR(k3_situ(ups[i], gates[j], 4.0f, 25.0f), act * 25.0 * tanh(u / 25.0), 1e-4);
            CHECK_NEAR(k3_situ(ups[i], gates[j], 4.0f, 0.0f), act * u, 1e-4);
        }
}

/* Direct causal conv with zero history: u[t,c] = sum_j w[c,j] z[t-K+1+j, c], then SiLU. */
static double conv_direct(const float *z, int C, int c, int t, const float *w, int K) {
    double u = 0;
    for (int j = 0; j < K; j++) {
        int tau = t - K + 1 + j;
        if (tau >= 0) u += (double)w[c * K + j] * z[tau * C + c];
    }
    return u / (1 + exp(-u));
}

TEST(conv_state_carries_across_calls) {
    enum { T = 9, C = 5, K = 4 };
    float z[T * C], w[C * K], full[T * C], split[T * C];
    for (int i = 0; i < T * C; i++) z[i] = (float)t_rand();
    for (int i = 0; i < C * K; i++) w[i] = (float)t_rand();
    float st1[(K - 1) * C] = {0}, st2[(K - 1) * C] = {0};
    memcpy(full, z, sizeof z);
    k3_kda_conv(full, T, C, 0, C, w, K, st1, C);
    for (int t = 0; t < T; t++)
        for (int c = 0; c < C; c++)
            CHECK_NEAR(full[t * C + c], conv_direct(z, C, c, t, w, K), 1e-5);
    memcpy(split, z, sizeof z); /* 2 + 1 + 6 tokens in three calls */
    k3_kda_conv(split, 2, C, 0, C, w, K, st2, C);
    k3_kda_conv(split + 2 * C, 1, C, 0, C, w, K, st2, C);
    k3_kda_conv(split + 3 * C, 6, C, 0, C, w, K, st2, C);
    for (int i = 0; i < T * C; i++) CHECK_NEAR(split[i], full[i], 1e-6);
    for (int i = 0; i < (K - 1) * C; i++) CHECK(st1[i] == st2[i]);
    for (int j = 0; j < K - 1; j++) /* the state is the last K-1 raw inputs, oldest first */
        for (int c = 0; c < C; c++) CHECK(st1[j * C + c] == z[(T - K + 1 + j) * C + c]);
}

TEST(kda_step_matches_formula) {
    enum { dk = 6, dv = 5 };
    float S[dv * dk], S0[dv * dk], q[dk], k[dk], v[dv], a[dk], y[dv];
    for (int i = 0; i < dv * dk; i++) S0[i] = S[i] = (float)t_rand();
    for (int j = 0; j < dk; j++)
        q[j] = (float)t_rand(), k[j] = (float)t_rand(), a[j] = 0.5f + 0.5f * (float)fabs(t_rand());
    for (int i = 0; i < dv; i++) v[i] = (float)t_rand();
    float beta = 0.37f;
    k3_kda_step(S, dk, dv, q, k, v, a, beta, y);
    /* S' = diag-decay(S) + beta (v - S_dec k) k^T ; y = S' q */
    for (int i = 0; i < dv; i++) {
        double sd[dk], m = 0, o = 0;
        for (int j = 0; j < dk; j++) sd[j] = (double)S0[i * dk + j] * a[j], m += sd[j] * k[j];
        double delta = beta * (v[i] - m);
        for (int j = 0; j < dk; j++) {
            double sn = sd[j] + delta * k[j];
            CHECK_NEAR(S[i * dk + j], sn, 1e-5);
            o += sn * q[j];
        }
        CHECK_NEAR(y[i], o, 1e-5);
    }
}

TEST(mxfp4_decode_table_and_scale_edges) {
    /* one row of 64 columns: codes 0..15 four times; scales per 32 columns */
    uint8_t packed[32], sc[2];
    for (int c = 0; c < 64; c += 2) packed[c / 2] = (uint8_t)((c % 16) | (((c + 1) % 16) << 4));
    const float tab[16] = {0, .5f, 1, 1.5f, 2, 3, 4, 6, -0.f, -.5f, -1, -1.5f, -2, -3, -4, -6};
    const int scales[][2] = {{127, 128}, {0, 254}, {1, 126}};
    for (size_t s = 0; s < 3; s++) {
        sc[0] = (uint8_t)scales[s][0], sc[1] = (uint8_t)scales[s][1];
        k3_wmat W = {.fmt = K3_W_MXFP4,
                     .rows = 1,
                     .cols = 64,
                     .data = packed,
                     .row_stride = 32,
                     .scales = sc,
                     .scale_stride = 2,
                     .bits = 4,
                     .group = 32};
        float row[64];
        k3_wmat_row(&W, 0, 0, 64, row);
        for (int c = 0; c < 64; c++) {
            double want = tab[c % 16] * ldexp(1.0, sc[c / 32] - 127);
            CHECK(row[c] == (float)want, "scale %d code %d: %g vs %g", sc[c / 32], c % 16, row[c],
                  want);
            if (c % 16 == 8) CHECK(signbit(row[c]), "code 8 must be negative zero");
        }
    }
    CHECK(!isfinite(k3_e8m0_to_f32(255)), "E8M0 255 is NaN/Inf");
    CHECK(k3_e8m0_to_f32(0) == ldexpf(1.0f, -127) && k3_e8m0_to_f32(0) > 0);
}

TEST(transposed_product_matches_reference) {
    enum { R = 7, C = 33, T = 3 };
    float w[R * C], x[T * R], y[T * C];
    for (int i = 0; i < R * C; i++) w[i] = (float)t_rand();
    for (int i = 0; i < T * R; i++) x[i] = (float)t_rand();
    k3_wmat W = {
        .fmt = K3_W_F32, .rows = R, .cols = C, .data = (const uint8_t *)w, .row_stride = C * 4};
    k3_tmatmul_ref(&W, x, T, y);
    for (int t = 0; t < T; t++)
        for (int c = 0; c < C; c++) {
            double a = 0;
            for (int r = 0; r < R; r++) a += (double)w[r * C + c] * x[t * R + r];
            CHECK_NEAR(y[t * C + c], a, 1e-5);
        }
}

TEST(attnres_mix_matches_formula) {
    enum { T = 2, D = 11, N = 3 };
    float b[N][T * D], p[T * D], w[D], out[T * D];
    float *R[N];
    for (int j = 0; j < N; j++) {
        R[j] = b[j];
        for (int i = 0; i < T * D; i++) b[j][i] = (float)t_rand() * (j + 1);
    }
    for (int i = 0; i < T * D; i++) p[i] = (float)t_rand();
    for (int d = 0; d < D; d++) w[d] = (float)t_rand();
    k3_attnres_mix(R, N, p, w, T, D, 1e-5, out);
    for (int t = 0; t < T; t++) {
        double l[N + 1], mx = -1e300, s = 0;
        for (int j = 0; j <= N; j++) {
            const float *v = (j < N ? b[j] : p) + t * D;
            double dot = 0, ss = 0;
            for (int d = 0; d < D; d++) dot += v[d] * (double)w[d], ss += (double)v[d] * v[d];
            l[j] = dot / sqrt(ss / D + 1e-5);
            if (l[j] > mx) mx = l[j];
        }
        for (int j = 0; j <= N; j++) s += (l[j] = exp(l[j] - mx));
        for (int d = 0; d < D; d++) {
            double a = 0;
            for (int j = 0; j <= N; j++) a += l[j] / s * (j < N ? b[j] : p)[t * D + d];
            CHECK_NEAR(out[t * D + d], a, 1e-5);
        }
    }
    k3_attnres_mix(R, 0, p, w, T, D, 1e-5, out); /* no blocks: the partial itself */
    CHECK(!memcmp(out, p, sizeof p));
}

static k3_config router_cfg(int E, int K, int G, int TG) {
    k3_config c = {0};
    c.num_experts = E, c.num_experts_per_token = K, c.num_expert_group = G, c.topk_group = TG;
    c.moe_renormalize = 1, c.routed_scaling_factor = 1.0;
    return c;
}

TEST(router_ties_pick_lower_index_and_bias_only_selects) {
    k3_config c = router_cfg(6, 3, 1, 1);
    float logits[6] = {0, 0, 0, 0, 0, 0}, bias[6] = {0, 0, 0, 0, 0, 0}, wts[3];
    int idx[3];
    k3_moe_select(&c, logits, bias, idx, wts);
    CHECK(idx[0] == 0 && idx[1] == 1 && idx[2] == 2, "ties: %d %d %d", idx[0], idx[1], idx[2]);
    for (int k = 0; k < 3; k++) CHECK_NEAR(wts[k], 1.0 / 3, 1e-7);
    /* the bias moves selection but the weights come from the un-biased sigmoid */
    float l2[6] = {2, 1, 0, -1, -2, 0.5f}, b2[6] = {0, 0, 0, 0, 5, 0};
    c.routed_scaling_factor = 2.5;
    k3_moe_select(&c, l2, b2, idx, wts);
    CHECK(idx[0] == 4 && idx[1] == 0 && idx[2] == 1, "%d %d %d", idx[0], idx[1], idx[2]);
    double s4 = 1 / (1 + exp(2.0)), s0 = 1 / (1 + exp(-2.0)), s1 = 1 / (1 + exp(-1.0));
    double sum = s4 + s0 + s1 + 1e-20;
    CHECK_NEAR(wts[0], 2.5 * s4 / sum, 1e-6);
    CHECK_NEAR(wts[1], 2.5 * s0 / sum, 1e-6);
    c.moe_renormalize = 0; /* no renormalisation: raw sigmoid times the factor */
    k3_moe_select(&c, l2, b2, idx, wts);
    CHECK_NEAR(wts[0], 2.5 * s4, 1e-6);
}

TEST(router_groups_zero_dropped_scores) {
    /* 4 experts in 2 groups, keep 1 group, top-1. Group 1 is weaker and is dropped,
     * but its scores become 0.0, which beats the negative scores of group 0 (MLX). */
    k3_config c = router_cfg(4, 1, 2, 1);
    float logits[4] = {0, 0, 0, 0}, bias[4] = {-1, -1, -2, -2}, w;
    int idx;
    k3_moe_select(&c, logits, bias, &idx, &w);
    CHECK(idx == 2, "picked %d", idx);
    CHECK_NEAR(w, 0.5, 1e-7);
    /* 8 experts, 4 groups, keep 2, top-2: group scores = sum of top-2 biased scores */
    k3_config c2 = router_cfg(8, 2, 4, 2);
    float l8[8] = {3, -3, 0.5f, 0.4f, 2.9f, 2.8f, -1, 2.0f}, b8[8] = {0};
    int id2[2];
    float w2[2];
    k3_moe_select(&c2, l8, b8, id2, w2);
    /* group sums: g0 = s(3)+s(-3) ~ 1.00, g1 ~ 1.22, g2 ~ 1.89, g3 ~ 1.15 -> keep g2, g1 */
    CHECK(id2[0] == 4 && id2[1] == 5, "picked %d %d", id2[0], id2[1]);
    /* equal group scores: the lower-numbered group is dropped first */
    k3_config c3 = router_cfg(4, 1, 2, 1);
    float l4[4] = {1, 0, 0, 1}, b4[4] = {0};
    k3_moe_select(&c3, l4, b4, &idx, &w);
    CHECK(idx == 3, "tie between groups: picked %d", idx);
}

int main(void) {
    RUN(rmsnorm_matches_formula);
    RUN(l2norm_scaled_matches_formula);
    RUN(situ_matches_formula);
    RUN(conv_state_carries_across_calls);
    RUN(kda_step_matches_formula);
    RUN(mxfp4_decode_table_and_scale_edges);
    RUN(transposed_product_matches_reference);
    RUN(attnres_mix_matches_formula);
    RUN(router_ties_pick_lower_index_and_bias_only_selects);
    RUN(router_groups_zero_dropped_scores);
    return t_done();
}
