/* checkpoint.c — HF-release and MLX name mapping into k3_wmat views (see checkpoint.h). */
#include "quant/checkpoint.h"
#include "base/err.h"
#include "base/mem.h"
#include "io/hints.h"
#include "quant/dtype.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NAME_CAP 320
#define MAX_ALIAS 8

int k3_ckpt_open(const char *dir, k3_ckpt *ck) {
    return k3_ckpt_open_progress(dir, 0, ck);
}

/* The loader's message plus what the path probably is (hints.h). */
static int with_hint(const char *dir) {
    char hint[1024];
    if (!k3_model_hint(dir, hint, sizeof hint)) return -1;
    char msg[2048];
    snprintf(msg, sizeof msg, "%s", k3_errmsg());
    return k3_seterr("%s\n  hint: %s", msg, hint);
}

int k3_ckpt_open_progress(const char *dir, int progress, k3_ckpt *ck) {
    memset(ck, 0, sizeof *ck);
    char path[4096];
    snprintf(path, sizeof path, "%s/config.json", dir);
    if (k3_config_load(path, &ck->cfg)) return with_hint(dir);
    ck->st = k3_st_open_dir_progress(dir, progress);
    if (!ck->st) {
        k3_config_free(&ck->cfg);
        return with_hint(dir);
    }
    ck->dir = k3_xstrdup(dir);
    ck->used = k3_xcalloc((size_t)(ck->st->n ? ck->st->n : 1), 1);
    return 0;
}

void k3_ckpt_close(k3_ckpt *ck) {
    k3_st_free(ck->st);
    k3_config_free(&ck->cfg);
    free(ck->used);
    free(ck->dir);
    memset(ck, 0, sizeof *ck);
}

/* Copy s with the first occurrence of `from` replaced by `to`; 0 if `from` is absent. */
static int replace1(const char *s, const char *from, const char *to, char *out) {
    const char *p = strstr(s, from);
    if (!p) return 0;
    snprintf(out, NAME_CAP, "%.*s%s%s", (int)(p - s), s, to, p + strlen(from));
    return 1;
}

/* The spellings one MLX-style name may have in a release checkpoint. */
static int aliases(const char *name, char out[MAX_ALIAS][NAME_CAP]) {
    int n = 0;
    snprintf(out[n++], NAME_CAP, "%s", name);
    if (replace1(name, ".mlp.e_score_correction_bias",
                 ".block_sparse_moe.gate.e_score_correction_bias", out[n]))
        n++;
    if (replace1(name, ".mlp.e_score_correction_bias", ".block_sparse_moe.e_score_correction_bias",
                 out[n]))
        n++;
    if (replace1(name, ".mlp.", ".block_sparse_moe.", out[n])) n++;
    if (replace1(name, "_res_proj.weight", "_res.proj_weight", out[n])) n++;
    if (replace1(name, "_res_norm.weight", "_res.norm_weight", out[n])) n++;
    return n;
}

static const k3_tensor *find_raw(k3_ckpt *ck, const char *name, int mark) {
    char al[MAX_ALIAS][NAME_CAP], full[MAX_ALIAS * NAME_CAP + 16];
    int n = aliases(name, al);
    for (int i = 0; i < n; i++)
        for (int p = 0; p < 2; p++) {
            snprintf(full, sizeof full, "%s%s", p ? "" : "language_model.", al[i]);
            const k3_tensor *t = k3_st_find(ck->st, full);
            if (t) {
                if (mark) ck->used[t - ck->st->t] = 1;
                return t;
            }
        }
    return NULL;
}

const k3_tensor *k3_ckpt_find(k3_ckpt *ck, const char *name) {
    return find_raw(ck, name, 1);
}

static const k3_tensor *find_suffix(k3_ckpt *ck, const char *module, const char *suffix, int mark) {
    char name[NAME_CAP];
    snprintf(name, sizeof name, "%s.%s", module, suffix);
    return find_raw(ck, name, mark);
}

