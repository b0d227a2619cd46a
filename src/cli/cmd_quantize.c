/* cmd_quantize.c — `k3 quantize`: write an MLX-layout quantized checkpoint.
 *
 * Reads a checkpoint (HF release layout, bf16/f32 with optional MXFP4
 * experts), renames it as mlx-lm's sanitize does (spec §4.2.1: language_model.
 * prefix kept, block_sparse_moe -> mlp, stacked switch_mlp experts, fused
 * qkv_proj / qkv_conv, embed_q / unembed_out, A_log sliced, *_res_proj), and
 * quantizes every Linear whose input dimension the group size divides
 * (spec §4.2.2: weight u32 codes, scales, biases). Routers (*.mlp.gate) are
 * always 8-bit / group 64, *_res_proj is never quantized, everything that is
 * not a Linear keeps its dtype. config.json gets a "quantization" (and
 * identical "quantization_config") block: the global triple plus one entry
 * per quantized module. The output is reloaded with k3_model_load and one
 * token is run through it before the command reports success.
 *
 * Recipes (--recipe): uniform (default) = every Linear at --bits;
 * mixed = routed experts at --bits, embed_tokens / lm_head at 6 bits, every
 * other Linear at max(--bits, 4) (2-bit experts with 4-bit attention, as MLX
 * mixed-precision conversions do). Whole stacked tensors are built in memory,
 * so the largest tensor must fit in RAM (fine for the bench and test models). */
#include "cli/cli.h"

#include "k3.h"

#include "base/err.h"
#include "base/mem.h"
#include "io/config.h"
#include "io/safetensors.h"
#include "io/st_write.h"
#include "quant/dtype.h"
#include "quant/quantize.h"

#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct {
    const char *in, *out;
    int bits, group, mxfp4, keep_mxfp4, mixed;
    unsigned long long shard_mb;
} q_args;

typedef struct {
    q_args a;
    k3_config cfg;
    k3_st *st;
    uint8_t *used; /* [st->n] */
    k3_stw_dir *w;
    json_t *quant; /* the "quantization" block being built */
    int done, total;
} q_ctx;

static void quantize_usage(FILE *f) {
    fprintf(
        f,
        "usage: k3 quantize --model IN --out OUT --bits B [--group-size G] [--mode affine|mxfp4]\n"
        "                   [--keep-experts-mxfp4] [--recipe uniform|mixed] [--shard-mb N]\n"
        "\n"
        "Writes an MLX-layout checkpoint (loadable by k3 and mlx-lm) and checks it by\n"
        "reloading it.\n"
        "  --bits B              2, 3, 4, 5, 6 or 8 (affine); ignored for --mode mxfp4\n"
        "  --group-size G        32, 64 (default) or 128\n"
        "  --mode mxfp4          E2M1 codes with E8M0 scales per 32 (MLX mxfp4 mode)\n"
        "  --keep-experts-mxfp4  copy MXFP4 routed experts unchanged (no requantization)\n"
        "  --recipe mixed        experts at B bits, embeddings/lm_head 6, the rest max(B,4)\n"
        "  --shard-mb N          start a new shard every N MiB (default 4096)\n"
        "Routers are always 8-bit group 64; *_res_proj are never quantized.\n");
}

static int parse_long(const char *s, const char *opt, long *out) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (!*s || *end || errno || v <= 0) {
        fprintf(stderr, "k3 quantize: %s expects a positive integer, got '%s'\n", opt, s);
        return -1;
    }
    *out = v;
    return 0;
}

