/* qconvert.c — streamed HF -> MLX quantized conversion (see qconvert.h).
 *
 * Two passes over the input headers' information, one over its data:
 *   plan     every output module becomes a job (a Linear built row by row from
 *            one or more input tensors, a raw byte copy, or a small f32 vector)
 *            whose output tensors are declared to the k3_sts writer, one
 *            group (= one shard at most) per job;
 *   produce  per shard, each job's rows are materialized as f32 a chunk at a
 *            time (one expert matrix, or <= 16 MB of rows), quantized, and
 *            pwritten at their offsets; consumed input pages are dropped
 *            (the row functions are in qjob.c, shared with the check). */
#include "quant/qconvert.h"
#include "quant/qconvert_impl.h"

#include "base/err.h"
#include "base/mem.h"
#include "quant/checkpoint.h"
#include "io/config.h"
#include "io/safetensors.h"
#include "io/st_stream.h"
#include "quant/dtype.h"
#include "quant/quantize.h"

#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- small helpers ---- */

static int starts(const char *s, const char *p) {
    return !strncmp(s, p, strlen(p));
}
static int ends(const char *s, const char *p) {
    size_t a = strlen(s), b = strlen(p);
    return a >= b && !strcmp(s + a - b, p);
}
static int is_float(k3_dtype d) {
    return d == K3_DT_F32 || d == K3_DT_F16 || d == K3_DT_BF16;
}

static void will_need(const k3_tensor *t) {
    long pg = sysconf(_SC_PAGESIZE);
    uintptr_t a = (uintptr_t)t->data & ~((uintptr_t)pg - 1);
    if (t->bytes) madvise((void *)a, (uintptr_t)t->data + t->bytes - a, MADV_WILLNEED);
}

static const k3_tensor *take(qc *q, const char *name) {
    char full[512];
    const k3_tensor *t = k3_st_find(q->st, name);
    if (!t) {
        snprintf(full, sizeof full, "language_model.%s", name);
        t = k3_st_find(q->st, full);
    }
    if (t) q->used[t - q->st->t] = 1;
    return t;
}

static int float_src(const k3_tensor *t) {
    if (is_float(t->dtype)) return 0;
    return k3_seterr("%s: %s: expected a float tensor (F32/F16/BF16), got %s", t->file, t->name,
                     k3_dtype_name(t->dtype));
}

static qjob *new_job(qc *q, int kind, const char *module) {
    if (q->nj == q->capj) {
        q->capj = q->capj ? 2 * q->capj : 64;
        q->j = k3_xrealloc(q->j, (size_t)q->capj * sizeof *q->j);
    }
    qjob *j = &q->j[q->nj++];
    memset(j, 0, sizeof *j);
    j->kind = kind;
    snprintf(j->module, sizeof j->module, "%s", module);
    k3_sts_group(q->w);
    return j;
}

static int declare(qc *q, qjob *j, const char *name, const char *dtype, const int64_t *shape,
                   int nd) {
    char full[640];
    snprintf(full, sizeof full, "language_model.%s", name);
    int id = k3_sts_declare(q->w, full, dtype, shape, nd);
    if (id < 0) return -1;
    j->out[j->nout++] = id;
    return 0;
}

/* ---- planning ---- */

static int is_router(const char *module) {
    return ends(module, ".mlp.gate");
}

/* Bits/group a module gets under the recipe; 0 bits = keep unquantized. */
static void module_params(const qc *q, const char *module, int64_t in_dim, int *bits, int *group) {
    const k3_qconv_opts *o = q->o;
    *bits = o->bits;
    *group = o->mxfp4 ? 32 : o->group;
    if (is_router(module))
        *bits = o->quant_router ? 8 : 0, *group = 64;
    else if (o->mixed && !strstr(module, "switch_mlp")) {
        int hi = strstr(module, "embed_tokens") || !strcmp(module, "lm_head");
        *bits = hi ? 6 : (o->bits > 4 ? o->bits : 4);
    }
    if (strstr(module, "_res_proj") || in_dim % *group) *bits = 0;
}