int k3_ckpt_has_module(k3_ckpt *ck, const char *module) {
    return find_raw(ck, module, 0) || find_suffix(ck, module, "weight", 0) ||
           find_suffix(ck, module, "weight_packed", 0);
}

static int is_float_dtype(k3_dtype d) {
    return d == K3_DT_F32 || d == K3_DT_F16 || d == K3_DT_BF16;
}

static k3_wfmt float_fmt(k3_dtype d) {
    return d == K3_DT_F32 ? K3_W_F32 : d == K3_DT_F16 ? K3_W_F16 : K3_W_BF16;
}

/* Shape check with a message "tensor X: shape [a, b], expected [c, d]". */
static int want_shape(const k3_tensor *t, int nd, const int64_t *want) {
    int ok = t->ndim == nd;
    for (int i = 0; ok && i < nd; i++) ok = t->shape[i] == want[i];
    if (ok) return 0;
    char got[128], exp[128];
    k3_tensor tw = {.ndim = nd};
    memcpy(tw.shape, want, sizeof(int64_t) * (size_t)nd);
    return k3_seterr("%s: tensor %s: shape %s, expected %s", t->file, t->name,
                     k3_tensor_shape_str(t, got, sizeof got),
                     k3_tensor_shape_str(&tw, exp, sizeof exp));
}

static int want_dtype_float(const k3_tensor *t) {
    if (is_float_dtype(t->dtype)) return 0;
    return k3_seterr("%s: tensor %s: dtype %s, expected F32, F16 or BF16", t->file, t->name,
                     k3_dtype_name(t->dtype));
}

static int want_dtype_bytes(const k3_tensor *t) {
    if (t->dtype == K3_DT_U8 || t->dtype == K3_DT_U32 || t->dtype == K3_DT_F8_E8M0 ||
        t->dtype == K3_DT_I32)
        return 0;
    return k3_seterr("%s: tensor %s: dtype %s, expected packed integer codes (U8/U32)", t->file,
                     t->name, k3_dtype_name(t->dtype));
}

/* n float matrices [n, rows, cols] (n = 0: a plain 2-D [rows, cols] tensor). */
static int plain_views(const k3_tensor *w, int64_t n, int64_t rows, int64_t cols, k3_wmat *out) {
    if (want_dtype_float(w)) return -1;
    int64_t s3[3] = {n, rows, cols};
    if (n ? want_shape(w, 3, s3) : want_shape(w, 2, s3 + 1)) return -1;
    size_t es = k3_dtype_size(w->dtype);
    for (int64_t e = 0; e < (n ? n : 1); e++) {
        k3_wmat m = {.fmt = float_fmt(w->dtype), .rows = rows, .cols = cols};
        m.row_stride = (size_t)cols * es;
        m.data = w->data + (size_t)e * (size_t)rows * m.row_stride;
        out[e] = m;
    }
    return 0;
}

/* compressed-tensors MXFP4: packed u8 [rows, cols/2], scale u8 [rows, cols/32]. */
static int ct_mxfp4_view(const k3_tensor *pk, const k3_tensor *sc, int64_t rows, int64_t cols,
                         k3_wmat *out) {
    if (cols % 32)
        return k3_seterr("%s: tensor %s: MXFP4 needs the input size (%lld) to be a multiple of 32",
                         pk->file, pk->name, (long long)cols);
    int64_t ps[2] = {rows, cols / 2}, ss[2] = {rows, cols / 32};
    if (!sc) return k3_seterr("%s: tensor %s has no matching weight_scale", pk->file, pk->name);
    if (want_dtype_bytes(pk) || want_dtype_bytes(sc)) return -1;
    if (pk->dtype != K3_DT_U8 || want_shape(pk, 2, ps) || want_shape(sc, 2, ss))
        return pk->dtype != K3_DT_U8 ? k3_seterr("%s: tensor %s: dtype %s, expected U8", pk->file,
                                                 pk->name, k3_dtype_name(pk->dtype))
                                     : -1;
    if (sc->dtype != K3_DT_U8 && sc->dtype != K3_DT_F8_E8M0)
        return k3_seterr("%s: tensor %s: dtype %s, expected U8", sc->file, sc->name,
                         k3_dtype_name(sc->dtype));
    *out = (k3_wmat){.fmt = K3_W_MXFP4,
                     .rows = rows,
                     .cols = cols,
                     .data = pk->data,
                     .row_stride = (size_t)cols / 2,
                     .scales = sc->data,
                     .scale_stride = (size_t)cols / 32,
                     .bits = 4,
                     .group = 32};
    return 0;
}