static int parse_args(int argc, char **argv, q_args *a) {
    memset(a, 0, sizeof *a);
    a->group = 64;
    a->shard_mb = 4096;
    long v;
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(o, "--help") || !strcmp(o, "-h")) {
            quantize_usage(stdout);
            exit(0);
        } else if (!strcmp(o, "--keep-experts-mxfp4")) {
            a->keep_mxfp4 = 1;
        } else if (!val) {
            fprintf(stderr,
                    "k3 quantize: unknown or incomplete option '%s' (k3 quantize --help "
                    "lists the options)\n",
                    o);
            return -2;
        } else if (!strcmp(o, "--model")) {
            a->in = argv[++i];
        } else if (!strcmp(o, "--out")) {
            a->out = argv[++i];
        } else if (!strcmp(o, "--bits") || !strcmp(o, "--group-size") || !strcmp(o, "--shard-mb")) {
            if (parse_long(argv[++i], o, &v) < 0) return -1;
            if (o[2] == 'b')
                a->bits = (int)v;
            else if (o[2] == 'g')
                a->group = (int)v;
            else
                a->shard_mb = (unsigned long long)v;
        } else if (!strcmp(o, "--mode") && (!strcmp(val, "affine") || !strcmp(val, "mxfp4"))) {
            a->mxfp4 = !strcmp(argv[++i], "mxfp4");
        } else if (!strcmp(o, "--recipe") && (!strcmp(val, "uniform") || !strcmp(val, "mixed"))) {
            a->mixed = !strcmp(argv[++i], "mixed");
        } else {
            fprintf(stderr,
                    "k3 quantize: bad option '%s %s' (k3 quantize --help lists the "
                    "options)\n",
                    o, val);
            return -2;
        }
    }
    if (!a->in || !a->out)
        return fprintf(stderr, "k3 quantize: --model and --out are required\n"), -1;
    if (a->mxfp4) a->bits = 4;
    if (a->bits < 2 || a->bits > 8 || a->bits == 7)
        return fprintf(stderr, "k3 quantize: --bits must be 2, 3, 4, 5, 6 or 8\n"), -1;
    if (a->group != 32 && a->group != 64 && a->group != 128)
        return fprintf(stderr, "k3 quantize: --group-size must be 32, 64 or 128\n"), -1;
    return 0;
}

/* ---- reading input tensors ---------------------------------------------- */

static const k3_tensor *take(q_ctx *q, const char *name) {
    char full[512];
    const k3_tensor *t = k3_st_find(q->st, name);
    if (!t) {
        snprintf(full, sizeof full, "language_model.%s", name);
        t = k3_st_find(q->st, full);
    }
    if (t && !q->used[t - q->st->t]) {
        q->used[t - q->st->t] = 1;
        q->done++;
    }
    return t;
}

/* A float tensor (f32/f16/bf16) as f32; NULL + k3_seterr otherwise. */
static float *tensor_f32(const k3_tensor *t) {
    int64_t n = k3_tensor_numel(t);
    float *o = k3_xmalloc(sizeof(float) * (size_t)(n ? n : 1));
    for (int64_t i = 0; i < n; i++) {
        uint16_t h;
        switch (t->dtype) {
        case K3_DT_F32:
            memcpy(&o[i], t->data + 4 * i, 4);
            break;
        case K3_DT_F16:
            memcpy(&h, t->data + 2 * i, 2), o[i] = k3_f16_to_f32(h);
            break;
        case K3_DT_BF16:
            memcpy(&h, t->data + 2 * i, 2), o[i] = k3_bf16_to_f32(h);
            break;
        default:
            free(o);
            k3_seterr("%s: %s: expected a float tensor (F32/F16/BF16), got %s", t->file, t->name,
                      k3_dtype_name(t->dtype));
            return NULL;
        }
    }
    return o;
}

/* ---- writing ------------------------------------------------------------- */

/* Progress bar on stderr: input tensors consumed so far. */
static void progress(q_ctx *q) {
    if (q->total <= 0 || !isatty(2)) return;
    int w = 30, f = (int)((long)w * q->done / q->total);
    fprintf(stderr, "\rk3 quantize: [%.*s%*s] %d/%d tensors", f,
            "==============================", w - f, "", q->done, q->total);
}

static int put(q_ctx *q, const char *name, const char *dtype, const int64_t *shape, int nd,
               const void *data, size_t bytes) {
    char full[640];
    snprintf(full, sizeof full, "language_model.%s", name);
    return k3_stwd_add(q->w, full, dtype, shape, nd, data, bytes);
}

static int put_raw(q_ctx *q, const char *name, const k3_tensor *t) {
    return put(q, name, k3_dtype_name(t->dtype), t->shape, t->ndim, t->data, t->bytes);
}

static int put_f32_as(q_ctx *q, const char *name, k3_dtype dt, const int64_t *shape, int nd,
                      const float *v) {
    int64_t n = 1;
    for (int i = 0; i < nd; i++) n *= shape[i];
    if (dt == K3_DT_F32) return put(q, name, "F32", shape, nd, v, sizeof(float) * (size_t)n);
    uint16_t *h = k3_xmalloc(2 * (size_t)(n ? n : 1));
    for (int64_t i = 0; i < n; i++)
        h[i] = dt == K3_DT_F16 ? k3_f32_to_f16(v[i]) : k3_f32_to_bf16(v[i]);
    int rc = put(q, name, dt == K3_DT_F16 ? "F16" : "BF16", shape, nd, h, 2 * (size_t)n);
    free(h);
    return rc;
}

