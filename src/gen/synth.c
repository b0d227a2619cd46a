/* synth.c — random weights in the release layout (see synth.h): walks the
 * layers like the oracle's make_tiny.py build() and streams each tensor into
 * the safetensors writer. */
#include "gen/synth.h"

#include "base/err.h"
#include "base/mem.h"
#include "gen/rng.h"
#include "io/config.h"
#include "io/st_write.h"
#include "quant/dtype.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define PREFIX "language_model."

typedef struct {
    k3_rng rng;
    k3_stw_dir *w;
    int f32; /* dtype of Linears / norms / embeddings */
    int mxfp4;
    const k3_config *c;
    uint64_t values;
} synth;

/* Tensor names are short (< 120 bytes); a longer one is a bug, not input. */
static const char *cat(char *buf, size_t n, const char *a, const char *b) {
    if (snprintf(buf, n, "%s%s", a, b) >= (int)n) k3_die("tensor name too long: %s%s", a, b);
    return buf;
}
/* Add n floats as F32 or BF16 under PREFIX+name. */
static int put(synth *s, const char *name, const float *x, const int64_t *shape, int ndim,
               int64_t n, int force_f32) {
    char full[320];
    cat(full, sizeof full, PREFIX, name);
    s->values += (uint64_t)n;
    if (force_f32 || s->f32) return k3_stwd_add(s->w, full, "F32", shape, ndim, x, (size_t)n * 4);
    uint16_t *b = k3_xmalloc((size_t)(n ? n : 1) * 2);
    for (int64_t i = 0; i < n; i++) b[i] = k3_f32_to_bf16(x[i]);
    int rc = k3_stwd_add(s->w, full, "BF16", shape, ndim, b, (size_t)n * 2);
    free(b);
    return rc;
}

/* mean + scale * N(0, 1), shape [d0] or [d0, d1] or [d0, 1, d2] (ndim).
 * BF16 tensors are rounded as they are drawn (the same values as rounding an
 * f32 buffer afterwards), so a real-size embedding needs 2 bytes a value,
 * not 6. */
static int put_normal(synth *s, const char *name, const int64_t *shape, int ndim, double mean,
                      double scale, int force_f32) {
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) n *= shape[i];
    if (!force_f32 && !s->f32) {
        char full[320];
        cat(full, sizeof full, PREFIX, name);
        s->values += (uint64_t)n;
        uint16_t *b = k3_xmalloc((size_t)(n ? n : 1) * 2);
        for (int64_t i = 0; i < n; i++)
            b[i] = k3_f32_to_bf16((float)(mean + scale * k3_rng_normal(&s->rng)));
        int rc = k3_stwd_add(s->w, full, "BF16", shape, ndim, b, (size_t)n * 2);
        free(b);
        return rc;
    }
    float *x = k3_xmalloc((size_t)(n ? n : 1) * sizeof *x);
    for (int64_t i = 0; i < n; i++) x[i] = (float)(mean + scale * k3_rng_normal(&s->rng));
    int rc = put(s, name, x, shape, ndim, n, force_f32);
    free(x);
    return rc;
}

static int lin(synth *s, const char *name, int64_t out, int64_t in) {
    return put_normal(s, name, (int64_t[]){out, in}, 2, 0, 1.0 / sqrt((double)in), 0);
}

static int norm(synth *s, const char *name, int64_t n, int force_f32) {
    return put_normal(s, name, (int64_t[]){n}, 1, 1.0, 0.1, force_f32);
}

/* Random MXFP4 matrix: packed codes [out, in/2] (element 2j in the low
 * nibble of byte j) and E8M0 scales [out, in/32] around 1/(2.93 sqrt(in)). */
static int mxfp4(synth *s, const char *base, int64_t out, int64_t in) {
    if (in % 32)
        return k3_seterr("MXFP4 experts need in_features %% 32 == 0 (%s has %lld)", base,
                         (long long)in);
    size_t np = (size_t)(out * in / 2), ns = (size_t)(out * in / 32);
    uint8_t *p = k3_xmalloc(np), *sc = k3_xmalloc(ns);
    for (size_t i = 0; i < np; i++) p[i] = (uint8_t)k3_rng_below(&s->rng, 256);
    int e = (int)lround(log2(1.0 / sqrt((double)in) / 2.93));
    for (size_t i = 0; i < ns; i++) sc[i] = (uint8_t)(127 + e + (int)k3_rng_below(&s->rng, 3) - 1);
    char n1[400], n2[400];
    cat(n1, sizeof n1, PREFIX, base);
    cat(n2, sizeof n2, PREFIX, base);
    strcat(n1, ".weight_packed"); /* base < 300 bytes, so both fit */
    strcat(n2, ".weight_scale");
    int rc = k3_stwd_add(s->w, n1, "U8", (int64_t[]){out, in / 2}, 2, p, np) ||
             k3_stwd_add(s->w, n2, "U8", (int64_t[]){out, in / 32}, 2, sc, ns);
    s->values += np * 2;
    free(p);
    free(sc);
    return rc ? -1 : 0;
}

#define NAME(a, b) cat(nm, sizeof nm, a, b)