/* Innermost size of a tensor in bytes (its last dimension × dtype size). */
static size_t last_dim_bytes(const k3_tensor *t) {
    return t->ndim ? (size_t)t->shape[t->ndim - 1] * k3_dtype_size(t->dtype) : 0;
}

/* Leading dims of an MLX quantized tensor must match [n,] rows. */
static int lead_dims_ok(const k3_tensor *t, int64_t n, int64_t rows) {
    int nd = n ? 3 : 2;
    if (t->ndim != nd) return 0;
    return (!n || t->shape[0] == n) && t->shape[nd - 2] == rows;
}

typedef struct {
    int bits, group, mxfp4;
} qparams;

/* bits / group from the shapes, cross-checked with the config entry for the module. */
static int mlx_qparams(k3_ckpt *ck, const char *module, const k3_tensor *w, const k3_tensor *s,
                       const k3_tensor *b, int64_t cols, qparams *q) {
    size_t wb = last_dim_bytes(w), ns = s->ndim ? (size_t)s->shape[s->ndim - 1] : 0;
    if (!ns || cols % (int64_t)ns || (wb * 8) % (size_t)cols)
        return k3_seterr("%s: tensor %s: packed width %zu bytes and %zu scale groups do not fit "
                         "%lld inputs",
                         w->file, w->name, wb, ns, (long long)cols);
    q->bits = (int)(wb * 8 / (size_t)cols);
    q->group = (int)(cols / (int64_t)ns);
    int cbits, cgroup;
    const char *mode = NULL;
    if (!k3_config_quant_for(&ck->cfg, module, &cbits, &cgroup, &mode) &&
        (cbits != q->bits || cgroup != q->group))
        return k3_seterr("%s: tensor %s: shapes give %d bits / group %d but config "
                         "\"quantization\" says %d bits / group %d for %s",
                         w->file, w->name, q->bits, q->group, cbits, cgroup, module);
    q->mxfp4 = mode ? !strcmp(mode, "mxfp4") : (!b && s->dtype == K3_DT_U8);
    if (mode && strcmp(mode, "mxfp4") && strcmp(mode, "affine"))
        return k3_seterr("%s: quantization mode \"%s\" of %s is not supported (affine, mxfp4)",
                         ck->dir, mode, module);
    if (q->mxfp4 && (q->bits != 4 || q->group != 32 || b))
        return k3_seterr("%s: tensor %s: mxfp4 needs 4 bits, group 32 and no biases", w->file,
                         w->name);
    if (!q->mxfp4 && !b)
        return k3_seterr("%s: tensor %s: affine quantization needs %s.biases", w->file, w->name,
                         module);
    if (!q->mxfp4 && (q->bits < 2 || q->bits > 8 || q->bits == 7))
        return k3_seterr("%s: tensor %s: %d-bit affine codes are not supported", w->file, w->name,
                         q->bits);
    return 0;
}

static int mlx_check_scales(const k3_tensor *s, const k3_tensor *b, const qparams *q) {
    if (q->mxfp4 ? (s->dtype != K3_DT_U8 && s->dtype != K3_DT_F8_E8M0) : !is_float_dtype(s->dtype))
        return k3_seterr("%s: tensor %s: dtype %s does not fit %s scales", s->file, s->name,
                         k3_dtype_name(s->dtype), q->mxfp4 ? "mxfp4 (U8)" : "affine (float)");
    if (b && (b->dtype != s->dtype || b->ndim != s->ndim ||
              memcmp(b->shape, s->shape, sizeof(int64_t) * (size_t)s->ndim)))
        return k3_seterr("%s: tensor %s: biases must have the dtype and shape of the scales",
                         b->file, b->name);
    return 0;
}

