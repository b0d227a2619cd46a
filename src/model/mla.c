/* mla.c — gated NoPE Multi-head Latent Attention (spec §2.5).
 *
 * The cache holds the normalized latent c (r) and the raw shared k_pe (rope)
 * per token, in f32 or (--cache-type bf16) rounded to bf16. Path A
 * (expanded: per-head keys and values from the latents) is used for long
 * chunks, path B (absorbed: W_UK^T folded into the query, W_UV applied after
 * attending over latents) for decode and short chunks, whichever needs fewer
 * multiply-adds. They are the same function; the test suite checks that they
 * agree (and forces each path in every mode). No RoPE anywhere. Path B hands
 * a bf16 cache straight to the tiled kernel; path A widens it once per call
 * before its products.
 *
 * Both paths end in the tiled attention (kernels/mla_tile.h): every head and
 * query row of a sequence's step scored against each block of its cache in
 * one pass, so a step reads the cache once per chunk of rows instead of once
 * per (head, query) pair; the threads split the cache at points fixed by its
 * length, so threaded output is bitwise that of one thread. The scalar double
 * reference runs under K3_KERNELS=ref. Temporaries live in the model's
 * workspace. */
#include "base/err.h"
#include "base/mem.h"
#include "base/par.h"
#include "kernels/kernels.h"
#include "model/model.h"
#include "model/ops.h"
#include "model/rowpar.h"
#include "quant/dtype.h"

#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

static int use_ref(void) {
    return k3_kernels_active() == K3_KERNELS_REF || !k3_cpu_has_avx2(); /* cached (runtime.c) */
}

/* es: bytes per cached element (k3_cache_elem_bytes). */
static int cache_grow(k3_layer_cache *c, int64_t need, int r, int rope, size_t es) {
    if (need <= c->cap) return 0;
    int64_t cap = c->cap ? c->cap : 64;
    while (cap < need) cap *= 2; /* geometric: O(log n) reallocations over a sequence */
    void *lat = k3_big_realloc(c->lat, es * (size_t)(cap * r));
    if (!lat)
        return k3_seterr("out of memory growing the MLA cache to %lld tokens", (long long)cap);
    c->lat = lat;
    void *kpe = k3_big_realloc(c->kpe, es * (size_t)(cap * (rope ? rope : 1)));
    if (!kpe)
        return k3_seterr("out of memory growing the MLA cache to %lld tokens", (long long)cap);
    c->kpe = kpe;
    c->cap = cap;
    k3_workspace_count_grow();
    return 0;
}

static float *ws_floats(k3_workspace *ws, int slot, int64_t n) {
    return k3_grow(&ws->mla[slot], sizeof(float) * (size_t)(n > 0 ? n : 1));
}

/* Decode (one row): the products of x computed up front in one set (mvset.h):
 * kv_a into ckv, q_a into cq (or q_proj into q), the output gate into g. */
typedef struct {
    float *ckv, *cq, *g;
} k3_mla_pre;

static void mla_pre(const k3_model *m, const k3_mla_w *w, const float *x, float *q,
                    k3_workspace *ws, k3_mla_pre *pre) {
    const k3_config *c = m->c;
    int64_t r = c->kv_lora_rank, rope = c->qk_rope_head_dim;
    int64_t os = (int64_t)c->num_attention_heads * c->v_head_dim;
    k3_mv p[3];
    int n = 0;
    pre->ckv = ws_floats(ws, K3_MLA_CKV, r + rope);
    p[n++] = (k3_mv){&w->kva, x, pre->ckv};
    pre->cq = c->q_lora_rank ? ws_floats(ws, K3_MLA_CQ, c->q_lora_rank) : NULL;
    p[n++] = c->q_lora_rank ? (k3_mv){&w->qa, x, pre->cq} : (k3_mv){&w->q, x, q};
    pre->g = c->mla_use_output_gate ? ws_floats(ws, K3_MLA_G, os) : NULL;
    if (pre->g) p[n++] = (k3_mv){&w->g, x, pre->g};
    k3_mvset_run(p, n);
}