/* Bits/group a module gets under the recipe; 0 bits = keep unquantized. */
static void module_params(const q_ctx *q, const char *module, int64_t in_dim, int *bits,
                          int *group) {
    const q_args *a = &q->a;
    size_t n = strlen(module);
    int router = n >= 9 && !strcmp(module + n - 9, ".mlp.gate");
    *bits = a->bits;
    *group = a->mxfp4 ? 32 : a->group;
    if (router)
        *bits = 8, *group = 64;
    else if (a->mixed && !strstr(module, "switch_mlp")) {
        int hi = strstr(module, "embed_tokens") || !strcmp(module, "lm_head");
        *bits = hi ? 6 : (a->bits > 4 ? a->bits : 4);
    }
    if (strstr(module, "_res_proj") || in_dim % *group) *bits = 0;
}

static int record_quant(q_ctx *q, const char *module, int bits, int group, const char *mode) {
    char full[640];
    snprintf(full, sizeof full, "language_model.%s", module);
    json_t *e = json_pack("{s:i,s:i,s:s}", "group_size", group, "bits", bits, "mode", mode);
    return json_object_set_new(q->quant, full, e) ? k3_seterr("out of memory (config)") : 0;
}

/* A Linear (or stack of Linears) W [..., rows, cols] given as f32: quantized
 * per the recipe into module.weight/.scales/.biases, or stored as `dt`. */
static int put_linear(q_ctx *q, const char *module, const int64_t *shape, int nd, const float *W,
                      k3_dtype dt) {
    char name[512];
    int64_t cols = shape[nd - 1], rows = 1;
    for (int i = 0; i < nd - 1; i++) rows *= shape[i];
    int bits, group;
    module_params(q, module, cols, &bits, &group);
    int mx = q->a.mxfp4 && !(bits == 8 && group == 64); /* routers stay affine */
    snprintf(name, sizeof name, "%s.weight", module);
    if (!bits) return put_f32_as(q, name, dt, shape, nd, W);
    int64_t sh[K3_ST_MAX_DIMS];
    memcpy(sh, shape, sizeof(int64_t) * (size_t)nd);
    size_t cb = mx ? (size_t)cols / 2 : k3_affine_row_bytes(cols, bits);
    size_t sb = mx ? (size_t)cols / 32 : k3_affine_scale_row_bytes(cols, group, K3_W_BF16);
    uint8_t *codes = k3_xmalloc(cb * (size_t)rows), *sc = k3_xmalloc(sb * (size_t)rows);
    uint8_t *bi = mx ? NULL : k3_xmalloc(sb * (size_t)rows);
    int rc = mx ? k3_quantize_mxfp4(W, rows, cols, codes, sc)
                : k3_quantize_affine(W, rows, cols, bits, group, K3_W_BF16, codes, sc, bi);
    sh[nd - 1] = (int64_t)(cb / 4);
    if (!rc) rc = put(q, name, "U32", sh, nd, codes, cb * (size_t)rows);
    snprintf(name, sizeof name, "%s.scales", module);
    sh[nd - 1] = cols / (mx ? 32 : group);
    if (!rc) rc = put(q, name, mx ? "U8" : "BF16", sh, nd, sc, sb * (size_t)rows);
    snprintf(name, sizeof name, "%s.biases", module);
    if (!rc && !mx) rc = put(q, name, "BF16", sh, nd, bi, sb * (size_t)rows);
    if (!rc) rc = record_quant(q, module, mx ? 4 : bits, mx ? 32 : group, mx ? "mxfp4" : "affine");
    free(codes);
    free(sc);
    free(bi);
    return rc ? k3_preferr("%s", module) : 0;
}

/* A plain input Linear tensor -> put_linear under its MLX module name. */
static int convert_linear(q_ctx *q, const char *module, const k3_tensor *t) {
    float *W = tensor_f32(t);
    if (!W) return -1;
    int rc = put_linear(q, module, t->shape, t->ndim, W, t->dtype);
    free(W);
    progress(q);
    return rc;
}

/* ---- the HF -> MLX mapping (spec §4.2.1) ---------------------------------- */