static int attn_res(synth *s, const char *p, const char *src) {
    char nm[300], base[300];
    int64_t D = s->c->hidden_size;
    snprintf(base, sizeof base, "%s%s", p, src);
    return norm(s, NAME(base, "_norm.weight"), D, 0) || lin(s, NAME(base, "_proj.weight"), 1, D);
}

static int kda_layer(synth *s, const char *a) {
    const k3_config *c = s->c;
    char nm[300];
    int64_t D = c->hidden_size, H = c->kda_heads, hd = c->kda_head_dim, K = c->kda_conv_kernel;
    int64_t P = H * hd;
    static const char *qkv[] = {"q", "k", "v"};
    for (int i = 0; i < 3; i++) {
        char pn[64], cn[64];
        snprintf(pn, sizeof pn, "%s_proj.weight", qkv[i]);
        snprintf(cn, sizeof cn, "%s_conv1d.weight", qkv[i]);
        if (lin(s, NAME(a, pn), P, D) ||
            put_normal(s, NAME(a, cn), (int64_t[]){P, 1, K}, 3, 0, 1.0 / sqrt((double)K), 1))
            return -1;
    }
    if (lin(s, NAME(a, "f_a_proj.weight"), hd, D) || lin(s, NAME(a, "f_b_proj.weight"), P, hd))
        return -1;
    int64_t na = hd > H ? hd : H; /* release: A_log padded to max(head_dim, heads), zero tail */
    float *alog = k3_xcalloc((size_t)na, sizeof *alog);
    for (int64_t h = 0; h < H; h++) alog[h] = (float)log(1.0 + 15.0 * k3_rng_unit(&s->rng));
    int rc = put(s, NAME(a, "A_log"), alog, (int64_t[]){na}, 1, na, 1);
    free(alog);
    if (rc || put_normal(s, NAME(a, "dt_bias"), (int64_t[]){P}, 1, 0, 0.5, 1) ||
        lin(s, NAME(a, "b_proj.weight"), H, D))
        return -1;
    if (c->kda_full_rank_gate) {
        if (lin(s, NAME(a, "g_proj.weight"), P, D)) return -1;
    } else if (lin(s, NAME(a, "g_a_proj.weight"), hd, D) ||
               lin(s, NAME(a, "g_b_proj.weight"), P, hd)) {
        return -1;
    }
    return norm(s, NAME(a, "o_norm.weight"), hd, 1) || lin(s, NAME(a, "o_proj.weight"), D, P);
}

static int mla_layer(synth *s, const char *a) {
    const k3_config *c = s->c;
    char nm[300];
    int64_t D = c->hidden_size, nh = c->num_attention_heads, r = c->kv_lora_rank;
    int64_t qd = nh * (c->qk_nope_head_dim + c->qk_rope_head_dim), ql = c->q_lora_rank;
    if (ql > 0) {
        if (lin(s, NAME(a, "q_a_proj.weight"), ql, D) ||
            norm(s, NAME(a, "q_a_layernorm.weight"), ql, 0) ||
            lin(s, NAME(a, "q_b_proj.weight"), qd, ql))
            return -1;
    } else if (lin(s, NAME(a, "q_proj.weight"), qd, D)) {
        return -1;
    }
    if (lin(s, NAME(a, "kv_a_proj_with_mqa.weight"), r + c->qk_rope_head_dim, D) ||
        norm(s, NAME(a, "kv_a_layernorm.weight"), r, 0) ||
        lin(s, NAME(a, "kv_b_proj.weight"), nh * (c->qk_nope_head_dim + c->v_head_dim), r))
        return -1;
    if (c->mla_use_output_gate && lin(s, NAME(a, "g_proj.weight"), nh * c->v_head_dim, D))
        return -1;
    return lin(s, NAME(a, "o_proj.weight"), D, nh * c->v_head_dim);
}

static int routed_experts(synth *s, const char *m) {
    const k3_config *c = s->c;
    int64_t mi = c->moe_intermediate_size;
    int64_t X = c->routed_expert_hidden_size > 0 ? c->routed_expert_hidden_size : c->hidden_size;
    for (int e = 0; e < c->num_experts; e++) {
        static const char *ws[] = {"w1", "w2", "w3"};
        for (int w = 0; w < 3; w++) {
            int64_t o = w == 1 ? X : mi, n = w == 1 ? mi : X;
            char base[300];
            snprintf(base, sizeof base, "%sexperts.%d.%s", m, e, ws[w]);
            if (s->mxfp4 ? mxfp4(s, base, o, n) : lin(s, strcat(base, ".weight"), o, n)) return -1;
        }
    }
    return 0;
}