/* Queries [T, nh*(nope+rope)] from the normalized input. */
static void mla_queries(const k3_model *m, const k3_mla_w *w, const float *x, int64_t T, float *q,
                        k3_workspace *ws, const k3_mla_pre *pre) {
    const k3_config *c = m->c;
    if (pre) { /* qa (or q) done: the rest of the chain */
        if (c->q_lora_rank) {
            k3_rmsnorm_rows(pre->cq, T, c->q_lora_rank, w->qa_norm, 1e-6, pre->cq);
            k3_matmul(&w->qb, pre->cq, T, q);
        }
        return;
    }
    if (c->q_lora_rank) {
        float *cq = ws_floats(ws, K3_MLA_CQ, T * c->q_lora_rank);
        k3_matmul(&w->qa, x, T, cq);
        k3_rmsnorm_rows(cq, T, c->q_lora_rank, w->qa_norm, 1e-6, cq);
        k3_matmul(&w->qb, cq, T, q);
    } else {
        k3_matmul(&w->q, x, T, q);
    }
}

/* A snapshot's cache: the first n rows of c. */
static int cache_snap(k3_layer_cache *to, const k3_layer_cache *c, int64_t n, int r, int rope,
                      size_t es) {
    if (cache_grow(to, n, r, rope, es)) return -1;
    memcpy(to->lat, c->lat, es * (size_t)(n * r));
    memcpy(to->kpe, c->kpe, es * (size_t)(n * rope));
    to->n = n;
    return 0;
}

/* Row `at` of a cache of rows of n elements (es bytes each) = x. */
static void cache_put(void *base, int64_t at, const float *x, int n, size_t es) {
    if (es == sizeof(float)) {
        memcpy((float *)base + at * n, x, sizeof(float) * (size_t)n);
        return;
    }
    uint16_t *h = (uint16_t *)base + at * n;
    for (int i = 0; i < n; i++) h[i] = k3_f32_to_bf16(x[i]); /* round to nearest even */
}

/* Append normalized latents and k_pe of the T rows to their sequences' caches
 * (and a snapshot's share to its cache). */
static int mla_append(const k3_model *m, const k3_mla_w *w, const k3_segs *sg, const float *x,
                      int64_t T, k3_workspace *ws, const k3_mla_pre *pre) {
    int r = m->c->kv_lora_rank, rope = m->c->qk_rope_head_dim;
    size_t es = k3_cache_elem_bytes(m);
    for (int s = 0; s < sg->n; s++)
        if (cache_grow(sg->c[s], sg->c[s]->n + sg->off[s + 1] - sg->off[s], r, rope, es)) return -1;
    float *ckv = pre ? pre->ckv : ws_floats(ws, K3_MLA_CKV, T * (r + rope));
    if (!pre) k3_matmul(&w->kva, x, T, ckv);
    for (int s = 0; s < sg->n; s++) {
        k3_layer_cache *c = sg->c[s];
        int64_t t0 = sg->off[s], ts = sg->off[s + 1] - t0;
        for (int64_t t = 0; t < ts; t++) {
            float *row = ckv + (t0 + t) * (r + rope);
            k3_rmsnorm(row, r, w->kva_norm, 1e-6, row); /* in place, then stored */
            cache_put(c->lat, c->n + t, row, r, es);
            cache_put(c->kpe, c->n + t, row + r, rope, es);
        }
        int64_t at = k3_segs_snap_at(sg, s);
        if (at && cache_snap(sg->snap[s], c, c->n + at, r, rope, es)) return -1;
        c->n += ts;
    }
    return 0;
}

/* ---- products with the per-head up-projections ----------------------------- */

/* Y = X W^T-side product of head h's W_UK: transpose = 0 gives keys [T, nope]
 * from latents, 1 gives absorbed queries [T, r] from no-RoPE queries. The HF
 * layout stores W_UK [nope, r], MLX stores W_UK^T. */
static void uk_apply(const k3_mla_w *w, int h, const float *X, int64_t T, float *Y, int transpose) {
    if (w->uk_transposed == transpose)
        k3_matmul(&w->uk[h], X, T, Y);
    else
        k3_tmatmul(&w->uk[h], X, T, Y);
}