static int record_quant(qc *q, const char *module, int bits, int group, const char *mode) {
    char full[640];
    snprintf(full, sizeof full, "language_model.%s", module);
    json_t *e = json_pack("{s:i,s:i,s:s}", "group_size", group, "bits", bits, "mode", mode);
    return json_object_set_new(q->quant, full, e) ? k3_seterr("out of memory (config)") : 0;
}

/* A Linear job over rows x cols: declares weight (+ scales, biases) per the recipe. */
static int plan_linear(qc *q, qjob *j, const int64_t *shape, int nd, k3_dtype keep) {
    char name[512];
    j->nd = nd;
    memcpy(j->shape, shape, sizeof(int64_t) * (size_t)nd);
    j->cols = shape[nd - 1];
    j->rows = 1;
    for (int i = 0; i < nd - 1; i++) j->rows *= shape[i];
    j->keep_dt = keep;
    module_params(q, j->module, j->cols, &j->bits, &j->group);
    j->mx = q->o->mxfp4 && !is_router(j->module);
    snprintf(name, sizeof name, "%s.weight", j->module);
    uint64_t ne = (uint64_t)j->rows * (uint64_t)j->cols;
    if (is_router(j->module)) q->stats->router_q8_bytes += ne + ne / 64 * 4;
    if (!j->bits) {
        if (is_router(j->module)) q->stats->router_bytes += ne * k3_dtype_size(keep);
        return declare(q, j, name, k3_dtype_name(keep), shape, nd);
    }
    int64_t sh[3];
    memcpy(sh, shape, sizeof(int64_t) * (size_t)nd);
    size_t cb = j->mx ? (size_t)j->cols / 2 : k3_affine_row_bytes(j->cols, j->bits);
    sh[nd - 1] = (int64_t)(cb / 4);
    if (declare(q, j, name, "U32", sh, nd)) return -1;
    snprintf(name, sizeof name, "%s.scales", j->module);
    sh[nd - 1] = j->cols / (j->mx ? 32 : j->group);
    if (declare(q, j, name, j->mx ? "U8" : "BF16", sh, nd)) return -1;
    snprintf(name, sizeof name, "%s.biases", j->module);
    if (!j->mx && declare(q, j, name, "BF16", sh, nd)) return -1;
    if (is_router(j->module))
        for (int i = 0; i < j->nout; i++)
            q->stats->router_bytes += k3_sts_tensor_bytes(q->w, j->out[i]);
    return record_quant(q, j->module, j->mx ? 4 : j->bits, j->mx ? 32 : j->group,
                        j->mx ? "mxfp4" : "affine");
}

