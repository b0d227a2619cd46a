/* model_load.c — fills one k3_layer from the checkpoint (either layout): which
 * tensor names make up each block, their expected shapes, and the fused /
 * split variants (qkv_proj vs q/k/v_proj, qkv_conv vs q/k/v_conv1d, embed_q +
 * unembed_out vs kv_b_proj, switch_mlp stacks vs experts.N.w1/w2/w3); and the
 * model-wide tensors (embedding, final norm, head) and the weight byte counts. */
#include "base/err.h"
#include "base/mem.h"
#include "model/model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#define NM 256

/* "model.layers.<i>.<suffix>" */
static const char *lname(char *buf, int i, const char *suffix) {
    snprintf(buf, NM, "model.layers.%d.%.200s", i, suffix);
    return buf;
}

static float *vec(k3_ckpt *ck, const char *name, int64_t n, int *rc) {
    float *v = k3_xcalloc((size_t)(n ? n : 1), sizeof(float));
    if (!*rc && k3_ckpt_vec(ck, name, n, v)) *rc = -1;
    return v;
}

static void lin(k3_ckpt *ck, const char *name, int64_t r, int64_t c, k3_wmat *w, int *rc) {
    if (!*rc && k3_ckpt_linear(ck, name, r, c, w)) *rc = -1;
}

/* AttnRes vector: norm ⊙ proj, folded once at load (spec §2.2). */
static float *k3_load_attnres(k3_ckpt *ck, const char *base, int64_t D, int *rc) {
    char n[NM];
    snprintf(n, NM, "%s_norm.weight", base);
    float *w = vec(ck, n, D, rc);
    snprintf(n, NM, "%s_proj.weight", base);
    float *p = vec(ck, n, D, rc);
    for (int64_t d = 0; d < D; d++) w[d] *= p[d];
    free(p);
    return w;
}

static void load_kda_qkv(k3_ckpt *ck, int i, k3_kda_w *w, int64_t P, int64_t D, int K, int *rc) {
    char n[NM];
    if (k3_ckpt_has_module(ck, lname(n, i, "self_attn.qkv_proj"))) {
        k3_wmat f;
        lin(ck, n, 3 * P, D, &f, rc);
        w->q = k3_wmat_rows(&f, 0, P);
        w->k = k3_wmat_rows(&f, P, P);
        w->v = k3_wmat_rows(&f, 2 * P, P);
    } else {
        lin(ck, lname(n, i, "self_attn.q_proj"), P, D, &w->q, rc);
        lin(ck, lname(n, i, "self_attn.k_proj"), P, D, &w->k, rc);
        lin(ck, lname(n, i, "self_attn.v_proj"), P, D, &w->v, rc);
    }
    w->conv = k3_xcalloc((size_t)(3 * P * K), sizeof(float));
    if (*rc) return;
    if (k3_ckpt_has_module(ck, lname(n, i, "self_attn.qkv_conv.conv.weight"))) {
        if (k3_ckpt_conv(ck, n, 3 * P, K, w->conv)) *rc = -1;
        return;
    }
    const char *sub[3] = {"self_attn.q_conv1d.weight", "self_attn.k_conv1d.weight",
                          "self_attn.v_conv1d.weight"};
    for (int b = 0; b < 3 && !*rc; b++)
        if (k3_ckpt_conv(ck, lname(n, i, sub[b]), P, K, w->conv + b * P * K)) *rc = -1;
}