/* y_h = W[h] x_h for the nh heads (x_h = x + h*ldx, y_h = y + h*ldy) as sets
 * of products (mvset.h): bitwise k3_matvec head by head. */
static void heads_set(const k3_wmat *W, int nh, const float *x, int64_t ldx, float *y,
                      int64_t ldy) {
    k3_mv p[128];
    for (int h0 = 0; h0 < nh; h0 += 128) { /* 128 heads a set (K3: 96) */
        int n = nh - h0 < 128 ? nh - h0 : 128;
        for (int i = 0; i < n; i++)
            p[i] = (k3_mv){&W[h0 + i], x + (int64_t)(h0 + i) * ldx, y + (int64_t)(h0 + i) * ldy};
        k3_mvset_run(p, n);
    }
}

/* One gathered query row (decode): qa[h] = the absorbed query of head h for
 * every head, from its no-RoPE part qn[h] ([nh, nope] in, [nh, r] out). The
 * heads are independent: with W_UK^T stored a set of products (mvset.h),
 * otherwise the heads split over the threads, each head's transposed product
 * by the code uk_apply runs for it. Bitwise uk_apply head by head. */
static void absorb_one_row(const k3_mla_w *w, int nh, const float *qn, int nope, int r, float *qa) {
    if (w->uk_transposed) {
        heads_set(w->uk, nh, qn, nope, qa, r);
        return;
    }
    if (use_ref() || w->uk[0].cols > K3_TMATMUL_MAX_COLS ||
        !k3_par_worth((int64_t)nh * nope * r >= 65536)) {
        for (int h = 0; h < nh; h++)
            k3_tmatmul_serial(&w->uk[h], qn + (int64_t)h * nope, 1, qa + (int64_t)h * r);
        return;
    }
#pragma omp parallel for schedule(static)
    for (int h = 0; h < nh; h++)
        k3_tmatmul_serial(&w->uk[h], qn + (int64_t)h * nope, 1, qa + (int64_t)h * r);
}

/* ---- the attention ------------------------------------------------------------ */

/* Attention of the rows of *a with the tiled kernel (kernels/mla_tile.h), its
 * scratch from the workspace. */
static void attend(k3_mla_tile_args *a, k3_workspace *ws) {
    float *scratch = ws_floats(ws, K3_MLA_THR, (int64_t)k3_mla_tile_scratch(a));
    k3_mla_tile(a, scratch, use_ref());
}

/* The arguments shared by both paths for a sequence's cache c (whose k_pe
 * rows are kpe, f32) and its T rows of queries q (no-RoPE part then RoPE part
 * per head). */
static k3_mla_tile_args tile_args(const k3_config *cf, const k3_layer_cache *c, const float *kpe,
                                  const float *q, int64_t T) {
    int nope = cf->qk_nope_head_dim, rope = cf->qk_rope_head_dim;
    k3_mla_tile_args a = {.P = kpe, .ldp = rope, .dp = rope, .n = c->n, .nt = T};
    a.qp = q + nope, a.qp_h = nope + rope,
    a.qp_t = (int64_t)cf->num_attention_heads * (nope + rope);
    a.off = c->n - T;
    a.scale = 1.0f / sqrtf((float)(nope + rope));
    return a;
}

/* ---- the two paths ------------------------------------------------------------ */

/* The first n elements of a bf16 cache as f32 (exact). */
static void widen(const void *cache, int64_t n, float *out) {
    const uint16_t *h = cache;
    for (int64_t i = 0; i < n; i++) out[i] = k3_bf16_to_f32(h[i]);
}

/* Cached tokens expanded per product: a slice's latents (4 MiB at rank 512) stay
 * in cache while every row of the head's W_UK or W_UV passes over them; one
 * product over a 16k-token cache ran at two thirds the speed. */
#define EXPAND_SLICE 2048

/* Path A: per head, keys and values of all N cached tokens (expanded a slice
 * of tokens at a time), then its T queries. A bf16 cache is widened first
 * (its products take f32 rows). */