/* Routed experts of one layer, projection src (w1/w2/w3) -> switch_mlp.dst. */
static int plan_experts(qc *q, int layer, const char *src, const char *dst) {
    char n1[320], n2[320], module[256];
    const int E = q->cfg.num_experts;
    snprintf(module, sizeof module, "model.layers.%d.mlp.switch_mlp.%s", layer, dst);
    const k3_tensor **w = k3_xcalloc((size_t)E, sizeof *w), **s = k3_xcalloc((size_t)E, sizeof *s);
    int64_t rows = 0, cols = 0;
    int mxfp4 = 0;
    for (int e = 0; e < E; e++) {
        snprintf(n1, sizeof n1, "model.layers.%d.block_sparse_moe.experts.%d.%s.weight_packed",
                 layer, e, src);
        snprintf(n2, sizeof n2, "model.layers.%d.block_sparse_moe.experts.%d.%s.weight_scale",
                 layer, e, src);
        const k3_tensor *pk = take(q, n1), *sc = take(q, n2);
        int64_t r, c;
        if (!pk) {
            snprintf(n1, sizeof n1, "model.layers.%d.block_sparse_moe.experts.%d.%s.weight", layer,
                     e, src);
            pk = take(q, n1);
            if (!pk || pk->ndim != 2) {
                k3_seterr("%s: missing or not 2-D (expert %d of %d)", n1, e, E);
                goto bad;
            }
            if (float_src(pk)) goto bad;
            r = pk->shape[0], c = pk->shape[1];
            sc = NULL;
        } else if (!sc) {
            k3_seterr("%s: missing (needed with %s)", n2, pk->name);
            goto bad;
        } else {
            if (pk->ndim != 2 || sc->ndim != 2 || pk->dtype != K3_DT_U8 || sc->dtype != K3_DT_U8 ||
                sc->shape[0] != pk->shape[0] || sc->shape[1] * 16 != pk->shape[1]) {
                char a[64], b[64];
                k3_seterr("%s: %s %s / %s %s: expected U8 [rows, cols/2] and U8 [rows, cols/32]",
                          pk->file, pk->name, k3_tensor_shape_str(pk, a, sizeof a), sc->name,
                          k3_tensor_shape_str(sc, b, sizeof b));
                goto bad;
            }
            r = pk->shape[0], c = pk->shape[1] * 2;
        }
        if (e && ((sc != NULL) != mxfp4 || r != rows || c != cols)) {
            k3_seterr("%s: shape or format differs from expert 0", pk->name);
            goto bad;
        }
        mxfp4 = sc != NULL, rows = r, cols = c;
        w[e] = pk, s[e] = sc;
    }
    int64_t sh[3] = {E, rows, cols};
    if (mxfp4 && q->o->keep_mxfp4) {
        qjob *j = new_job(q, J_RAW, module);
        j->xf = X_EXPERTS, j->nsrc = E, j->src = w, j->src2 = s;
        int64_t sw[3] = {E, rows, cols / 8}, ss[3] = {E, rows, cols / 32};
        snprintf(n1, sizeof n1, "%s.weight", module);
        snprintf(n2, sizeof n2, "%s.scales", module);
        if (declare(q, j, n1, "U32", sw, 3) || declare(q, j, n2, "U8", ss, 3)) return -1;
        return record_quant(q, module, 4, 32, "mxfp4");
    }
    qjob *j = new_job(q, J_LIN, module);
    j->xf = X_EXPERTS, j->nsrc = E, j->src = w, j->src2 = s;
    return plan_linear(q, j, sh, 3, K3_DT_BF16);
bad:
    free(w);
    free(s);
    return -1;
}

/* KDA: q/k/v_proj -> qkv_proj (row concat), q/k/v_conv1d [C,1,K] -> qkv_conv.conv.weight
 * [3C,K,1] (same bytes), A_log [>=H] -> [H] (a non-zero tail is refused). */