static int load_kda(k3_ckpt *ck, int i, k3_kda_w *w) {
    const k3_config *c = &ck->cfg;
    int H = c->kda_heads, hd = c->kda_head_dim, K = c->kda_conv_kernel, rc = 0;
    int64_t P = (int64_t)H * hd, D = c->hidden_size;
    char n[NM];
    load_kda_qkv(ck, i, w, P, D, K, &rc);
    lin(ck, lname(n, i, "self_attn.f_a_proj"), hd, D, &w->fa, &rc);
    lin(ck, lname(n, i, "self_attn.f_b_proj"), P, hd, &w->fb, &rc);
    lin(ck, lname(n, i, "self_attn.b_proj"), H, D, &w->b, &rc);
    if (c->kda_full_rank_gate) {
        lin(ck, lname(n, i, "self_attn.g_proj"), P, D, &w->g, &rc);
    } else {
        lin(ck, lname(n, i, "self_attn.g_a_proj"), hd, D, &w->ga, &rc);
        lin(ck, lname(n, i, "self_attn.g_b_proj"), P, hd, &w->gb, &rc);
    }
    w->A = k3_xcalloc((size_t)H, sizeof(float));
    if (!rc && k3_ckpt_alog(ck, lname(n, i, "self_attn.A_log"), H, w->A)) rc = -1;
    for (int h = 0; h < H; h++) w->A[h] = expf(w->A[h]);
    w->dt_bias = vec(ck, lname(n, i, "self_attn.dt_bias"), P, &rc);
    w->o_norm = vec(ck, lname(n, i, "self_attn.o_norm.weight"), hd, &rc);
    lin(ck, lname(n, i, "self_attn.o_proj"), D, P, &w->o, &rc);
    return rc;
}

/* W_UK / W_UV per head: views of kv_b_proj (HF) or of embed_q / unembed_out (MLX). */
static void load_mla_heads(k3_ckpt *ck, int i, k3_mla_w *w, int *rc) {
    const k3_config *c = &ck->cfg;
    int nh = c->num_attention_heads, nope = c->qk_nope_head_dim, vd = c->v_head_dim;
    int r = c->kv_lora_rank;
    char n[NM];
    w->uk = k3_xcalloc((size_t)nh, sizeof(k3_wmat));
    w->uv = k3_xcalloc((size_t)nh, sizeof(k3_wmat));
    if (*rc) return;
    if (k3_ckpt_has_module(ck, lname(n, i, "self_attn.embed_q"))) {
        w->uk_transposed = 1;
        if (k3_ckpt_stacked(ck, n, nh, r, nope, w->uk) ||
            k3_ckpt_stacked(ck, lname(n, i, "self_attn.unembed_out"), nh, vd, r, w->uv))
            *rc = -1;
        return;
    }
    k3_wmat kvb;
    lin(ck, lname(n, i, "self_attn.kv_b_proj"), (int64_t)nh * (nope + vd), r, &kvb, rc);
    if (*rc) return;
    for (int h = 0; h < nh; h++) { /* per head: nope key rows, then value rows */
        w->uk[h] = k3_wmat_rows(&kvb, (int64_t)h * (nope + vd), nope);
        w->uv[h] = k3_wmat_rows(&kvb, (int64_t)h * (nope + vd) + nope, vd);
    }
}

static int load_mla(k3_ckpt *ck, int i, k3_mla_w *w) {
    const k3_config *c = &ck->cfg;
    int nh = c->num_attention_heads, nope = c->qk_nope_head_dim, rope = c->qk_rope_head_dim;
    int vd = c->v_head_dim, r = c->kv_lora_rank, ql = c->q_lora_rank, rc = 0;
    int64_t D = c->hidden_size, qs = (int64_t)nh * (nope + rope);
    char n[NM];
    if (ql) {
        lin(ck, lname(n, i, "self_attn.q_a_proj"), ql, D, &w->qa, &rc);
        w->qa_norm = vec(ck, lname(n, i, "self_attn.q_a_layernorm.weight"), ql, &rc);
        lin(ck, lname(n, i, "self_attn.q_b_proj"), qs, ql, &w->qb, &rc);
    } else {
        lin(ck, lname(n, i, "self_attn.q_proj"), qs, D, &w->q, &rc);
    }
    lin(ck, lname(n, i, "self_attn.kv_a_proj_with_mqa"), r + rope, D, &w->kva, &rc);
    w->kva_norm = vec(ck, lname(n, i, "self_attn.kv_a_layernorm.weight"), r, &rc);
    load_mla_heads(ck, i, w, &rc);
    if (c->mla_use_output_gate)
        lin(ck, lname(n, i, "self_attn.g_proj"), (int64_t)nh * vd, D, &w->g, &rc);
    lin(ck, lname(n, i, "self_attn.o_proj"), D, (int64_t)nh * vd, &w->o, &rc);
    return rc;
}