static void attention_expanded(const k3_model *m, const k3_mla_w *w, const k3_layer_cache *c,
                               const float *q, int64_t T, float *o, k3_workspace *ws) {
    const k3_config *cf = m->c;
    int nh = cf->num_attention_heads, nope = cf->qk_nope_head_dim, vd = cf->v_head_dim;
    int64_t N = c->n, r = cf->kv_lora_rank, rope = cf->qk_rope_head_dim;
    int64_t qs = (int64_t)nh * (nope + rope);
    const float *lat = c->lat, *kpe = c->kpe;
    if (m->cache_bf16) {
        float *wide = ws_floats(ws, K3_MLA_LAT, N * (r + rope));
        widen(c->lat, N * r, wide), widen(c->kpe, N * rope, wide + N * r);
        lat = wide, kpe = wide + N * r;
    }
    float *kv = ws_floats(ws, K3_MLA_KV, N * (nope + vd)); /* keys [N, nope], values [N, vd] */
    for (int h = 0; h < nh; h++) {
        for (int64_t t0 = 0; t0 < N; t0 += EXPAND_SLICE) {
            int64_t n = N - t0 < EXPAND_SLICE ? N - t0 : EXPAND_SLICE;
            uk_apply(w, h, lat + t0 * r, n, kv + t0 * nope, 0);
            k3_matmul(&w->uv[h], lat + t0 * r, n, kv + N * nope + t0 * vd);
        }
        k3_mla_tile_args a = tile_args(cf, c, kpe, q + h * (qs / nh), T);
        a.K = kv, a.ldk = nope, a.dk = nope;
        a.V = kv + N * nope, a.ldv = vd, a.dv = vd;
        a.nh = 1, a.q = q + h * (qs / nh), a.q_t = qs;
        a.out = o + (int64_t)h * vd, a.o_t = (int64_t)nh * vd;
        attend(&a, ws);
    }
}

/* Path B for the sequences of sg with absorbed[s]: their query rows are
 * gathered (lt rows in all), absorbed by W_UK^T for every head in one product
 * per head, each (head, query) pair attends over its own sequence's latents,
 * then W_UV per head on all gathered rows, scattered back into o. */
static void attention_absorbed(const k3_model *m, const k3_mla_w *w, const k3_segs *sg,
                               const uint8_t *absorbed, const float *q, float *o,
                               k3_workspace *ws) {
    const k3_config *cf = m->c;
    int nh = cf->num_attention_heads, nope = cf->qk_nope_head_dim, rope = cf->qk_rope_head_dim;
    int r = cf->kv_lora_rank, vd = cf->v_head_dim;
    int64_t qs = (int64_t)nh * (nope + rope), os = (int64_t)nh * vd, lt = 0;
    for (int s = 0; s < sg->n; s++)
        if (absorbed[s]) lt += sg->off[s + 1] - sg->off[s];
    float *qn = ws_floats(ws, K3_MLA_QN, (int64_t)nh * lt * nope);
    float *qa = ws_floats(ws, K3_MLA_QA, (int64_t)nh * lt * r);
    float *ol = ws_floats(ws, K3_MLA_OL, (int64_t)nh * lt * r);
    float *ov = ws_floats(ws, K3_MLA_KV, lt * vd);
    for (int h = 0; h < nh; h++) {
        float *qnh = qn + (int64_t)h * lt * nope;
        int64_t g = 0;
        for (int s = 0; s < sg->n; s++)
            for (int64_t t = sg->off[s]; absorbed[s] && t < sg->off[s + 1]; t++, g++)
                memcpy(qnh + g * nope, q + t * qs + (int64_t)h * (nope + rope),
                       sizeof(float) * (size_t)nope);
        if (lt > 1) uk_apply(w, h, qnh, lt, qa + (int64_t)h * lt * r, 1);
    }
    if (lt == 1) absorb_one_row(w, nh, qn, nope, r, qa);
    int64_t g = 0;
    for (int s = 0; s < sg->n; s++) {
        if (!absorbed[s]) continue;
        int64_t T = sg->off[s + 1] - sg->off[s];
        const k3_layer_cache *c = sg->c[s];
        k3_mla_tile_args a =
            tile_args(cf, c, m->cache_bf16 ? NULL : c->kpe, q + sg->off[s] * qs, T);
        a.K = a.V = m->cache_bf16 ? NULL : c->lat, a.ldk = a.ldv = r, a.dk = a.dv = r;
        if (m->cache_bf16) a.K16 = a.V16 = c->lat, a.P16 = c->kpe; /* read as bf16 */
        a.nh = nh, a.q = qa + g * r, a.q_h = lt * r, a.q_t = r;
        a.out = ol + g * r, a.o_h = lt * r, a.o_t = r;
        attend(&a, ws);
        g += T;
    }
    if (lt == 1) { /* one row: every head's W_UV in one set, straight into o */
        int64_t t = 0;
        for (int s = 0; s < sg->n; s++)
            if (absorbed[s]) t = sg->off[s];
        heads_set(w->uv, nh, ol, r, o + t * os, vd);
        return;
    }
    for (int h = 0; h < nh; h++) {
        k3_matmul(&w->uv[h], ol + (int64_t)h * lt * r, lt, ov);
        int64_t gg = 0;
        for (int s = 0; s < sg->n; s++)
            for (int64_t t = sg->off[s]; absorbed[s] && t < sg->off[s + 1]; t++, gg++)
                memcpy(o + t * os + (int64_t)h * vd, ov + gg * vd, sizeof(float) * (size_t)vd);
    }
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

/* o[i] *= sigmoid(g[i]), threads splitting large products. */
static void apply_gate(float *o, const float *g, int64_t n) {
    if (!k3_par_worth(n >= 65536)) {
        for (int64_t i = 0; i < n; i++) o[i] *= k3_sigmoid(g[i]);
        return;
    }
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; i++) o[i] *= k3_sigmoid(g[i]);
}