static int plan_kda(qc *q, int layer) {
    char n[256], module[256];
    const k3_tensor *p[3], *c[3];
    const char *x = "qkv";
    for (int i = 0; i < 3; i++) {
        snprintf(n, sizeof n, "model.layers.%d.self_attn.%c_proj.weight", layer, x[i]);
        p[i] = take(q, n);
        snprintf(n, sizeof n, "model.layers.%d.self_attn.%c_conv1d.weight", layer, x[i]);
        c[i] = take(q, n);
    }
    if (p[0] && p[1] && p[2]) {
        int64_t D = p[0]->shape[1], rows = 0;
        for (int i = 0; i < 3; i++) {
            if (p[i]->ndim != 2 || p[i]->shape[1] != D)
                return k3_seterr("%s: expected [rows, %lld]", p[i]->name, (long long)D);
            if (float_src(p[i])) return -1;
            rows += p[i]->shape[0];
        }
        snprintf(module, sizeof module, "model.layers.%d.self_attn.qkv_proj", layer);
        qjob *j = new_job(q, J_LIN, module);
        j->xf = X_CAT, j->nsrc = 3;
        j->src = k3_xcalloc(3, sizeof *j->src);
        memcpy(j->src, p, sizeof p);
        int64_t sh[2] = {rows, D};
        if (plan_linear(q, j, sh, 2, p[0]->dtype)) return -1;
    }
    if (c[0] && c[1] && c[2]) {
        int64_t C = 0, K = c[0]->shape[c[0]->ndim - 1];
        for (int i = 0; i < 3; i++) {
            if (c[i]->ndim != 3 || c[i]->shape[1] != 1 || c[i]->shape[2] != K ||
                c[i]->dtype != c[0]->dtype)
                return k3_seterr("%s: expected [C, 1, %lld] like the q conv", c[i]->name,
                                 (long long)K);
            C += c[i]->shape[0];
        }
        snprintf(n, sizeof n, "model.layers.%d.self_attn.qkv_conv.conv.weight", layer);
        qjob *j = new_job(q, J_RAW, n);
        j->xf = X_CAT, j->nsrc = 3;
        j->src = k3_xcalloc(3, sizeof *j->src);
        memcpy(j->src, c, sizeof c);
        int64_t sh[3] = {C, K, 1};
        if (declare(q, j, n, k3_dtype_name(c[0]->dtype), sh, 3)) return -1;
    }
    snprintf(n, sizeof n, "model.layers.%d.self_attn.A_log", layer);
    const k3_tensor *al = take(q, n);
    if (!al) return 0;
    if (float_src(al)) return -1;
    int64_t H = q->cfg.kda_heads, N = k3_tensor_numel(al);
    for (int64_t i = H; i < N; i++)
        if (k3_tensor_f32_at(al, i) != 0.0f)
            return k3_seterr("%s: %s has %lld values > %lld heads and a non-zero tail", al->file,
                             al->name, (long long)N, (long long)H);
    int64_t sh[1] = {H < N ? H : N};
    qjob *j = new_job(q, J_F32, n);
    j->vals = k3_xmalloc(sizeof(float) * (size_t)(sh[0] ? sh[0] : 1));
    k3_qc_span_f32(al, 0, sh[0], j->vals);
    return declare(q, j, n, "F32", sh, 1);
}

/* MLA: kv_b_proj [H*(nope+vd), r] -> embed_q [H, r, nope] (W_UK^T), unembed_out [H, vd, r]. */
static int plan_mla(qc *q, int layer) {
    char n[256], module[256];
    snprintf(n, sizeof n, "model.layers.%d.self_attn.kv_b_proj.weight", layer);
    const k3_tensor *t = take(q, n);
    if (!t) return 0;
    const int64_t H = q->cfg.num_attention_heads, nope = q->cfg.qk_nope_head_dim,
                  vd = q->cfg.v_head_dim;
    if (t->ndim != 2 || t->shape[0] != H * (nope + vd))
        return k3_seterr("%s: %s: expected [%lld, r]", t->file, t->name,
                         (long long)(H * (nope + vd)));
    if (float_src(t)) return -1;
    const int64_t r = t->shape[1];
    for (int k = 0; k < 2; k++) {
        snprintf(module, sizeof module, "model.layers.%d.self_attn.%s", layer,
                 k ? "unembed_out" : "embed_q");
        qjob *j = new_job(q, J_LIN, module);
        j->xf = k ? X_UNEMB : X_EMBQ, j->nsrc = 1, j->nope = nope, j->vd = vd;
        j->src = k3_xcalloc(1, sizeof *j->src);
        j->src[0] = t;
        int64_t s1[3] = {H, r, nope}, s2[3] = {H, vd, r};
        if (plan_linear(q, j, k ? s2 : s1, 3, t->dtype)) return -1;
    }
    return 0;
}

