/* mla.c — gated NoPE Multi-head Latent Attention (spec §2.5).
 *
 * The cache holds the normalized latent c (r) and the raw shared k_pe (rope)
 * per token. Path A (expanded: per-head keys and values from the latents) is
 * used for long chunks, path B (absorbed: W_UK^T folded into the query, W_UV
 * applied after attending over latents) for decode and short chunks, whichever
 * needs fewer multiply-adds. They are the same function; the test suite checks
 * that they agree (and forces each path in every mode). No RoPE anywhere. */
#include "base/err.h"
#include "base/mem.h"
#include "kernels/matmul.h"
#include "model/model.h"
#include "model/ops.h"
#include "model/rowpar.h"

#include <stdlib.h>
#include <string.h>

static int cache_grow(k3_layer_cache *c, int64_t need, int r, int rope) {
    if (need <= c->cap) return 0;
    int64_t cap = c->cap ? c->cap : 64;
    while (cap < need) cap *= 2;
    float *lat = realloc(c->lat, sizeof(float) * (size_t)(cap * r));
    if (!lat)
        return k3_seterr("out of memory growing the MLA cache to %lld tokens", (long long)cap);
    c->lat = lat;
    float *kpe = realloc(c->kpe, sizeof(float) * (size_t)(cap * (rope ? rope : 1)));
    if (!kpe)
        return k3_seterr("out of memory growing the MLA cache to %lld tokens", (long long)cap);
    c->kpe = kpe;
    c->cap = cap;
    return 0;
}

/* Queries [T, nh*(nope+rope)] from the normalized input. */
static void mla_queries(const k3_model *m, const k3_mla_w *w, const float *x, int64_t T, float *q) {
    const k3_config *c = m->c;
    if (c->q_lora_rank) {
        float *cq = k3_xmalloc(sizeof(float) * (size_t)(T * c->q_lora_rank));
        k3_matmul(&w->qa, x, T, cq);
        k3_rmsnorm_rows(cq, T, c->q_lora_rank, w->qa_norm, 1e-6, cq);
        k3_matmul(&w->qb, cq, T, q);
        free(cq);
    } else {
        k3_matmul(&w->q, x, T, q);
    }
}

/* Append normalized latents and k_pe of T tokens to the cache. */
static int mla_append(const k3_model *m, const k3_mla_w *w, k3_layer_cache *c, const float *x,
                      int64_t T) {
    int r = m->c->kv_lora_rank, rope = m->c->qk_rope_head_dim;
    if (cache_grow(c, c->n + T, r, rope)) return -1;
    float *ckv = k3_xmalloc(sizeof(float) * (size_t)(T * (r + rope)));
    k3_matmul(&w->kva, x, T, ckv);
    for (int64_t t = 0; t < T; t++) {
        k3_rmsnorm(ckv + t * (r + rope), r, w->kva_norm, 1e-6, c->lat + (c->n + t) * r);
        memcpy(c->kpe + (c->n + t) * rope, ckv + t * (r + rope) + r, sizeof(float) * (size_t)rope);
    }
    c->n += T;
    free(ckv);
    return 0;
}

/* Y[T, rows] = W_UK-product of X: with the HF layout uk is [nope, r]; MLX stores W_UK^T. */
static void uk_apply(const k3_mla_w *w, int h, const float *X, int64_t T, float *Y, int transpose) {
    if (w->uk_transposed == transpose)
        k3_matmul(&w->uk[h], X, T, Y);
    else
        k3_wmat_tmatmul(&w->uk[h], X, T, Y);
}

/* q_pe . k_pe[s] part of the score for every cached s (shared by both paths). */
static float pe_dot(const float *qpe, const float *kpe, int rope) {
    double d = 0;
    for (int i = 0; i < rope; i++) d += (double)qpe[i] * kpe[i];
    return (float)d;
}

/* Path A for head h: per-head keys/values from all N cached latents. o: [T, vd] (stride ldo). */
static void head_expanded(const k3_model *m, const k3_mla_w *w, const k3_layer_cache *c, int h,
                          const float *q, int64_t T, float *o, int64_t ldo) {
    const k3_config *cf = m->c;
    int nope = cf->qk_nope_head_dim, rope = cf->qk_rope_head_dim, vd = cf->v_head_dim;
    int64_t N = c->n, off = N - T, qs = (int64_t)cf->num_attention_heads * (nope + rope);
    float scale = 1.0f / sqrtf((float)(nope + rope));
    float *kn = k3_xmalloc(sizeof(float) * (size_t)(N * nope));
    float *vv = k3_xmalloc(sizeof(float) * (size_t)(N * vd));
    float *p = k3_xmalloc(sizeof(float) * (size_t)N);
    uk_apply(w, h, c->lat, N, kn, 0);
    k3_matmul(&w->uv[h], c->lat, N, vv);
    for (int64_t t = 0; t < T; t++) {
        const float *qn = q + t * qs + (int64_t)h * (nope + rope), *qp = qn + nope;
        for (int64_t s = 0; s < N; s++) {
            if (s > off + t) {
                p[s] = -INFINITY;
                continue;
            }
            double d = 0;
            for (int i = 0; i < nope; i++) d += (double)qn[i] * kn[s * nope + i];
            p[s] = scale * ((float)d + pe_dot(qp, c->kpe + s * rope, rope));
        }
        k3_softmax(p, N);
        for (int i = 0; i < vd; i++) {
            double a = 0;
            for (int64_t s = 0; s <= off + t; s++) a += (double)p[s] * vv[s * vd + i];
            o[t * ldo + i] = (float)a;
        }
    }
    free(kn);
    free(vv);
    free(p);
}