static void load_mlp(k3_ckpt *ck, const char *base, int64_t I, int64_t D, k3_mlp_w *w, int *rc) {
    char n[NM];
    snprintf(n, NM, "%s.gate_proj", base);
    lin(ck, n, I, D, &w->gate, rc);
    snprintf(n, NM, "%s.up_proj", base);
    lin(ck, n, I, D, &w->up, rc);
    snprintf(n, NM, "%s.down_proj", base);
    lin(ck, n, D, I, &w->down, rc);
}

/* Routed experts: MLX stacks (switch_mlp) or the release's experts.N.w1/w2/w3. */
static void load_experts(k3_ckpt *ck, int i, k3_moe_w *w, int64_t mi, int64_t X, int *rc) {
    int E = ck->cfg.num_experts;
    char n[NM], b[NM];
    w->eg = k3_xcalloc((size_t)E, sizeof(k3_wmat));
    w->eu = k3_xcalloc((size_t)E, sizeof(k3_wmat));
    w->ed = k3_xcalloc((size_t)E, sizeof(k3_wmat));
    if (*rc) return;
    if (k3_ckpt_has_module(ck, lname(n, i, "mlp.switch_mlp.gate_proj"))) {
        if (k3_ckpt_stacked(ck, n, E, mi, X, w->eg) ||
            k3_ckpt_stacked(ck, lname(n, i, "mlp.switch_mlp.up_proj"), E, mi, X, w->eu) ||
            k3_ckpt_stacked(ck, lname(n, i, "mlp.switch_mlp.down_proj"), E, X, mi, w->ed))
            *rc = -1;
        return;
    }
    for (int e = 0; e < E && !*rc; e++) {
        snprintf(b, NM, "block_sparse_moe.experts.%d.w1", e);
        lin(ck, lname(n, i, b), mi, X, &w->eg[e], rc);
        snprintf(b, NM, "block_sparse_moe.experts.%d.w3", e);
        lin(ck, lname(n, i, b), mi, X, &w->eu[e], rc);
        snprintf(b, NM, "block_sparse_moe.experts.%d.w2", e);
        lin(ck, lname(n, i, b), X, mi, &w->ed[e], rc);
    }
}

static int load_moe(k3_ckpt *ck, int i, k3_moe_w *w) {
    const k3_config *c = &ck->cfg;
    int64_t D = c->hidden_size, L = c->routed_expert_hidden_size, X = L ? L : D;
    int64_t mi = c->moe_intermediate_size;
    int rc = 0;
    char n[NM];
    lin(ck, lname(n, i, "mlp.gate"), c->num_experts, D, &w->router, &rc);
    w->bias = vec(ck, lname(n, i, "mlp.e_score_correction_bias"), c->num_experts, &rc);
    if (L) {
        lin(ck, lname(n, i, "mlp.routed_expert_down_proj"), L, D, &w->lat_down, &rc);
        lin(ck, lname(n, i, "mlp.routed_expert_up_proj"), D, L, &w->lat_up, &rc);
        if (c->latent_moe_use_norm)
            w->lat_norm = vec(ck, lname(n, i, "mlp.routed_expert_norm.weight"), L, &rc);
    }
    load_experts(ck, i, w, mi, X, &rc);
    if (c->num_shared_experts)
        load_mlp(ck, lname(n, i, "mlp.shared_experts"), mi * c->num_shared_experts, D, &w->shared,
                 &rc);
    return rc;
}

int k3_layer_load(k3_model *m, int i, k3_layer *l) {
    k3_ckpt *ck = &m->ck;
    const k3_config *c = &ck->cfg;
    int64_t D = c->hidden_size;
    int rc = 0;
    char n[NM];
    l->is_kda = c->is_kda[i];
    l->is_moe = k3_config_is_moe_layer(c, i);
    l->in_norm = vec(ck, lname(n, i, "input_layernorm.weight"), D, &rc);
    l->post_norm = vec(ck, lname(n, i, "post_attention_layernorm.weight"), D, &rc);
    if (c->attn_res_block_size) {
        l->w_attn = k3_load_attnres(ck, lname(n, i, "self_attention_res"), D, &rc);
        l->w_mlp = k3_load_attnres(ck, lname(n, i, "mlp_res"), D, &rc);
    }
    if (!rc) rc = l->is_kda ? load_kda(ck, i, &l->kda) : load_mla(ck, i, &l->mla);
    if (!rc) {
        if (l->is_moe)
            rc = load_moe(ck, i, &l->moe);
        else
            load_mlp(ck, lname(n, i, "mlp"), c->intermediate_size, D, &l->mlp, &rc);
    }
    return rc;
}