/* Tensors mlx-lm's sanitize drops. */
static int dropped(const qc *q, const char *n) {
    if (starts(n, "vision_tower") || starts(n, "vision_model") ||
        starts(n, "multi_modal_projector") || starts(n, "mm_projector") || starts(n, "model.mtp") ||
        starts(n, "mtp"))
        return 1;
    if (ends(n, ".weight_shape") || ends(n, ".weight_global_scale")) return 1;
    if (q->cfg.tie_word_embeddings && !strcmp(n, "lm_head.weight")) return 1;
    int layer;
    return sscanf(n, "model.layers.%d.", &layer) == 1 && layer >= q->cfg.num_hidden_layers;
}

/* MLX spelling of a remaining tensor name (renames only). */
static void mlx_name(const char *n, char *out, size_t cap) {
    static const char *res[] = {"self_attention_res", "mlp_res", "output_attn_res"};
    char tmp[512];
    snprintf(tmp, sizeof tmp, "%s", n);
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 2; j++) {
            char from[64], to[64];
            snprintf(from, sizeof from, "%s.%s_weight", res[i], j ? "norm" : "proj");
            snprintf(to, sizeof to, "%s_%s.weight", res[i], j ? "norm" : "proj");
            if (ends(tmp, from)) strcpy(tmp + strlen(tmp) - strlen(from), to);
        }
    char *b = strstr(tmp, "block_sparse_moe.");
    if (b) {
        const char *rest = b + strlen("block_sparse_moe.");
        if (!strcmp(rest, "gate.e_score_correction_bias")) rest = "e_score_correction_bias";
        snprintf(out, cap, "%.*smlp.%s", (int)(b - tmp), tmp, rest);
    } else {
        snprintf(out, cap, "%s", tmp);
    }
}

/* Everything the per-layer planners did not take: drop, rename, quantize Linears. */
static int plan_rest(qc *q) {
    for (int i = 0; i < q->st->n; i++) {
        if (q->used[i]) continue;
        const k3_tensor *t = &q->st->t[i];
        const char *n = starts(t->name, "language_model.") ? t->name + 15 : t->name;
        q->used[i] = 1;
        if (dropped(q, n)) continue;
        char name[512];
        mlx_name(n, name, sizeof name);
        int linear =
            ends(name, ".weight") && t->ndim == 2 && !strstr(name, "conv") && is_float(t->dtype);
        if (linear) {
            name[strlen(name) - 7] = 0;
            qjob *j = new_job(q, J_LIN, name);
            j->xf = X_PLAIN, j->nsrc = 1;
            j->src = k3_xcalloc(1, sizeof *j->src);
            j->src[0] = t;
            if (plan_linear(q, j, t->shape, 2, t->dtype)) return -1;
            continue;
        }
        qjob *j = new_job(q, J_RAW, name);
        j->xf = X_PLAIN, j->nsrc = 1;
        j->src = k3_xcalloc(1, sizeof *j->src);
        j->src[0] = t;
        int64_t flat[1] = {k3_tensor_numel(t)};
        int reshape = ends(name, "dt_bias") && t->ndim > 1;
        if (declare(q, j, name, k3_dtype_name(t->dtype), reshape ? flat : t->shape,
                    reshape ? 1 : t->ndim))
            return -1;
    }
    return 0;
}

static int plan(qc *q) {
    static const char *proj[3][2] = {{"w1", "gate_proj"}, {"w2", "down_proj"}, {"w3", "up_proj"}};
    for (int i = 0; i < q->cfg.num_hidden_layers; i++) {
        if (q->cfg.is_kda[i] ? plan_kda(q, i) : plan_mla(q, i)) return -1;
        if (!k3_config_is_moe_layer(&q->cfg, i)) continue;
        for (int p = 0; p < 3; p++)
            if (plan_experts(q, i, proj[p][0], proj[p][1])) return -1;
    }
    return plan_rest(q);
}

/* ---- producing ---- */