/* f32 copy of an MXFP4 expert (weight_packed [rows, cols/2], weight_scale [rows, cols/32]). */
static float *mxfp4_f32(const k3_tensor *pk, const k3_tensor *sc, int64_t *rows, int64_t *cols) {
    if (pk->ndim != 2 || sc->ndim != 2 || pk->dtype != K3_DT_U8 || sc->dtype != K3_DT_U8 ||
        sc->shape[0] != pk->shape[0] || sc->shape[1] * 16 != pk->shape[1]) {
        char a[64], b[64];
        k3_seterr("%s: %s %s / %s %s: expected U8 [rows, cols/2] and U8 [rows, cols/32]", pk->file,
                  pk->name, k3_tensor_shape_str(pk, a, sizeof a), sc->name,
                  k3_tensor_shape_str(sc, b, sizeof b));
        return NULL;
    }
    *rows = pk->shape[0];
    *cols = pk->shape[1] * 2;
    k3_wmat w = k3_wmat_mxfp4(*rows, *cols, pk->data, sc->data);
    float *o = k3_xmalloc(sizeof(float) * (size_t)(*rows * *cols));
    for (int64_t r = 0; r < *rows; r++) k3_wmat_row(&w, r, 0, *cols, o + r * *cols);
    return o;
}

/* Routed experts of one layer, projection src (w1/w2/w3) -> switch_mlp.dst. */
static int convert_experts(q_ctx *q, int layer, const char *src, const char *dst) {
    char n1[320], n2[320], module[256];
    const int E = q->cfg.num_experts;
    snprintf(module, sizeof module, "model.layers.%d.mlp.switch_mlp.%s", layer, dst);
    float *all = NULL;
    uint8_t *pks = NULL, *scs = NULL;
    int64_t rows = 0, cols = 0;
    int rc = 0;
    for (int e = 0; e < E && !rc; e++) {
        snprintf(n1, sizeof n1, "model.layers.%d.block_sparse_moe.experts.%d.%s.weight_packed",
                 layer, e, src);
        snprintf(n2, sizeof n2, "model.layers.%d.block_sparse_moe.experts.%d.%s.weight_scale",
                 layer, e, src);
        const k3_tensor *pk = take(q, n1), *sc = take(q, n2), *wt = NULL;
        float *W = NULL;
        int64_t r = 0, c = 0;
        if (!pk) {
            snprintf(n1, sizeof n1, "model.layers.%d.block_sparse_moe.experts.%d.%s.weight", layer,
                     e, src);
            wt = take(q, n1);
            if (!wt || wt->ndim != 2) {
                rc = k3_seterr("%s: missing or not 2-D (expert %d of %d)", n1, e, E);
                break;
            }
            r = wt->shape[0], c = wt->shape[1];
            W = tensor_f32(wt);
        } else if (!sc) {
            rc = k3_seterr("%s: missing (needed with %s)", n2, pk->name);
            break;
        } else if (q->a.keep_mxfp4) {
            r = pk->shape[0], c = pk->shape[1] * 2;
        } else {
            W = mxfp4_f32(pk, sc, &r, &c);
        }
        if ((!W && !(pk && q->a.keep_mxfp4)) || (e && (r != rows || c != cols))) {
            rc = W || pk ? k3_seterr("%s: shape differs from expert 0", pk ? pk->name : n1) : -1;
            free(W);
            break;
        }
        rows = r, cols = c;
        if (pk && q->a.keep_mxfp4) {
            if (!pks)
                pks = k3_xmalloc((size_t)E * pk->bytes), scs = k3_xmalloc((size_t)E * sc->bytes);
            memcpy(pks + (size_t)e * pk->bytes, pk->data, pk->bytes);
            memcpy(scs + (size_t)e * sc->bytes, sc->data, sc->bytes);
        } else {
            if (!all) all = k3_xmalloc(sizeof(float) * (size_t)(E * rows * cols));
            memcpy(all + (size_t)e * (size_t)(rows * cols), W,
                   sizeof(float) * (size_t)(rows * cols));
        }
        free(W);
    }
    if (!rc && pks) {
        int64_t sh[3] = {E, rows, cols / 8}, ss[3] = {E, rows, cols / 32};
        snprintf(n1, sizeof n1, "%s.weight", module);
        snprintf(n2, sizeof n2, "%s.scales", module);
        rc = put(q, n1, "U32", sh, 3, pks, (size_t)(E * rows * cols / 2));
        if (!rc) rc = put(q, n2, "U8", ss, 3, scs, (size_t)(E * rows * cols / 32));
        if (!rc) rc = record_quant(q, module, 4, 32, "mxfp4");
    } else if (!rc && all) {
        int64_t sh[3] = {E, rows, cols};
        rc = put_linear(q, module, sh, 3, all, K3_DT_BF16);
    }
    free(all);
    free(pks);
    free(scs);
    return rc;
}

