/* tp.c — tensor-parallel slicing of one loaded layer (see tp.h). */
#include "model/tp.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "base/mem.h"

static int is_quantized(const k3_wmat *w) {
    return w->fmt == K3_W_MXFP4 || w->fmt == K3_W_AFFINE;
}

/* Rows [r*rows/N, (r+1)*rows/N) of w; rows must divide (checked by the config check). */
static void keep_rows(k3_wmat *w, int r, int N) {
    int64_t n = w->rows / N;
    *w = k3_wmat_rows(w, (int64_t)r * n, n);
}

/* Columns [r*cols/N, ...): the slice must start and end on a quantization group. */
static int keep_cols(k3_wmat *w, int r, int N, int layer, const char *what) {
    int64_t n = w->cols / N;
    if (w->cols % N || (is_quantized(w) && n % w->group))
        return k3_seterr("tensor parallel over %d ranks: layer %d %s has %lld input columns in %s "
                         "groups of %d; a 1/%d slice (%lld columns) would split a quantization "
                         "group (cols/N must be a multiple of %d)",
                         N, layer, what, (long long)w->cols, k3_wfmt_name(w->fmt), w->group, N,
                         (long long)n, w->group);
    *w = k3_wmat_cols(w, (int64_t)r * n, n);
    return 0;
}

/* New array with elements [off, off+n) of v (each elt floats wide); frees v. */
static float *keep_floats(float *v, int64_t off, int64_t n, int64_t elt) {
    float *out = k3_xmalloc(sizeof(float) * (size_t)(n * elt > 0 ? n * elt : 1));
    memcpy(out, v + off * elt, sizeof(float) * (size_t)(n * elt));
    free(v);
    return out;
}

int k3_tp_check_config(const k3_config *c, int N) {
    if (N < 1) return k3_seterr("tensor parallel: %d ranks", N);
    struct {
        int64_t v;
        const char *what;
    } dims[] = {
        {c->kda_heads, "KDA heads (linear_attn_config.num_heads)"},
        {c->num_attention_heads, "MLA heads (num_attention_heads)"},
        {c->intermediate_size, "dense MLP width (intermediate_size)"},
        {c->num_experts ? c->moe_intermediate_size : 0, "expert width (moe_intermediate_size)"},
        {(int64_t)c->moe_intermediate_size * c->num_shared_experts,
         "shared-expert width (moe_intermediate_size * num_shared_experts)"},
    };
    for (size_t k = 0; k < sizeof dims / sizeof dims[0]; k++)
        if (dims[k].v % N)
            return k3_seterr("tensor parallel over %d ranks: the %lld %s are not divisible by %d; "
                             "use a rank count that divides every head count and width",
                             N, (long long)dims[k].v, dims[k].what, N);
    return 0;
}

static int slice_kda(const k3_config *c, int i, k3_kda_w *w, int r, int N) {
    int hd = c->kda_head_dim, K = c->kda_conv_kernel, nh = c->kda_heads / N, sh = r * nh;
    int64_t P = (int64_t)c->kda_heads * hd, Pl = (int64_t)nh * hd;
    keep_rows(&w->q, r, N);
    keep_rows(&w->k, r, N);
    keep_rows(&w->v, r, N);
    /* conv channels regrouped per segment: rows seg*P + [sh*hd, (sh+nh)*hd) */
    float *conv = k3_xmalloc(sizeof(float) * (size_t)(3 * Pl * K));
    for (int seg = 0; seg < 3; seg++)
        memcpy(conv + seg * Pl * K, w->conv + (seg * P + (int64_t)sh * hd) * K,
               sizeof(float) * (size_t)(Pl * K));
    free(w->conv);
    w->conv = conv;
    keep_rows(&w->fb, r, N); /* fa stays whole: every rank needs the full bottleneck */
    keep_rows(&w->b, r, N);
    if (c->kda_full_rank_gate)
        keep_rows(&w->g, r, N);
    else
        keep_rows(&w->gb, r, N);
    w->A = keep_floats(w->A, sh, nh, 1);
    w->dt_bias = keep_floats(w->dt_bias, (int64_t)sh * hd, Pl, 1);
    return keep_cols(&w->o, r, N, i, "self_attn.o_proj");
}