/* MLX quantized: weight [.., rows, cols*bits/32] u32, scales [.., rows, cols/group]. */
static int mlx_views(k3_ckpt *ck, const char *module, const k3_tensor *w, const k3_tensor *s,
                     const k3_tensor *b, int64_t n, int64_t rows, int64_t cols, k3_wmat *out) {
    if (want_dtype_bytes(w)) return -1;
    if (!lead_dims_ok(w, n, rows) || !lead_dims_ok(s, n, rows)) {
        char g1[128], g2[128];
        return k3_seterr("%s: quantized %s: weight %s / scales %s, expected leading dims %s[%lld]",
                         w->file, module, k3_tensor_shape_str(w, g1, sizeof g1),
                         k3_tensor_shape_str(s, g2, sizeof g2), n ? "[n]" : "", (long long)rows);
    }
    qparams q = {0, 0, 0};
    if (mlx_qparams(ck, module, w, s, b, cols, &q) || mlx_check_scales(s, b, &q)) return -1;
    size_t wrow = last_dim_bytes(w), srow = last_dim_bytes(s);
    for (int64_t e = 0; e < (n ? n : 1); e++) {
        size_t r0 = (size_t)e * (size_t)rows;
        k3_wmat m = {.fmt = q.mxfp4 ? K3_W_MXFP4 : K3_W_AFFINE,
                     .rows = rows,
                     .cols = cols,
                     .data = w->data + r0 * wrow,
                     .row_stride = wrow,
                     .scales = s->data + r0 * srow,
                     .scale_stride = srow,
                     .bits = q.bits,
                     .group = q.group};
        if (b) {
            m.biases = b->data + r0 * srow;
            m.bias_stride = srow;
        }
        m.scale_fmt = q.mxfp4 ? K3_W_F32 : float_fmt(s->dtype);
        out[e] = m;
    }
    return 0;
}

static int missing(k3_ckpt *ck, const char *module) {
    return k3_seterr("%s: tensor %s.weight is missing (looked for it with and without the "
                     "\"language_model.\" prefix and the release spellings)",
                     ck->dir, module);
}

static int views(k3_ckpt *ck, const char *module, int64_t n, int64_t rows, int64_t cols,
                 k3_wmat *out) {
    const k3_tensor *w = find_suffix(ck, module, "weight", 1);
    const k3_tensor *s = find_suffix(ck, module, "scales", 1);
    const k3_tensor *b = find_suffix(ck, module, "biases", 1);
    if (w && s) return mlx_views(ck, module, w, s, b, n, rows, cols, out);
    if (w) return plain_views(w, n, rows, cols, out);
    const k3_tensor *pk = find_suffix(ck, module, "weight_packed", 1);
    if (pk && !n)
        return ct_mxfp4_view(pk, find_suffix(ck, module, "weight_scale", 1), rows, cols, out);
    return missing(ck, module);
}

int k3_ckpt_linear(k3_ckpt *ck, const char *module, int64_t rows, int64_t cols, k3_wmat *out) {
    return views(ck, module, 0, rows, cols, out);
}

int k3_ckpt_stacked(k3_ckpt *ck, const char *module, int64_t n, int64_t rows, int64_t cols,
                    k3_wmat *out) {
    return views(ck, module, n, rows, cols, out);
}

float k3_tensor_f32_at(const k3_tensor *t, int64_t i) {
    uint16_t h;
    float f;
    switch (t->dtype) {
    case K3_DT_F32:
        memcpy(&f, t->data + 4 * i, 4);
        return f;
    case K3_DT_F16:
        memcpy(&h, t->data + 2 * i, 2);
        return k3_f16_to_f32(h);
    default:
        memcpy(&h, t->data + 2 * i, 2);
        return k3_bf16_to_f32(h);
    }
}

static const k3_tensor *find_float(k3_ckpt *ck, const char *name) {
    const k3_tensor *t = k3_ckpt_find(ck, name);
    if (!t) {
        k3_seterr("%s: tensor %s is missing", ck->dir, name);
        return NULL;
    }
    return want_dtype_float(t) ? NULL : t;
}