static int run_linear(qc *q, const qjob *j) {
    const int64_t C = j->cols;
    const char *fault = getenv("K3_QCONV_FAULT"); /* test hook: see qconvert.h */
    int64_t chunk = j->xf == X_EXPERTS ? j->shape[1] : (int64_t)(4u << 20) / C;
    if (chunk < 1) chunk = 1;
    size_t cb = j->bits ? (j->mx ? (size_t)C / 2 : k3_affine_row_bytes(C, j->bits))
                        : (size_t)C * k3_dtype_size(j->keep_dt);
    size_t sb = j->mx ? (size_t)C / 32 : k3_affine_scale_row_bytes(C, j->group, K3_W_BF16);
    float *f = k3_xmalloc(sizeof(float) * (size_t)(chunk * C));
    uint8_t *codes = k3_xmalloc(cb * (size_t)chunk);
    uint8_t *sc = j->bits ? k3_xmalloc(sb * (size_t)chunk) : NULL;
    uint8_t *bi = j->bits && !j->mx ? k3_xmalloc(sb * (size_t)chunk) : NULL;
    int rc = 0;
    for (int64_t r0 = 0; r0 < j->rows && !rc; r0 += chunk) {
        int64_t n = j->rows - r0 < chunk ? j->rows - r0 : chunk;
        if (j->xf == X_EXPERTS && r0 / chunk + 1 < j->nsrc) { /* read the next expert ahead */
            will_need(j->src[r0 / chunk + 1]);
            if (j->src2[r0 / chunk + 1]) will_need(j->src2[r0 / chunk + 1]);
        }
        k3_qc_job_rows(j, r0, n, f);
        if (!j->bits) {
            size_t es = k3_dtype_size(j->keep_dt);
            k3_qc_store(f, n * C, j->keep_dt, codes);
            rc = k3_sts_write(q->w, j->out[0], (uint64_t)r0 * C * es, codes, (size_t)(n * C) * es);
        } else {
            rc = k3_qc_quantize(j, f, n, codes, sc, bi);
            if (!rc && r0 == 0 && fault && !strcmp(fault, j->module)) codes[0] ^= 1;
            if (!rc) rc = k3_sts_write(q->w, j->out[0], (uint64_t)r0 * cb, codes, cb * (size_t)n);
            if (!rc) rc = k3_sts_write(q->w, j->out[1], (uint64_t)r0 * sb, sc, sb * (size_t)n);
            if (!rc && bi)
                rc = k3_sts_write(q->w, j->out[2], (uint64_t)r0 * sb, bi, sb * (size_t)n);
        }
        k3_qc_drop_inputs(q->st);
    }
    free(f);
    free(codes);
    free(sc);
    free(bi);
    return rc ? k3_preferr("%s", j->module) : 0;
}

/* Copy the bytes of srcs[0..n) back to back into output tensor `out`. */
static int copy_srcs(qc *q, int out, const k3_tensor **srcs, int n) {
    uint64_t off = 0;
    const size_t piece = 64u << 20;
    for (int i = 0; i < n; i++) {
        const k3_tensor *t = srcs[i];
        if (i + 1 < n) will_need(srcs[i + 1]);
        for (size_t o = 0; o < t->bytes; o += piece) {
            size_t m = t->bytes - o < piece ? t->bytes - o : piece;
            if (k3_sts_write(q->w, out, off + o, t->data + o, m)) return -1;
            k3_qc_drop_inputs(q->st);
        }
        off += t->bytes;
    }
    return 0;
}

static int run_job(qc *q, const qjob *j) {
    switch (j->kind) {
    case J_LIN:
        return run_linear(q, j);
    case J_F32:
        return k3_sts_write(q->w, j->out[0], 0, j->vals, k3_sts_tensor_bytes(q->w, j->out[0]));
    default:
        if (copy_srcs(q, j->out[0], j->src, j->nsrc)) return -1;
        return j->src2 ? copy_srcs(q, j->out[1], j->src2, j->nsrc) : 0;
    }
}

/* ---- output directory, config, side files ---- */