static int moe_block(synth *s, const char *m) {
    const k3_config *c = s->c;
    char nm[300];
    int64_t D = c->hidden_size, E = c->num_experts, mi = c->moe_intermediate_size;
    if (lin(s, NAME(m, "gate.weight"), E, D) ||
        put_normal(s, NAME(m, "gate.e_score_correction_bias"), (int64_t[]){E}, 1, 0, 0.1, 1) ||
        routed_experts(s, m))
        return -1;
    int64_t sh = mi * c->num_shared_experts;
    if (sh && (lin(s, NAME(m, "shared_experts.gate_proj.weight"), sh, D) ||
               lin(s, NAME(m, "shared_experts.up_proj.weight"), sh, D) ||
               lin(s, NAME(m, "shared_experts.down_proj.weight"), D, sh)))
        return -1;
    int64_t L = c->routed_expert_hidden_size;
    if (L > 0 && (lin(s, NAME(m, "routed_expert_down_proj.weight"), L, D) ||
                  lin(s, NAME(m, "routed_expert_up_proj.weight"), D, L) ||
                  (c->latent_moe_use_norm && norm(s, NAME(m, "routed_expert_norm.weight"), L, 0))))
        return -1;
    return 0;
}

static int dense_mlp(synth *s, const char *p) {
    char nm[300];
    int64_t D = s->c->hidden_size, I = s->c->intermediate_size;
    return lin(s, NAME(p, "mlp.gate_proj.weight"), I, D) ||
           lin(s, NAME(p, "mlp.up_proj.weight"), I, D) ||
           lin(s, NAME(p, "mlp.down_proj.weight"), D, I);
}

static int layer(synth *s, int i) {
    const k3_config *c = s->c;
    char p[64], a[96], m[96], nm[300];
    snprintf(p, sizeof p, "model.layers.%d.", i);
    snprintf(a, sizeof a, "%sself_attn.", p);
    snprintf(m, sizeof m, "%sblock_sparse_moe.", p);
    if (norm(s, NAME(p, "input_layernorm.weight"), c->hidden_size, 0) ||
        norm(s, NAME(p, "post_attention_layernorm.weight"), c->hidden_size, 0))
        return -1;
    if (c->attn_res_block_size > 0 &&
        (attn_res(s, p, "self_attention_res") || attn_res(s, p, "mlp_res")))
        return -1;
    if (c->is_kda[i] ? kda_layer(s, a) : mla_layer(s, a)) return -1;
    int moe = c->num_experts > 0 && k3_config_is_moe_layer(c, i);
    return moe ? moe_block(s, m) : dense_mlp(s, p);
}

static int all_tensors(synth *s) {
    const k3_config *c = s->c;
    int64_t V = c->vocab_size, D = c->hidden_size;
    if (put_normal(s, "model.embed_tokens.weight", (int64_t[]){V, D}, 2, 0, 1, 0)) return -1;
    for (int i = 0; i < c->num_hidden_layers; i++)
        if (layer(s, i)) return k3_preferr("layer %d", i);
    if (norm(s, "model.norm.weight", D, 0)) return -1;
    if (c->attn_res_block_size > 0 && attn_res(s, "model.", "output_attn_res")) return -1;
    if (!c->tie_word_embeddings && lin(s, "lm_head.weight", V, D)) return -1;
    return 0;
}

static int write_json(const char *dir, const char *file, const json_t *j) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    if (json_dump_file(j, path, JSON_INDENT(2) | JSON_PRESERVE_ORDER))
        return k3_seterr("%s: cannot write", path);
    return 0;
}

static int make_dir(const char *dir) {
    struct stat st;
    if (!stat(dir, &st)) return S_ISDIR(st.st_mode) ? 0 : k3_seterr("%s: not a directory", dir);
    if (mkdir(dir, 0755)) return k3_seterr("%s: cannot create: %s", dir, strerror(errno));
    return 0;
}

/* Parse the config through the engine's reader, so a synthetic checkpoint
 * is only written for a configuration the engine accepts. */
static int parse_config(const json_t *config, const char *dir, k3_config *c) {
    char *text = json_dumps(config, JSON_COMPACT);
    char label[4200];
    snprintf(label, sizeof label, "config for %s", dir);
    int rc = text ? k3_config_parse(text, strlen(text), label, c) : k3_seterr("bad config");
    free(text);
    return rc;
}

int k3_synth_write(const char *dir, const json_t *config, const k3_synth_opts *o) {
    k3_config c;
    memset(&c, 0, sizeof c);
    if (parse_config(config, dir, &c)) return -1;
    if (make_dir(dir) || write_json(dir, "config.json", config) ||
        k3_synth_tokenizer(dir, c.vocab_size)) {
        k3_config_free(&c);
        return -1;
    }
    synth s = {.f32 = o->f32, .mxfp4 = o->mxfp4, .c = &c};
    k3_rng_seed(&s.rng, o->seed);
    s.w = k3_stwd_open(dir, o->shard_bytes ? o->shard_bytes : 4ull << 30);
    int rc = all_tensors(&s);
    if (rc)
        k3_stwd_abort(s.w);
    else if (k3_stwd_close(s.w))
        rc = -1;
    if (!rc && o->progress)
        fprintf(stderr, "wrote %s: %llu values, %s%s, seed %llu\n", dir,
                (unsigned long long)s.values, o->f32 ? "f32" : "bf16",
                o->mxfp4 ? ", mxfp4 experts" : "", (unsigned long long)o->seed);
    k3_config_free(&c);
    return rc ? k3_preferr("writing %s", dir) : 0;
}
