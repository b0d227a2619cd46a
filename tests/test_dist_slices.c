/* test_dist_slices.c — structural checks of tensor-parallel slicing.
 *
 * A numerical TP-vs-TP1 comparison misses some slicing mistakes (a wrong
 * A_log slice can move the logits by very little), so this test loads every
 * rank of an N-way split (N = 2, 4) of the 4-head fixtures with
 * k3_model_load(tp_rank, tp_size) and checks each rank's
 * local weights against the raw checkpoint tensors read independently with
 * the safetensors reader: A (exp A_log) and dt_bias slices, conv channel
 * groups (q|k|v segments regrouped to the local heads), the rows/columns and
 * dims of every projection, per-head MLA matrices, expert and shared-expert
 * widths, and that head-dim-only / replicated parameters (o_norm, f_a_proj,
 * q_a/kv_a, router, latent projections) keep their unsharded values.
 *
 * Negative controls: the same checkers are run on deliberately wrong slices
 * (A_log without the head offset, conv taps cut as one contiguous block
 * instead of per segment, the unsliced conv) and must report them. Also
 * checks that a bad N (heads not divisible, an MXFP4 group split by the
 * slice) is refused with a message. */
#include "t.h"

#include <stdint.h>

#include "base/err.h"
#include "io/safetensors.h"
#include "model/model.h"
#include "quant/dtype.h"

static char g_dir[4096];

/* ---------- raw checkpoint access, independent of src/quant/checkpoint.c ---------- */

static const k3_tensor *raw(const k3_st *st, const char *fmt, int i) {
    char n[256], full[300];
    snprintf(n, sizeof n, fmt, i);
    snprintf(full, sizeof full, "language_model.%s", n);
    const k3_tensor *t = k3_st_find(st, full);
    if (!t) t = k3_st_find(st, n);
    if (!t) printf("  raw tensor %s missing\n", n);
    return t;
}

static float raw_f(const k3_tensor *t, int64_t idx) {
    if (t->dtype == K3_DT_F32) {
        float f;
        memcpy(&f, t->data + 4 * idx, 4);
        return f;
    }
    uint16_t h;
    memcpy(&h, t->data + 2 * idx, 2);
    return t->dtype == K3_DT_BF16 ? k3_bf16_to_f32(h) : k3_f16_to_f32(h);
}

/* Element (r, c) of a 2-D weight: plain, or MXFP4 from (packed, scale). */
static float raw_w(const k3_tensor *t, const k3_tensor *scale, int64_t r, int64_t c) {
    if (!scale) return raw_f(t, r * t->shape[1] + c);
    uint8_t b = t->data[r * t->shape[1] + c / 2];
    uint8_t code = (c & 1) ? b >> 4 : b & 15;
    return k3_e2m1_table[code] * k3_e8m0_to_f32(scale->data[r * scale->shape[1] + c / 32]);
}

/* ---------- checkers: count mismatches, describe the first ---------- */

typedef struct {
    int bad;
    char first[200];
} verdict;

static void fail(verdict *v, const char *what, int layer, int64_t a, int64_t b) {
    if (!v->bad++)
        snprintf(v->first, sizeof v->first, "layer %d %s (index %lld, %lld)", layer, what,
                 (long long)a, (long long)b);
}

/* local W [rows, cols] must equal raw rows [r0, r0+rows) x cols [c0, c0+cols) and have these dims.
 */
static void check_mat(verdict *v, int layer, const char *what, const k3_wmat *W, int64_t rows,
                      int64_t cols, const k3_tensor *t, const k3_tensor *sc, int64_t r0,
                      int64_t c0) {
    if (!t || W->rows != rows || W->cols != cols) {
        fail(v, what, layer, W->rows, W->cols);
        return;
    }
    float *row = malloc(sizeof(float) * (size_t)cols);
    for (int64_t r = 0; r < rows; r++) {
        k3_wmat_row(W, r, 0, cols, row);
        for (int64_t c = 0; c < cols; c++)
            if (row[c] != raw_w(t, sc, r0 + r, c0 + c)) {
                fail(v, what, layer, r, c);
                free(row);
                return;
            }
    }
    free(row);
}