int k3_mla_forward(const k3_model *m, const k3_layer *l, const k3_segs *sg, const float *x,
                   int64_t T, float *out, int path, k3_workspace *ws) {
    const k3_config *cf = m->c;
    const k3_mla_w *w = &l->mla;
    int nh = cf->num_attention_heads, vd = cf->v_head_dim;
    int64_t qs = (int64_t)nh * (cf->qk_nope_head_dim + cf->qk_rope_head_dim), os = (int64_t)nh * vd;
    float *q = ws_floats(ws, K3_MLA_Q, T * qs);
    float *o = ws_floats(ws, K3_MLA_O, T * os);
    k3_mla_pre pre_s, *pre = NULL;
    if (T == 1) mla_pre(m, w, x, q, ws, pre = &pre_s);
    if (mla_append(m, w, sg, x, T, ws, pre)) return -1;
    mla_queries(m, w, x, T, q, ws, pre);
    uint8_t absorbed_small[64], *absorbed = absorbed_small, any = 0;
    if (sg->n > 64) absorbed = k3_xmalloc((size_t)sg->n);
    for (int s = 0; s < sg->n; s++) {
        int64_t ts = sg->off[s + 1] - sg->off[s];
        absorbed[s] = path ? path == 'B' : absorbed_is_cheaper(cf, ts, sg->c[s]->n);
        any |= absorbed[s];
    }
    if (any) attention_absorbed(m, w, sg, absorbed, q, o, ws);
    for (int s = 0; s < sg->n; s++)
        if (!absorbed[s])
            attention_expanded(m, w, sg->c[s], q + sg->off[s] * qs, sg->off[s + 1] - sg->off[s],
                               o + sg->off[s] * os, ws);
    if (absorbed != absorbed_small) free(absorbed);
    if (cf->mla_use_output_gate) {
        float *g = pre ? pre->g : ws_floats(ws, K3_MLA_G, T * os);
        if (!pre) k3_matmul(&w->g, x, T, g);
        apply_gate(o, g, T * os);
    }
    k3_rowpar_matmul(m, &w->o, o, T, out); /* canonical block order (rowpar.h) */
    k3_model_reduce(m, out, T * cf->hidden_size);
    return 0;
}