/* KDA: q/k/v_proj -> qkv_proj (row concat), q/k/v_conv1d [C,1,K] -> qkv_conv.conv.weight
 * [3C,K,1] (same bytes), A_log [>=H] -> [H] (a non-zero tail is refused). */
static int convert_kda(q_ctx *q, int layer) {
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
            rows += p[i]->shape[0];
        }
        float *W = k3_xmalloc(sizeof(float) * (size_t)(rows * D));
        int64_t off = 0;
        for (int i = 0; i < 3; i++) {
            float *v = tensor_f32(p[i]);
            if (!v) return free(W), -1;
            memcpy(W + off, v, sizeof(float) * (size_t)(p[i]->shape[0] * D));
            off += p[i]->shape[0] * D;
            free(v);
        }
        snprintf(module, sizeof module, "model.layers.%d.self_attn.qkv_proj", layer);
        int64_t sh[2] = {rows, D};
        int rc = put_linear(q, module, sh, 2, W, p[0]->dtype);
        free(W);
        if (rc) return -1;
    }
    if (c[0] && c[1] && c[2]) {
        int64_t C = 0, K = c[0]->shape[c[0]->ndim - 1];
        size_t bytes = 0;
        for (int i = 0; i < 3; i++) {
            if (c[i]->ndim != 3 || c[i]->shape[1] != 1 || c[i]->shape[2] != K ||
                c[i]->dtype != c[0]->dtype)
                return k3_seterr("%s: expected [C, 1, %lld] like the q conv", c[i]->name,
                                 (long long)K);
            C += c[i]->shape[0];
            bytes += c[i]->bytes;
        }
        uint8_t *buf = k3_xmalloc(bytes), *o = buf;
        for (int i = 0; i < 3; i++) memcpy(o, c[i]->data, c[i]->bytes), o += c[i]->bytes;
        snprintf(n, sizeof n, "model.layers.%d.self_attn.qkv_conv.conv.weight", layer);
        int64_t sh[3] = {C, K, 1};
        int rc = put(q, n, k3_dtype_name(c[0]->dtype), sh, 3, buf, bytes);
        free(buf);
        if (rc) return -1;
    }
    snprintf(n, sizeof n, "model.layers.%d.self_attn.A_log", layer);
    const k3_tensor *al = take(q, n);
    if (!al) return 0;
    float *v = tensor_f32(al);
    if (!v) return -1;
    int64_t H = q->cfg.kda_heads, N = k3_tensor_numel(al);
    int rc = 0;
    for (int64_t i = H; i < N && !rc; i++)
        if (v[i] != 0.0f)
            rc = k3_seterr("%s: %s has %lld values > %lld heads and a non-zero tail", al->file,
                           al->name, (long long)N, (long long)H);
    int64_t sh[1] = {H < N ? H : N};
    if (!rc) rc = put_f32_as(q, n, K3_DT_F32, sh, 1, v);
    free(v);
    return rc;
}