static void check_vec(verdict *v, int layer, const char *what, const float *x, int64_t n,
                      const k3_tensor *t, int64_t off, int use_exp) {
    if (!t) return fail(v, what, layer, -1, -1);
    for (int64_t j = 0; j < n; j++) {
        float want = raw_f(t, off + j);
        if (use_exp) want = expf(want);
        if (x[j] != want) return fail(v, what, layer, j, off + j);
    }
}

/* KDA: conv taps of local channel j of segment seg = raw channel sh*hd + j of that segment. */
static void check_conv(verdict *v, const k3_st *st, int i, const float *conv, int64_t Pl,
                       int64_t sh_hd, int K) {
    const char *names[3] = {"model.layers.%d.self_attn.q_conv1d.weight",
                            "model.layers.%d.self_attn.k_conv1d.weight",
                            "model.layers.%d.self_attn.v_conv1d.weight"};
    for (int seg = 0; seg < 3; seg++) {
        const k3_tensor *t = raw(st, names[seg], i);
        if (!t) return fail(v, "conv", i, seg, -1);
        for (int64_t j = 0; j < Pl; j++)
            for (int k = 0; k < K; k++)
                if (conv[(seg * Pl + j) * K + k] != raw_f(t, (sh_hd + j) * K + k))
                    return fail(v,
                                seg == 0   ? "conv q group"
                                : seg == 1 ? "conv k group"
                                           : "conv v group",
                                i, j, k);
    }
}

static void check_kda(verdict *v, const k3_st *st, const k3_config *c, int i, const k3_kda_w *w,
                      int r, int N) {
    int hd = c->kda_head_dim, nh = c->kda_heads / N, sh = r * nh;
    int64_t D = c->hidden_size, Pl = (int64_t)nh * hd;
    const char *qkv[3] = {"model.layers.%d.self_attn.q_proj.weight",
                          "model.layers.%d.self_attn.k_proj.weight",
                          "model.layers.%d.self_attn.v_proj.weight"};
    const k3_wmat *m[3] = {&w->q, &w->k, &w->v};
    for (int s = 0; s < 3; s++)
        check_mat(v, i, qkv[s] + 16, m[s], Pl, D, raw(st, qkv[s], i), NULL, (int64_t)sh * hd, 0);
    check_conv(v, st, i, w->conv, Pl, (int64_t)sh * hd, c->kda_conv_kernel);
    check_vec(v, i, "A = exp(A_log)", w->A, nh, raw(st, "model.layers.%d.self_attn.A_log", i), sh,
              1);
    check_vec(v, i, "dt_bias", w->dt_bias, Pl, raw(st, "model.layers.%d.self_attn.dt_bias", i),
              (int64_t)sh * hd, 0);
    check_vec(v, i, "o_norm (unsharded)", w->o_norm, hd,
              raw(st, "model.layers.%d.self_attn.o_norm.weight", i), 0, 0);
    check_mat(v, i, "f_a_proj (unsharded)", &w->fa, hd, D,
              raw(st, "model.layers.%d.self_attn.f_a_proj.weight", i), NULL, 0, 0);
    check_mat(v, i, "f_b_proj", &w->fb, Pl, hd,
              raw(st, "model.layers.%d.self_attn.f_b_proj.weight", i), NULL, (int64_t)sh * hd, 0);
    check_mat(v, i, "b_proj", &w->b, nh, D, raw(st, "model.layers.%d.self_attn.b_proj.weight", i),
              NULL, sh, 0);
    check_mat(v, i, "g_proj", &w->g, Pl, D, raw(st, "model.layers.%d.self_attn.g_proj.weight", i),
              NULL, (int64_t)sh * hd, 0);
    check_mat(v, i, "o_proj", &w->o, D, Pl, raw(st, "model.layers.%d.self_attn.o_proj.weight", i),
              NULL, 0, (int64_t)sh * hd);
}