/* Refuse a non-empty out unless force/resume; with force remove what a run writes. */
static int prepare_out(const k3_qconv_opts *o) {
    DIR *d = opendir(o->out);
    if (!d) {
        if (errno != ENOENT) return k3_seterr("%s: cannot open: %s", o->out, strerror(errno));
        if (mkdir(o->out, 0755)) return k3_seterr("%s: cannot create: %s", o->out, strerror(errno));
        return 0;
    }
    struct dirent *e;
    int n = 0, rc = 0;
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) n++;
    if (n && !o->force && !o->resume) {
        closedir(d);
        return k3_seterr("%s exists and is not empty; --force overwrites it, --resume continues an "
                         "interrupted run into it",
                         o->out);
    }
    if (n && o->force) {
        rewinddir(d);
        while (!rc && (e = readdir(d))) {
            const char *f = e->d_name;
            if (!ends(f, ".safetensors") && !ends(f, ".partial") &&
                strcmp(f, "model.safetensors.index.json") && strcmp(f, "k3-manifest.json"))
                continue;
            char p[4096];
            snprintf(p, sizeof p, "%s/%s", o->out, f);
            if (unlink(p)) rc = k3_seterr("%s: cannot remove: %s", p, strerror(errno));
        }
    }
    closedir(d);
    return rc;
}

static int write_config(qc *q) {
    const k3_qconv_opts *o = q->o;
    char path[4096];
    snprintf(path, sizeof path, "%s/config.json", o->in);
    json_error_t je;
    json_t *c = json_load_file(path, 0, &je);
    if (!c) return k3_seterr("%s: %s (line %d)", path, je.text, je.line);
    json_t *tc = json_object_get(c, "text_config");
    json_object_del(c, "quantization_config");
    if (json_is_object(tc)) json_object_del(tc, "quantization_config");
    int group = o->mxfp4 ? 32 : o->group;
    json_object_set_new(q->quant, "group_size", json_integer(o->keep_mxfp4 ? 32 : group));
    json_object_set_new(q->quant, "bits", json_integer(o->keep_mxfp4 ? 4 : o->bits));
    json_object_set_new(q->quant, "mode",
                        json_string(o->keep_mxfp4 || o->mxfp4 ? "mxfp4" : "affine"));
    json_object_set(c, "quantization", q->quant);
    json_object_set_new(c, "quantization_config", json_deep_copy(q->quant));
    snprintf(path, sizeof path, "%s/config.json", o->out);
    int rc = json_dump_file(c, path, JSON_INDENT(1)) ? k3_seterr("%s: cannot write", path) : 0;
    json_decref(c);
    return rc;
}

/* Copy tokenizer and other side files (everything but weights and config). */
static int copy_side_files(const k3_qconv_opts *a) {
    DIR *d = opendir(a->in);
    if (!d) return k3_seterr("%s: cannot open directory: %s", a->in, strerror(errno));
    struct dirent *e;
    int rc = 0;
    while (!rc && (e = readdir(d))) {
        const char *n = e->d_name;
        if (n[0] == '.' || !strcmp(n, "config.json") || strstr(n, ".safetensors")) continue;
        char src[4096], dst[4096];
        snprintf(src, sizeof src, "%s/%s", a->in, n);
        snprintf(dst, sizeof dst, "%s/%s", a->out, n);
        struct stat sb;
        if (stat(src, &sb) || !S_ISREG(sb.st_mode)) continue;
        size_t len;
        char *buf = k3_read_file(src, &len);
        FILE *f = buf ? fopen(dst, "wb") : NULL;
        if (!buf || !f || fwrite(buf, 1, len, f) != len)
            rc = k3_seterr("%s: cannot copy to %s", src, dst);
        if (f && fclose(f)) rc = k3_seterr("%s: cannot write", dst);
        free(buf);
    }
    closedir(d);
    return rc;
}