int k3_ckpt_vec(k3_ckpt *ck, const char *name, int64_t n, float *out) {
    const k3_tensor *t = find_float(ck, name);
    if (!t) return -1;
    if (k3_tensor_numel(t) != n) {
        char g[128];
        return k3_seterr("%s: tensor %s: shape %s, expected %lld elements", t->file, t->name,
                         k3_tensor_shape_str(t, g, sizeof g), (long long)n);
    }
    for (int64_t i = 0; i < n; i++) out[i] = k3_tensor_f32_at(t, i);
    return 0;
}

int k3_ckpt_alog(k3_ckpt *ck, const char *name, int heads, float *out) {
    const k3_tensor *t = find_float(ck, name);
    if (!t) return -1;
    int64_t n = k3_tensor_numel(t);
    if (n < heads)
        return k3_seterr("%s: tensor %s: %lld values, expected at least num_heads = %d", t->file,
                         t->name, (long long)n, heads);
    for (int64_t i = heads; i < n; i++)
        if (k3_tensor_f32_at(t, i) != 0.0f)
            return k3_seterr("%s: tensor %s has %lld values for num_heads = %d and its padding "
                             "tail is not zero (value %g at index %lld); refusing to truncate",
                             t->file, t->name, (long long)n, heads, (double)k3_tensor_f32_at(t, i),
                             (long long)i);
    for (int i = 0; i < heads; i++) out[i] = k3_tensor_f32_at(t, i);
    return 0;
}

int k3_ckpt_conv(k3_ckpt *ck, const char *name, int64_t C, int K, float *out) {
    const k3_tensor *t = find_float(ck, name);
    if (!t) return -1;
    int hf = t->ndim == 3 && t->shape[0] == C && t->shape[1] == 1 && t->shape[2] == K;
    int mlx = t->ndim == 3 && t->shape[0] == C && t->shape[1] == K && t->shape[2] == 1;
    int flat = t->ndim == 2 && t->shape[0] == C && t->shape[1] == K;
    if (!hf && !mlx && !flat) {
        char g[128];
        return k3_seterr("%s: tensor %s: shape %s, expected [%lld, 1, %d] (or [%lld, %d, 1])",
                         t->file, t->name, k3_tensor_shape_str(t, g, sizeof g), (long long)C, K,
                         (long long)C, K);
    }
    /* All three layouts hold tap j of channel c at c*K + j. */
    for (int64_t i = 0; i < C * K; i++) out[i] = k3_tensor_f32_at(t, i);
    return 0;
}

/* Tensors the engine deliberately ignores (spec §4.1.1). */
static int ignorable(const k3_ckpt *ck, const char *name) {
    if (!strncmp(name, "language_model.", 15)) name += 15;
    static const char *const drop[] = {"vision_tower", "vision_model", "multi_modal_projector",
                                       "mm_projector", "model.mtp",    "mtp"};
    for (size_t i = 0; i < sizeof drop / sizeof drop[0]; i++)
        if (!strncmp(name, drop[i], strlen(drop[i]))) return 1;
    size_t n = strlen(name);
    static const char *const tails[] = {".weight_shape", ".weight_global_scale"};
    for (size_t i = 0; i < 2; i++)
        if (n > strlen(tails[i]) && !strcmp(name + n - strlen(tails[i]), tails[i])) return 1;
    int layer;
    if (sscanf(name, "model.layers.%d.", &layer) == 1 && layer >= ck->cfg.num_hidden_layers)
        return 1;
    if (ck->cfg.tie_word_embeddings && !strcmp(name, "lm_head.weight")) return 1;
    return 0;
}

int k3_ckpt_check_unused(k3_ckpt *ck) {
    for (int i = 0; i < ck->st->n; i++)
        if (!ck->used[i] && !ignorable(ck, ck->st->t[i].name))
            return k3_seterr("%s: unexpected tensor %s (not part of the model described by "
                             "config.json)",
                             ck->st->t[i].file, ck->st->t[i].name);
    return 0;
}