static void check_mla(verdict *v, const k3_st *st, const k3_config *c, int i, const k3_mla_w *w,
                      int r, int N) {
    int nh = c->num_attention_heads / N, sh = r * nh, nope = c->qk_nope_head_dim;
    int qd = nope + c->qk_rope_head_dim, vd = c->v_head_dim, kr = c->kv_lora_rank,
        ql = c->q_lora_rank;
    int64_t D = c->hidden_size;
    check_mat(v, i, "q_a_proj (unsharded)", &w->qa, ql, D,
              raw(st, "model.layers.%d.self_attn.q_a_proj.weight", i), NULL, 0, 0);
    check_vec(v, i, "q_a_layernorm (unsharded)", w->qa_norm, ql,
              raw(st, "model.layers.%d.self_attn.q_a_layernorm.weight", i), 0, 0);
    check_mat(v, i, "q_b_proj", &w->qb, (int64_t)nh * qd, ql,
              raw(st, "model.layers.%d.self_attn.q_b_proj.weight", i), NULL, (int64_t)sh * qd, 0);
    check_mat(v, i, "kv_a_proj_with_mqa (unsharded)", &w->kva, kr + c->qk_rope_head_dim, D,
              raw(st, "model.layers.%d.self_attn.kv_a_proj_with_mqa.weight", i), NULL, 0, 0);
    check_vec(v, i, "kv_a_layernorm (unsharded)", w->kva_norm, kr,
              raw(st, "model.layers.%d.self_attn.kv_a_layernorm.weight", i), 0, 0);
    const k3_tensor *kvb = raw(st, "model.layers.%d.self_attn.kv_b_proj.weight", i);
    for (int h = 0; h < nh; h++) { /* HF layout: per head nope key rows then value rows */
        int64_t base = (int64_t)(sh + h) * (nope + vd);
        check_mat(v, i, "W_UK of a local head", &w->uk[h], nope, kr, kvb, NULL, base, 0);
        check_mat(v, i, "W_UV of a local head", &w->uv[h], vd, kr, kvb, NULL, base + nope, 0);
    }
    check_mat(v, i, "MLA g_proj", &w->g, (int64_t)nh * vd, D,
              raw(st, "model.layers.%d.self_attn.g_proj.weight", i), NULL, (int64_t)sh * vd, 0);
    check_mat(v, i, "MLA o_proj", &w->o, D, (int64_t)nh * vd,
              raw(st, "model.layers.%d.self_attn.o_proj.weight", i), NULL, 0, (int64_t)sh * vd);
}

static void check_mlp(verdict *v, const k3_st *st, int i, const k3_mlp_w *w, const char *base,
                      int64_t I, int64_t D, int r, int N) {
    char n[200];
    int64_t Il = I / N;
    snprintf(n, sizeof n, "model.layers.%%d.%s.gate_proj.weight", base);
    check_mat(v, i, "gate_proj", &w->gate, Il, D, raw(st, n, i), NULL, r * Il, 0);
    snprintf(n, sizeof n, "model.layers.%%d.%s.up_proj.weight", base);
    check_mat(v, i, "up_proj", &w->up, Il, D, raw(st, n, i), NULL, r * Il, 0);
    snprintf(n, sizeof n, "model.layers.%%d.%s.down_proj.weight", base);
    check_mat(v, i, "down_proj", &w->down, D, Il, raw(st, n, i), NULL, 0, r * Il);
}

/* Expert e's w1/w2/w3, plain or MXFP4 (weight_packed + weight_scale). */
static void check_experts(verdict *v, const k3_st *st, const k3_config *c, int i, const k3_moe_w *w,
                          int r, int N) {
    int64_t mi = c->moe_intermediate_size, ml = mi / N, X = c->routed_expert_hidden_size;
    for (int e = 0; e < c->num_experts; e++) {
        const char *wn[3] = {"w1", "w3", "w2"};
        const k3_wmat *loc[3] = {&w->eg[e], &w->eu[e], &w->ed[e]};
        for (int k = 0; k < 3; k++) {
            char n[200], s[200];
            snprintf(n, sizeof n, "model.layers.%%d.block_sparse_moe.experts.%d.%s.weight", e,
                     wn[k]);
            const k3_tensor *t = NULL, *sc = NULL;
            char full[240];
            snprintf(full, sizeof full,
                     "language_model.model.layers.%d.block_sparse_moe.experts.%d.%s.weight", i, e,
                     wn[k]);
            t = k3_st_find(st, full);
            if (!t) { /* MXFP4 */
                snprintf(n, sizeof n,
                         "model.layers.%%d.block_sparse_moe.experts.%d.%s.weight_packed", e, wn[k]);
                snprintf(s, sizeof s,
                         "model.layers.%%d.block_sparse_moe.experts.%d.%s.weight_scale", e, wn[k]);
                t = raw(st, n, i);
                sc = raw(st, s, i);
            }
            if (k < 2)
                check_mat(v, i, k ? "expert up (w3)" : "expert gate (w1)", loc[k], ml, X, t, sc,
                          r * ml, 0);
            else
                check_mat(v, i, "expert down (w2)", loc[k], X, ml, t, sc, 0, r * ml);
        }
    }
}