/* MLA: kv_b_proj [H*(nope+vd), r] -> embed_q [H, r, nope] (W_UK^T), unembed_out [H, vd, r]. */
static int convert_mla(q_ctx *q, int layer) {
    char n[256], module[256];
    snprintf(n, sizeof n, "model.layers.%d.self_attn.kv_b_proj.weight", layer);
    const k3_tensor *t = take(q, n);
    if (!t) return 0;
    const int64_t H = q->cfg.num_attention_heads, nope = q->cfg.qk_nope_head_dim,
                  vd = q->cfg.v_head_dim;
    if (t->ndim != 2 || t->shape[0] != H * (nope + vd))
        return k3_seterr("%s: %s: expected [%lld, r]", t->file, t->name,
                         (long long)(H * (nope + vd)));
    const int64_t r = t->shape[1];
    float *W = tensor_f32(t);
    if (!W) return -1;
    float *uk = k3_xmalloc(sizeof(float) * (size_t)(H * r * nope));
    float *uv = k3_xmalloc(sizeof(float) * (size_t)(H * vd * r));
    for (int64_t h = 0; h < H; h++) {
        const float *blk = W + h * (nope + vd) * r;
        for (int64_t i = 0; i < nope; i++)
            for (int64_t j = 0; j < r; j++) uk[(h * r + j) * nope + i] = blk[i * r + j];
        memcpy(uv + h * vd * r, blk + nope * r, sizeof(float) * (size_t)(vd * r));
    }
    int64_t s1[3] = {H, r, nope}, s2[3] = {H, vd, r};
    snprintf(module, sizeof module, "model.layers.%d.self_attn.embed_q", layer);
    int rc = put_linear(q, module, s1, 3, uk, t->dtype);
    snprintf(module, sizeof module, "model.layers.%d.self_attn.unembed_out", layer);
    if (!rc) rc = put_linear(q, module, s2, 3, uv, t->dtype);
    free(W);
    free(uk);
    free(uv);
    return rc;
}

static int starts(const char *s, const char *p) {
    return !strncmp(s, p, strlen(p));
}
static int ends(const char *s, const char *p) {
    size_t a = strlen(s), b = strlen(p);
    return a >= b && !strcmp(s + a - b, p);
}