/* Path B for head h: attend over latents with the absorbed query, then W_UV. */
static void head_absorbed(const k3_model *m, const k3_mla_w *w, const k3_layer_cache *c, int h,
                          const float *q, int64_t T, float *o, int64_t ldo) {
    const k3_config *cf = m->c;
    int nope = cf->qk_nope_head_dim, rope = cf->qk_rope_head_dim, vd = cf->v_head_dim;
    int r = cf->kv_lora_rank;
    int64_t N = c->n, off = N - T, qs = (int64_t)cf->num_attention_heads * (nope + rope);
    float scale = 1.0f / sqrtf((float)(nope + rope));
    float *qn = k3_xmalloc(sizeof(float) * (size_t)(T * nope));
    float *qa = k3_xmalloc(sizeof(float) * (size_t)(T * r));
    float *ol = k3_xmalloc(sizeof(float) * (size_t)(T * r));
    float *ov = k3_xmalloc(sizeof(float) * (size_t)(T * vd));
    float *p = k3_xmalloc(sizeof(float) * (size_t)N);
    for (int64_t t = 0; t < T; t++)
        memcpy(qn + t * nope, q + t * qs + (int64_t)h * (nope + rope),
               sizeof(float) * (size_t)nope);
    uk_apply(w, h, qn, T, qa, 1);
    for (int64_t t = 0; t < T; t++) {
        const float *qp = q + t * qs + (int64_t)h * (nope + rope) + nope;
        int64_t last = off + t;
        for (int64_t s = 0; s <= last; s++) {
            double d = 0;
            for (int i = 0; i < r; i++) d += (double)qa[t * r + i] * c->lat[s * r + i];
            p[s] = scale * ((float)d + pe_dot(qp, c->kpe + s * rope, rope));
        }
        k3_softmax(p, last + 1);
        for (int i = 0; i < r; i++) {
            double a = 0;
            for (int64_t s = 0; s <= last; s++) a += (double)p[s] * c->lat[s * r + i];
            ol[t * r + i] = (float)a;
        }
    }
    k3_matmul(&w->uv[h], ol, T, ov);
    for (int64_t t = 0; t < T; t++) memcpy(o + t * ldo, ov + t * vd, sizeof(float) * (size_t)vd);
    free(qn);
    free(qa);
    free(ol);
    free(ov);
    free(p);
}

/* Multiply-adds per head: path A expands keys and values for all N cached tokens,
 * path B scores T queries against N latents of width r. A wins for long chunks
 * (T > ~(nope+vd)/2), B for decode and short chunks. Same choice on every
 * tensor-parallel rank (it depends on T and N only). */
static int absorbed_is_cheaper(const k3_config *c, int64_t T, int64_t N) {
    double r = c->kv_lora_rank, w = c->qk_nope_head_dim + c->v_head_dim;
    double cost_a = (double)N * r * w + (double)T * (double)N * w;
    double cost_b = (double)T * r * w + 2.0 * (double)T * (double)N * r;
    return T == 1 || cost_b < cost_a;
}

int k3_mla_forward(const k3_model *m, const k3_layer *l, k3_layer_cache *c, const float *x,
                   int64_t T, float *out, int path) {
    const k3_config *cf = m->c;
    const k3_mla_w *w = &l->mla;
    int nh = cf->num_attention_heads, vd = cf->v_head_dim;
    int64_t qs = (int64_t)nh * (cf->qk_nope_head_dim + cf->qk_rope_head_dim), os = (int64_t)nh * vd;
    if (mla_append(m, w, c, x, T)) return -1;
    float *q = k3_xmalloc(sizeof(float) * (size_t)(T * qs));
    float *o = k3_xmalloc(sizeof(float) * (size_t)(T * os));
    mla_queries(m, w, x, T, q);
    int absorbed = path ? path == 'B' : absorbed_is_cheaper(cf, T, c->n);
#pragma omp parallel for schedule(dynamic)
    for (int h = 0; h < nh; h++) {
        if (absorbed)
            head_absorbed(m, w, c, h, q, T, o + (int64_t)h * vd, os);
        else
            head_expanded(m, w, c, h, q, T, o + (int64_t)h * vd, os);
    }
    if (cf->mla_use_output_gate) {
        float *g = k3_xmalloc(sizeof(float) * (size_t)(T * os));
        k3_matmul(&w->g, x, T, g);
        for (int64_t i = 0; i < T * os; i++) o[i] *= k3_sigmoid(g[i]);
        free(g);
    }
    k3_rowpar_matmul(m, &w->o, o, T, out); /* canonical block order (rowpar.h) */
    k3_model_reduce(m, out, T * cf->hidden_size);
    free(q);
    free(o);
    return 0;
}