static void check_moe(verdict *v, const k3_st *st, const k3_config *c, int i, const k3_moe_w *w,
                      int r, int N) {
    int64_t D = c->hidden_size, L = c->routed_expert_hidden_size;
    check_mat(v, i, "router (unsharded)", &w->router, c->num_experts, D,
              raw(st, "model.layers.%d.block_sparse_moe.gate.weight", i), NULL, 0, 0);
    check_vec(v, i, "e_score_correction_bias (unsharded)", w->bias, c->num_experts,
              raw(st, "model.layers.%d.block_sparse_moe.gate.e_score_correction_bias", i), 0, 0);
    check_mat(v, i, "routed_expert_down_proj (unsharded)", &w->lat_down, L, D,
              raw(st, "model.layers.%d.block_sparse_moe.routed_expert_down_proj.weight", i), NULL,
              0, 0);
    check_mat(v, i, "routed_expert_up_proj (unsharded)", &w->lat_up, D, L,
              raw(st, "model.layers.%d.block_sparse_moe.routed_expert_up_proj.weight", i), NULL, 0,
              0);
    check_vec(v, i, "routed_expert_norm (unsharded)", w->lat_norm, L,
              raw(st, "model.layers.%d.block_sparse_moe.routed_expert_norm.weight", i), 0, 0);
    check_experts(v, st, c, i, w, r, N);
    check_mlp(v, st, i, &w->shared, "block_sparse_moe.shared_experts",
              (int64_t)c->moe_intermediate_size * c->num_shared_experts, D, r, N);
}

static void check_layer(verdict *v, const k3_st *st, const k3_config *c, int i, const k3_layer *l,
                        int r, int N) {
    check_vec(v, i, "input_layernorm (unsharded)", l->in_norm, c->hidden_size,
              raw(st, "model.layers.%d.input_layernorm.weight", i), 0, 0);
    if (l->is_kda)
        check_kda(v, st, c, i, &l->kda, r, N);
    else
        check_mla(v, st, c, i, &l->mla, r, N);
    if (l->is_moe)
        check_moe(v, st, c, i, &l->moe, r, N);
    else
        check_mlp(v, st, i, &l->mlp, "mlp", c->intermediate_size, c->hidden_size, r, N);
}

/* ---------- the rank's layers, as k3_model_load builds them ---------- */

typedef struct {
    k3_model *mp;
    k3_model m; /* copy of *mp's header: .ck.cfg (the full config) and .L */
    k3_layer *L;
    int n;
} rank_model;

static int load_rank(const char *dir, int r, int N, rank_model *rm) {
    memset(rm, 0, sizeof *rm);
    k3_load_opts o = {.tp_rank = r, .tp_size = N, .pp_size = 1};
    rm->mp = k3_model_load(dir, &o);
    if (!rm->mp) return -1;
    rm->m = *rm->mp;
    rm->L = rm->mp->L;
    rm->n = rm->mp->ck.cfg.num_hidden_layers;
    return 0;
}

static void free_rank(rank_model *rm) {
    k3_model_free(rm->mp);
    memset(rm, 0, sizeof *rm);
}

static void slices_of(const char *name) {
    snprintf(g_dir, sizeof g_dir, "tests/fixtures/%s", name);
    k3_st *st = k3_st_open_dir(g_dir);
    CHECK(st != NULL, "%s", k3_errmsg());
    if (!st) return;
    int Ns[2] = {2, 4};
    for (int a = 0; a < 2; a++)
        for (int r = 0; r < Ns[a]; r++) {
            rank_model rm;
            int rc = load_rank(g_dir, r, Ns[a], &rm);
            CHECK(rc == 0, "%s rank %d/%d: %s", name, r, Ns[a], k3_errmsg());
            if (!rc) {
                verdict v = {0, ""};
                for (int i = 0; i < rm.n; i++)
                    check_layer(&v, st, &rm.m.ck.cfg, i, &rm.L[i], r, Ns[a]);
                CHECK(v.bad == 0, "%s rank %d/%d: %d wrong slices, first: %s", name, r, Ns[a],
                      v.bad, v.first);
            }
            free_rank(&rm);
        }
    k3_st_free(st);
}