/* Options and input files (name, size, mtime): what makes two runs' outputs equal. */
static char *fingerprint(const qc *q) {
    const k3_qconv_opts *o = q->o;
    size_t cap = 256 + (size_t)q->st->nfiles * 4200, len = 0;
    char *s = k3_xmalloc(cap);
    len +=
        (size_t)snprintf(s, cap, "k3qconvert/1 bits=%d group=%d mx=%d keep=%d mixed=%d router=%d",
                         o->bits, o->group, o->mxfp4, o->keep_mxfp4, o->mixed, o->quant_router);
    for (int i = 0; i < q->st->nfiles; i++) {
        struct stat sb;
        const char *p = q->st->files[i].path, *base = strrchr(p, '/');
        if (stat(p, &sb)) memset(&sb, 0, sizeof sb);
        len += (size_t)snprintf(s + len, cap - len, " %s:%lld:%lld.%09ld", base ? base + 1 : p,
                                (long long)sb.st_size, (long long)sb.st_mtim.tv_sec,
                                sb.st_mtim.tv_nsec);
    }
    return s;
}

static int convert(qc *q) {
    const k3_qconv_opts *o = q->o;
    char path[4096];
    snprintf(path, sizeof path, "%s/config.json", o->in);
    if (k3_config_load(path, &q->cfg)) return -1;
    q->st = k3_st_open_dir(o->in);
    if (!q->st) return -1;
    for (int i = 0; i < q->st->n; i++)
        if (ends(q->st->t[i].name, ".scales") || ends(q->st->t[i].name, ".biases"))
            return k3_seterr("%s: %s: the input is already MLX-quantized; quantize from a "
                             "bf16/f32/MXFP4 checkpoint",
                             q->st->t[i].file, q->st->t[i].name);
    if (!o->check_only && prepare_out(o)) return -1;
    q->used = k3_xcalloc((size_t)q->st->n + 1, 1);
    q->quant = json_object();
    q->w = k3_sts_new(o->out, o->shard_bytes, "k3 quantize");
    if (plan(q)) return -1;
    char *fp = fingerprint(q);
    int rc = k3_sts_layout(q->w, fp);
    free(fp);
    if (rc) return -1;
    q->stats->nshards = k3_sts_nshards(q->w);
    q->stats->out_bytes = k3_sts_total_bytes(q->w);
    if (o->check_only) return k3_qc_verify(q, 1);
    int kept = 0;
    if (o->resume && k3_sts_resume(q->w, &kept)) return -1;
    q->stats->kept = kept;
    k3_sts_progress(q->w, o->progress);
    for (int k = 1; k <= k3_sts_nshards(q->w); k++) {
        if (k3_sts_shard_done(q->w, k)) continue;
        if (k3_sts_open_shard(q->w, k)) return -1;
        for (int i = 0; i < q->nj; i++)
            if (q->j[i].nout && k3_sts_shard_of(q->w, q->j[i].out[0]) == k && run_job(q, &q->j[i]))
                return -1;
        if (k3_sts_close_shard(q->w)) return -1;
    }
    if (k3_sts_finish(q->w)) return -1;
    if (write_config(q) || copy_side_files(o)) return -1;
    return k3_qc_verify(q, 0);
}

int k3_qconvert(const k3_qconv_opts *o, k3_qconv_stats *stats) {
    qc q;
    k3_qconv_stats dummy;
    memset(&q, 0, sizeof q);
    q.o = o;
    q.stats = stats ? stats : &dummy;
    memset(q.stats, 0, sizeof *q.stats);
    int rc = convert(&q);
    for (int i = 0; i < q.nj; i++) {
        free(q.j[i].src);
        free(q.j[i].src2);
        free(q.j[i].vals);
    }
    free(q.j);
    k3_sts_free(q.w);
    if (q.st) k3_st_free(q.st);
    free(q.used);
    json_decref(q.quant);
    k3_config_free(&q.cfg);
    return rc;
}