/* Tensors mlx-lm's sanitize drops. */
static int dropped(const q_ctx *q, const char *n) {
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

/* Everything the per-layer converters did not take: drop, rename, quantize Linears. */
static int convert_rest(q_ctx *q) {
    for (int i = 0; i < q->st->n; i++) {
        if (q->used[i]) continue;
        const k3_tensor *t = &q->st->t[i];
        const char *n = starts(t->name, "language_model.") ? t->name + 15 : t->name;
        q->used[i] = 1;
        q->done++;
        if (dropped(q, n)) continue;
        if (ends(n, ".scales") || ends(n, ".biases"))
            return k3_seterr(
                "%s: %s: the input is already MLX-quantized; quantize from a bf16/f32/MXFP4 "
                "checkpoint",
                t->file, t->name);
        char name[512];
        mlx_name(n, name, sizeof name);
        int linear = ends(name, ".weight") && t->ndim == 2 && !strstr(name, "conv") &&
                     (t->dtype == K3_DT_BF16 || t->dtype == K3_DT_F16 || t->dtype == K3_DT_F32);
        int rc;
        if (linear) {
            name[strlen(name) - 7] = 0;
            rc = convert_linear(q, name, t);
        } else if (ends(name, "dt_bias") && t->ndim > 1) {
            int64_t sh[1] = {k3_tensor_numel(t)};
            rc = put(q, name, k3_dtype_name(t->dtype), sh, 1, t->data, t->bytes);
        } else {
            rc = put_raw(q, name, t);
        }
        if (rc) return -1;
    }
    return 0;
}

static int convert_all(q_ctx *q) {
    static const char *proj[3][2] = {{"w1", "gate_proj"}, {"w2", "down_proj"}, {"w3", "up_proj"}};
    for (int i = 0; i < q->cfg.num_hidden_layers; i++) {
        if (q->cfg.is_kda[i] ? convert_kda(q, i) : convert_mla(q, i)) return -1;
        if (!k3_config_is_moe_layer(&q->cfg, i)) continue;
        for (int j = 0; j < 3; j++)
            if (convert_experts(q, i, proj[j][0], proj[j][1])) return -1;
        progress(q);
    }
    return convert_rest(q);
}

/* ---- top level ----------------------------------------------------------- */

static int write_config(q_ctx *q) {
    char path[4096];
    snprintf(path, sizeof path, "%s/config.json", q->a.in);
    json_error_t je;
    json_t *c = json_load_file(path, 0, &je);
    if (!c) return k3_seterr("%s: %s (line %d)", path, je.text, je.line);
    json_t *tc = json_object_get(c, "text_config");
    json_object_del(c, "quantization_config");
    if (json_is_object(tc)) json_object_del(tc, "quantization_config");
    int bits = q->a.bits, group = q->a.mxfp4 ? 32 : q->a.group;
    json_object_set_new(q->quant, "group_size", json_integer(q->a.keep_mxfp4 ? 32 : group));
    json_object_set_new(q->quant, "bits", json_integer(q->a.keep_mxfp4 ? 4 : bits));
    json_object_set_new(q->quant, "mode",
                        json_string(q->a.keep_mxfp4 || q->a.mxfp4 ? "mxfp4" : "affine"));
    json_object_set(c, "quantization", q->quant);
    json_object_set_new(c, "quantization_config", json_deep_copy(q->quant));
    snprintf(path, sizeof path, "%s/config.json", q->a.out);
    int rc = json_dump_file(c, path, JSON_INDENT(1)) ? k3_seterr("%s: cannot write", path) : 0;
    json_decref(c);
    return rc;
}

/* Copy tokenizer and other side files (everything but weights and config). */
static int copy_side_files(const q_args *a) {
    DIR *d = opendir(a->in);
    if (!d) return k3_seterr("%s: cannot open directory: %s", a->in, strerror(errno));
    struct dirent *e;
    int rc = 0;
    while (!rc && (e = readdir(d))) {
        const char *n = e->d_name;
        size_t l = strlen(n);
        if (n[0] == '.' || !strcmp(n, "config.json") || strstr(n, ".safetensors")) continue;
        char src[4096], dst[4096];
        snprintf(src, sizeof src, "%s/%s", a->in, n);
        snprintf(dst, sizeof dst, "%s/%s", a->out, n);
        struct stat sb;
        if (stat(src, &sb) || !S_ISREG(sb.st_mode) || l == 0) continue;
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

/* Reload the output with the engine and run one token through it. */
static int validate(const char *dir) {
    k3_model *m = k3_model_load(dir, NULL);
    if (!m) return k3_preferr("reloading %s", dir);
    k3_seq *s = k3_seq_new(m);
    float *logits = k3_xmalloc(sizeof(float) * (size_t)k3_model_vocab(m));
    int32_t tok = 1;
    int rc = k3_forward(s, &tok, 1, logits, 0);
    for (int i = 0; rc == 0 && i < k3_model_vocab(m); i++)
        if (!isfinite(logits[i])) rc = k3_seterr("reloaded %s gives a non-finite logit", dir);
    free(logits);
    k3_seq_free(s);
    k3_model_free(m);
    return rc;
}

static int run(q_ctx *q) {
    char path[4096];
    snprintf(path, sizeof path, "%s/config.json", q->a.in);
    if (k3_config_load(path, &q->cfg)) return -1;
    q->st = k3_st_open_dir(q->a.in);
    if (!q->st) return -1;
    for (int i = 0; i < q->st->n; i++)
        if (ends(q->st->t[i].name, ".scales") || ends(q->st->t[i].name, ".biases"))
            return k3_seterr("%s: %s: the input is already MLX-quantized; quantize from a "
                             "bf16/f32/MXFP4 checkpoint",
                             q->st->t[i].file, q->st->t[i].name);
    q->used = k3_xcalloc((size_t)q->st->n + 1, 1);
    q->total = q->st->n;
    if (mkdir(q->a.out, 0755) && errno != EEXIST)
        return k3_seterr("%s: cannot create: %s", q->a.out, strerror(errno));
    q->w = k3_stwd_open(q->a.out, q->a.shard_mb << 20);
    q->quant = json_object();
    if (!q->w || !q->quant) return -1;
    int rc = convert_all(q);
    if (rc) {
        k3_stwd_abort(q->w);
        return -1;
    }
    if (q->total && isatty(2)) fprintf(stderr, "\n");
    if (k3_stwd_close(q->w) || write_config(q) || copy_side_files(&q->a)) return -1;
    return validate(q->a.out);
}

int cmd_quantize(int argc, char **argv) {
    q_ctx q;
    memset(&q, 0, sizeof q);
    int prc = parse_args(argc, argv, &q.a);
    if (prc < 0) {
        if (prc == -1) quantize_usage(stderr); /* -2: a one-line error was printed */
        return 2;
    }
    double t0 = k3_now();
    int rc = run(&q);
    if (q.st) k3_st_free(q.st);
    free(q.used);
    json_decref(q.quant);
    k3_config_free(&q.cfg);
    if (rc) {
        fprintf(stderr, "%sk3 quantize: %s\n", isatty(2) ? "\n" : "", k3_errmsg());
        return 1;
    }
    printf("wrote %s (%s, checked by reloading) in %.1f s\n", q.a.out,
           q.a.mxfp4   ? "mxfp4"
           : q.a.mixed ? "mixed affine"
                       : "affine",
           k3_now() - t0);
    return 0;
}