static int slice_mla(const k3_config *c, int i, k3_mla_w *w, int r, int N) {
    int nh = c->num_attention_heads / N, sh = r * nh;
    keep_rows(c->q_lora_rank ? &w->qb : &w->q, r, N);
    k3_wmat *uk = k3_xcalloc((size_t)nh, sizeof *uk), *uv = k3_xcalloc((size_t)nh, sizeof *uv);
    memcpy(uk, w->uk + sh, sizeof *uk * (size_t)nh);
    memcpy(uv, w->uv + sh, sizeof *uv * (size_t)nh);
    free(w->uk);
    free(w->uv);
    w->uk = uk, w->uv = uv;
    if (c->mla_use_output_gate) keep_rows(&w->g, r, N);
    return keep_cols(&w->o, r, N, i, "self_attn.o_proj");
}

static int slice_mlp(k3_mlp_w *w, int r, int N, int i, const char *what) {
    keep_rows(&w->gate, r, N);
    keep_rows(&w->up, r, N);
    return keep_cols(&w->down, r, N, i, what);
}

static int slice_moe(const k3_config *c, int i, k3_moe_w *w, int r, int N) {
    for (int e = 0; e < c->num_experts; e++) {
        keep_rows(&w->eg[e], r, N);
        keep_rows(&w->eu[e], r, N);
        char what[64];
        snprintf(what, sizeof what, "expert %d down_proj (w2)", e);
        if (keep_cols(&w->ed[e], r, N, i, what)) return -1;
    }
    if (c->num_shared_experts && slice_mlp(&w->shared, r, N, i, "shared_experts.down_proj"))
        return -1;
    return 0;
}

int k3_tp_slice_layer(const k3_config *c, int i, k3_layer *l, int r, int N) {
    if (N == 1) return 0;
    int rc = l->is_kda ? slice_kda(c, i, &l->kda, r, N) : slice_mla(c, i, &l->mla, r, N);
    if (rc) return rc;
    return l->is_moe ? slice_moe(c, i, &l->moe, r, N)
                     : slice_mlp(&l->mlp, r, N, i, "mlp.down_proj");
}

void k3_tp_local_config(const k3_config *full, int N, k3_config *local) {
    *local = *full; /* shares is_kda / quant with the full config: do not free it */
    local->kda_heads /= N;
    local->num_attention_heads /= N;
    local->intermediate_size /= N;
    local->moe_intermediate_size /= N;
}

void k3_tp_describe(const k3_config *c, int r, int N, char *buf, size_t len) {
    int kh = c->kda_heads / N, mh = c->num_attention_heads / N;
    int64_t I = c->intermediate_size / N, mi = c->moe_intermediate_size / N;
    int64_t si = mi * c->num_shared_experts;
    snprintf(buf, len,
             "tensor-parallel slice %d of %d: KDA heads %d..%d of %d, MLA heads %d..%d of %d, "
             "dense MLP cols %lld..%lld of %d, expert cols %lld..%lld of %d (all %d experts), "
             "shared-expert cols %lld..%lld of %lld",
             r, N, r * kh, (r + 1) * kh - 1, c->kda_heads, r * mh, (r + 1) * mh - 1,
             c->num_attention_heads, (long long)(r * I), (long long)((r + 1) * I - 1),
             c->intermediate_size, (long long)(r * mi), (long long)((r + 1) * mi - 1),
             c->moe_intermediate_size, c->num_experts, (long long)(r * si),
             (long long)((r + 1) * si - 1), (long long)(si * N));
}