void k3_layer_free(k3_layer *l) {
    free(l->in_norm);
    free(l->post_norm);
    free(l->w_attn);
    free(l->w_mlp);
    free(l->kda.conv);
    free(l->kda.A);
    free(l->kda.dt_bias);
    free(l->kda.o_norm);
    free(l->mla.qa_norm);
    free(l->mla.kva_norm);
    free(l->mla.uk);
    free(l->mla.uv);
    free(l->moe.bias);
    free(l->moe.lat_norm);
    free(l->moe.eg);
    free(l->moe.eu);
    free(l->moe.ed);
}

/* The embedding, final norm and lm_head, and the output AttnRes vector. */
int k3_load_globals(k3_model *m) {
    k3_ckpt *ck = &m->ck;
    const k3_config *c = m->c;
    int64_t D = c->hidden_size, V = c->vocab_size;
    if (k3_ckpt_linear(ck, "model.embed_tokens", V, D, &m->embed)) return -1;
    if (c->tie_word_embeddings)
        m->head = m->embed;
    else if (k3_ckpt_linear(ck, "lm_head", V, D, &m->head))
        return -1;
    m->final_norm = k3_xcalloc((size_t)D, sizeof(float));
    if (k3_ckpt_vec(ck, "model.norm.weight", D, m->final_norm)) return -1;
    if (!c->attn_res_block_size) return 0;
    m->w_out = k3_xcalloc((size_t)D, sizeof(float));
    float *p = k3_xcalloc((size_t)D, sizeof(float));
    int rc = k3_ckpt_vec(ck, "model.output_attn_res_norm.weight", D, m->w_out) ||
             k3_ckpt_vec(ck, "model.output_attn_res_proj.weight", D, p);
    for (int64_t d = 0; d < D; d++) m->w_out[d] *= p[d];
    free(p);
    return rc ? -1 : 0;
}

/* Bytes of every Linear, and of what one decoded token reads (top-k experts only). */
void k3_count_bytes(k3_model *m) {
    uint64_t all =
        k3_wmat_bytes(&m->embed) + (m->c->tie_word_embeddings ? 0 : k3_wmat_bytes(&m->head));
    uint64_t act = k3_wmat_bytes(&m->head);
    for (int i = 0; i < m->c->num_hidden_layers; i++) {
        const k3_layer *l = &m->L[i];
        const k3_wmat *ws[] = {
            &l->kda.q,          &l->kda.k,      &l->kda.v,           &l->kda.fa,
            &l->kda.fb,         &l->kda.b,      &l->kda.g,           &l->kda.ga,
            &l->kda.gb,         &l->kda.o,      &l->mla.qa,          &l->mla.qb,
            &l->mla.q,          &l->mla.kva,    &l->mla.g,           &l->mla.o,
            &l->mlp.gate,       &l->mlp.up,     &l->mlp.down,        &l->moe.router,
            &l->moe.lat_down,   &l->moe.lat_up, &l->moe.shared.gate, &l->moe.shared.up,
            &l->moe.shared.down};
        uint64_t b = 0;
        for (size_t k = 0; k < sizeof ws / sizeof ws[0]; k++) b += k3_wmat_bytes(ws[k]);
        for (int h = 0; !l->is_kda && l->mla.uk && h < m->c->num_attention_heads; h++)
            b += k3_wmat_bytes(&l->mla.uk[h]) + k3_wmat_bytes(&l->mla.uv[h]);
        uint64_t e1 = 0;
        if (l->is_moe) {
            e1 = k3_wmat_bytes(&l->moe.eg[0]) + k3_wmat_bytes(&l->moe.eu[0]) +
                 k3_wmat_bytes(&l->moe.ed[0]);
            all += e1 * (uint64_t)m->c->num_experts;
        }
        all += b;
        act += b + e1 * (uint64_t)m->c->num_experts_per_token;
    }
    m->weight_bytes = all;
    m->active_bytes = act;
}