TEST(slices_tp4_bf16) {
    slices_of("tp4-bf16");
}
TEST(slices_tp4_mxfp4) {
    slices_of("tp4-mxfp4");
}

/* ---------- negative controls ---------- */

/* The checkers must catch the classic mistakes on layer 0 (KDA) of rank 1 of 4. */
TEST(negative_controls_detected) {
    const char *dir = "tests/fixtures/tp4-bf16";
    k3_st *st = k3_st_open_dir(dir);
    rank_model rm, whole;
    int N = 4, r = 1;
    CHECK(st && load_rank(dir, r, N, &rm) == 0 && load_rank(dir, 0, 1, &whole) == 0, "%s",
          k3_errmsg());
    if (!st) return;
    const k3_config *c = &rm.m.ck.cfg;
    k3_kda_w good = rm.L[0].kda, full = whole.L[0].kda;
    int hd = c->kda_head_dim, nh = c->kda_heads / N, K = c->kda_conv_kernel;
    int64_t Pl = (int64_t)nh * hd;
    verdict v = {0, ""};
    check_kda(&v, st, c, 0, &good, r, N);
    CHECK(v.bad == 0, "the correct slice must pass: %s", v.first);

    /* 1. A_log sliced without the head offset (heads 0..nh-1 on every rank) */
    k3_kda_w bad = good;
    bad.A = full.A; /* first nh entries of the whole vector */
    v = (verdict){0, ""};
    check_kda(&v, st, c, 0, &bad, r, N);
    CHECK(v.bad > 0 && strstr(v.first, "A = exp(A_log)"), "wrong A_log slice not detected (%s)",
          v.first);

    /* 2. stale conv groups: one contiguous block of 3*Pl rows instead of q|k|v per segment */
    bad = good;
    bad.conv = full.conv + (int64_t)r * 3 * Pl * K;
    v = (verdict){0, ""};
    check_kda(&v, st, c, 0, &bad, r, N);
    CHECK(v.bad > 0 && strstr(v.first, "conv"), "contiguous conv slice not detected (%s)", v.first);

    /* 3. conv not sliced at all (the whole model's taps) */
    bad = good;
    bad.conv = full.conv;
    v = (verdict){0, ""};
    check_kda(&v, st, c, 0, &bad, r, N);
    CHECK(v.bad > 0, "unsliced conv not detected");

    /* 4. o_norm wrongly sliced like a per-channel vector */
    bad = good;
    bad.o_norm = full.dt_bias;
    v = (verdict){0, ""};
    check_kda(&v, st, c, 0, &bad, r, N);
    CHECK(v.bad > 0 && strstr(v.first, "o_norm"), "wrong o_norm not detected (%s)", v.first);

    /* 5. f_a_proj sliced by output (it must stay whole) */
    bad = good;
    bad.fa = k3_wmat_rows(&full.fa, 0, hd / N);
    v = (verdict){0, ""};
    check_kda(&v, st, c, 0, &bad, r, N);
    CHECK(v.bad > 0 && strstr(v.first, "f_a_proj"), "sliced f_a_proj not detected (%s)", v.first);
    free_rank(&rm);
    free_rank(&whole);
    k3_st_free(st);
}

/* ---------- refusals ---------- */

TEST(bad_rank_counts_refused) {
    rank_model rm;
    CHECK(load_rank("tests/fixtures/tp4-bf16", 0, 3, &rm) == -1, "3 does not divide 4 heads");
    CHECK(strstr(k3_errmsg(), "not divisible by 3") && strstr(k3_errmsg(), "heads"), "message: %s",
          k3_errmsg());
    free_rank(&rm);
    /* ext-mxfp4: 2 heads, experts of width 32 in MXFP4 groups of 32: a 1/2 slice splits a group */
    char ext[4200];
    snprintf(ext, sizeof ext, "%s/ext-mxfp4", t_fixtures());
    CHECK(load_rank(ext, 1, 2, &rm) == -1, "an MXFP4 group split by the slice must be refused");
    CHECK(strstr(k3_errmsg(), "quantization group") && strstr(k3_errmsg(), "down_proj"),
          "message: %s", k3_errmsg());
    free_rank(&rm);
}

int main(void) {
    RUN(slices_tp4_bf16);
    RUN(slices_tp4_mxfp4);
    RUN(negative_controls_detected);
    RUN(bad_rank_counts_refused);
    return t_done();
}
