/* config.c — config.json → k3_config with defaults and refusal of unsupported values. */
#include "io/config.h"
#include "base/err.h"
#include "base/mem.h"

#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Integer field: absent or null → def. Booleans are accepted as 0/1 where the
 * field is a flag (is_flag); a real only when it is a whole number within int's
 * range (checked before any conversion: converting 3e9 or 1e30 to an integer
 * type is undefined). Anything else is a type error naming the field. */
static int get_int(json_t *o, const char *key, int def, int *out, const char *label) {
    json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v)) {
        *out = def;
        return 0;
    }
    if (json_is_boolean(v)) {
        *out = json_is_true(v);
        return 0;
    }
    if (json_is_real(v)) {
        double d = json_real_value(v);
        if (!(d >= -2147483648.0 && d <= 2147483647.0) || d != (double)(int)d)
            return k3_seterr("%s: field \"%s\" must be an integer", label, key);
        *out = (int)d;
        return 0;
    }
    if (!json_is_integer(v) || json_integer_value(v) < -(1LL << 31) ||
        json_integer_value(v) > (1LL << 31) - 1)
        return k3_seterr("%s: field \"%s\" must be an integer", label, key);
    *out = (int)json_integer_value(v);
    return 0;
}

static int get_num(json_t *o, const char *key, double def, double *out, int *present,
                   const char *label) {
    json_t *v = json_object_get(o, key);
    if (present) *present = v && !json_is_null(v);
    if (!v || json_is_null(v)) {
        *out = def;
        return 0;
    }
    if (!json_is_number(v)) return k3_seterr("%s: field \"%s\" must be a number", label, key);
    *out = json_number_value(v);
    return 0;
}

static int want_string(json_t *o, const char *key, const char *want, const char *label) {
    json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v)) return 0; /* default is the supported value */
    if (!json_is_string(v) || strcmp(json_string_value(v), want))
        return k3_seterr("%s: field \"%s\" is %s%s%s; only \"%s\" is supported", label, key,
                         json_is_string(v) ? "\"" : "",
                         json_is_string(v) ? json_string_value(v) : "not a string",
                         json_is_string(v) ? "\"" : "", want);
    return 0;
}

/* A token id field (text_config first, then the top level): an integer, or
 * (eos_token_id, as Hugging Face allows) a list of integers; ids go to out[],
 * *n their count (0 if absent or null). Anything else is an error. */
static int token_ids(json_t *root, json_t *tc, const char *key, int vocab, int *out, int *n,
                     int max, const char *L) {
    json_t *v = json_object_get(tc, key);
    if (!v || json_is_null(v)) v = json_object_get(root, key);
    *n = 0;
    if (!v || json_is_null(v)) return 0;
    int list = json_is_array(v);
    size_t cnt = list ? json_array_size(v) : 1;
    if (list && (int)cnt > max)
        return k3_seterr("%s: field \"%s\" lists %zu ids, at most %d are supported", L, key, cnt,
                         max);
    for (size_t i = 0; i < cnt; i++) {
        json_t *e = list ? json_array_get(v, i) : v;
        if (!json_is_integer(e))
            return k3_seterr("%s: field \"%s\" must be a token id (an integer)%s", L, key,
                             max > 1 ? " or a list of token ids" : "");
        json_int_t id = json_integer_value(e);
        if (id < 0 || id >= vocab)
            return k3_seterr("%s: field \"%s\" = %lld is not a token id of the vocabulary "
                             "(vocab_size %d)",
                             L, key, (long long)id, vocab);
        out[(*n)++] = (int)id;
    }
    return 0;
}

static int parse_token_ids(json_t *root, json_t *tc, k3_config *c, const char *L) {
    int n = 0;
    if (token_ids(root, tc, "bos_token_id", c->vocab_size, &c->bos_token_id, &n, 1, L)) return -1;
    if (!n) c->bos_token_id = -1;
    if (token_ids(root, tc, "eos_token_id", c->vocab_size, c->eos_ids, &c->n_eos, K3_CONFIG_MAX_EOS,
                  L))
        return -1;
    c->eos_token_id = c->n_eos ? c->eos_ids[0] : -1;
    return 0;
}

static int parse_main_fields(json_t *tc, k3_config *c, const char *L) {
    int rc = 0;
    rc |= get_int(tc, "vocab_size", 163840, &c->vocab_size, L);
    rc |= get_int(tc, "hidden_size", 7168, &c->hidden_size, L);
    rc |= get_int(tc, "num_hidden_layers", 93, &c->num_hidden_layers, L);
    rc |= get_int(tc, "num_attention_heads", 96, &c->num_attention_heads, L);
    rc |= get_int(tc, "intermediate_size", 33792, &c->intermediate_size, L);
    rc |= get_num(tc, "rms_norm_eps", 1e-5, &c->rms_norm_eps, NULL, L);
    rc |= get_num(tc, "activation_situ_beta", 1.0, &c->situ_beta, NULL, L);
    rc |= get_num(tc, "activation_situ_linear_beta", 0.0, &c->situ_linear_beta, NULL, L);
    rc |= get_int(tc, "attn_res_block_size", 0, &c->attn_res_block_size, L);
    rc |= get_int(tc, "q_lora_rank", 0, &c->q_lora_rank, L);
    rc |= get_int(tc, "kv_lora_rank", 0, &c->kv_lora_rank, L);
    rc |= get_int(tc, "qk_nope_head_dim", 0, &c->qk_nope_head_dim, L);
    rc |= get_int(tc, "qk_rope_head_dim", 0, &c->qk_rope_head_dim, L);
    rc |= get_int(tc, "v_head_dim", 0, &c->v_head_dim, L);
    rc |= get_int(tc, "mla_use_output_gate", 0, &c->mla_use_output_gate, L);
    rc |= get_int(tc, "num_experts", 0, &c->num_experts, L);
    rc |= get_int(tc, "num_experts_per_token", 16, &c->num_experts_per_token, L);
    rc |= get_int(tc, "num_shared_experts", 0, &c->num_shared_experts, L);
    rc |= get_int(tc, "moe_intermediate_size", 0, &c->moe_intermediate_size, L);
    rc |= get_int(tc, "moe_renormalize", 1, &c->moe_renormalize, L);
    rc |= get_num(tc, "routed_scaling_factor", 1.0, &c->routed_scaling_factor, NULL, L);
    rc |= get_int(tc, "first_k_dense_replace", 0, &c->first_k_dense_replace, L);
    rc |= get_int(tc, "moe_layer_freq", 1, &c->moe_layer_freq, L);
    rc |= get_int(tc, "num_expert_group", 1, &c->num_expert_group, L);
    rc |= get_int(tc, "topk_group", 1, &c->topk_group, L);
    rc |= get_int(tc, "routed_expert_hidden_size", 0, &c->routed_expert_hidden_size, L);
    rc |= get_int(tc, "latent_moe_use_norm", 0, &c->latent_moe_use_norm, L);
    rc |= get_int(tc, "tie_word_embeddings", 0, &c->tie_word_embeddings, L);
    rc |= get_int(tc, "num_nextn_predict_layers", 0, &c->num_nextn_predict_layers, L);
    if (rc) return -1;
    /* The reference's `beta or 1.0`: a null or zero beta means 1.0. */
    if (c->situ_beta == 0.0) c->situ_beta = 1.0;
    return 0;
}

/* A flag field holds 0 or 1 (false / true). */
static int flag(int v, const char *field, const char *L) {
    if (v == 0 || v == 1) return 0;
    return k3_seterr("%s: field \"%s\" = %d, expected true or false (0 or 1)", L, field, v);
}

/* count in lo..hi (inclusive), else an error naming the field and the range. */
static int in_range(int v, int lo, int hi, const char *field, const char *L) {
    if (v >= lo && v <= hi) return 0;
    return k3_seterr("%s: field \"%s\" = %d is out of range (expected %d..%d)", L, field, v, lo,
                     hi);
}

static int finite_pos(double v, int zero_ok, const char *field, const char *L) {
    if (isfinite(v) && (v > 0 || (zero_ok && v == 0))) return 0;
    return k3_seterr("%s: field \"%s\" = %g, expected a finite %s number", L, field, v,
                     zero_ok ? "non-negative" : "positive");
}

/* Every numeric field of parse_main_fields within what the engine can mean by
 * it, before anything is sized from it (the sizes the layers use are checked
 * again, for consistency, in check_sizes / check_moe). */
static int check_ranges(const k3_config *c, const char *L) {
    const int big = 1 << 24;
    if (in_range(c->num_hidden_layers, 1, 4096, "num_hidden_layers", L) ||
        in_range(c->num_nextn_predict_layers, 0, 64, "num_nextn_predict_layers", L) ||
        in_range(c->num_experts, 0, 65536, "num_experts", L) ||
        in_range(c->num_shared_experts, 0, 65536, "num_shared_experts", L) ||
        in_range(c->first_k_dense_replace, 0, c->num_hidden_layers, "first_k_dense_replace", L) ||
        in_range(c->attn_res_block_size, 0, 4096, "attn_res_block_size", L))
        return -1;
    const struct {
        int v;
        const char *f;
    } sizes[] = {{c->q_lora_rank, "q_lora_rank"},
                 {c->kv_lora_rank, "kv_lora_rank"},
                 {c->qk_nope_head_dim, "qk_nope_head_dim"},
                 {c->qk_rope_head_dim, "qk_rope_head_dim"},
                 {c->v_head_dim, "v_head_dim"},
                 {c->intermediate_size, "intermediate_size"},
                 {c->moe_intermediate_size, "moe_intermediate_size"},
                 {c->routed_expert_hidden_size, "routed_expert_hidden_size"},
                 {c->num_attention_heads, "num_attention_heads"}};
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++)
        if (in_range(sizes[i].v, 0, big, sizes[i].f, L)) return -1;
    if (flag(c->mla_use_output_gate, "mla_use_output_gate", L) ||
        flag(c->moe_renormalize, "moe_renormalize", L) ||
        flag(c->latent_moe_use_norm, "latent_moe_use_norm", L) ||
        flag(c->tie_word_embeddings, "tie_word_embeddings", L))
        return -1;
    if (finite_pos(c->situ_beta, 0, "activation_situ_beta", L) ||
        finite_pos(c->situ_linear_beta, 1, "activation_situ_linear_beta", L) ||
        finite_pos(c->routed_scaling_factor, 0, "routed_scaling_factor", L))
        return -1;
    return 0;
}

/* max_position_embeddings (top level, else text_config): absent is 0 (no
 * trained context known); present, it is the prompt cap the server applies,
 * so 0, a negative or an absurd value is refused rather than read as "none". */
static int parse_max_positions(json_t *root, json_t *tc, k3_config *c, const char *L) {
    const char *key = "max_position_embeddings";
    json_t *o = json_object_get(root, key) && !json_is_null(json_object_get(root, key)) ? root : tc;
    json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v)) return 0;
    if (json_is_boolean(v)) return k3_seterr("%s: field \"%s\" must be an integer", L, key);
    if (get_int(o, key, 0, &c->max_position_embeddings, L)) return -1;
    return in_range(c->max_position_embeddings, 1, 1 << 30, key, L);
}

static int refuse_unsupported(json_t *tc, const char *L) {
    if (want_string(tc, "hidden_act", "situ", L)) return -1;
    if (want_string(tc, "moe_router_activation_func", "sigmoid", L)) return -1;
    json_t *v = json_object_get(tc, "mla_use_nope");
    if (v && !json_is_true(v))
        return k3_seterr("%s: field \"mla_use_nope\" must be true (only NoPE MLA is supported)", L);
    return 0;
}

/* A list of 1-based layer numbers into flags[num_hidden_layers]. Numbers past
 * the last layer may only name the MTP layers num_nextn_predict_layers
 * declares (which k3 does not run, so they are ignored); any other number is
 * not a layer of this model and is refused. */
static int layer_list(json_t *kl, const char *field, k3_config *c, uint8_t *flags, const char *L) {
    if (!json_is_array(kl))
        return k3_seterr("%s: field \"linear_attn_config.%s\" must be a list", L, field);
    for (size_t i = 0; i < json_array_size(kl); i++) {
        json_t *e = json_array_get(kl, i);
        json_int_t l = json_is_integer(e) ? json_integer_value(e) : 0;
        if (!json_is_integer(e) || l < 1)
            return k3_seterr("%s: linear_attn_config.%s[%zu] is not a 1-based layer number", L,
                             field, i);
        if (l > c->num_hidden_layers + c->num_nextn_predict_layers)
            return k3_seterr("%s: linear_attn_config.%s[%zu] = %lld names no layer of the model "
                             "(num_hidden_layers %d, num_nextn_predict_layers %d)",
                             L, field, i, (long long)l, c->num_hidden_layers,
                             c->num_nextn_predict_layers);
        if (l <= c->num_hidden_layers) flags[l - 1] = 1;
    }
    return 0;
}

/* kda_layers gives the layer kinds; full_attn_layers, when present, must say the
 * same: every layer in exactly one of the two lists. */
static int parse_kda_layers(json_t *lac, k3_config *c, const char *L) {
    c->is_kda = k3_xcalloc((size_t)c->num_hidden_layers, 1);
    if (layer_list(json_object_get(lac, "kda_layers"), "kda_layers", c, c->is_kda, L)) return -1;
    json_t *fl = json_object_get(lac, "full_attn_layers");
    if (!fl || json_is_null(fl)) return 0;
    uint8_t *full = k3_xcalloc((size_t)c->num_hidden_layers, 1);
    int rc = layer_list(fl, "full_attn_layers", c, full, L);
    for (int i = 0; !rc && i < c->num_hidden_layers; i++)
        if (full[i] == c->is_kda[i])
            rc = k3_seterr("%s: layer %d is %s kda_layers and full_attn_layers "
                           "(linear_attn_config): each layer must be in exactly one",
                           L, i + 1, full[i] ? "in both" : "in neither of");
    free(full);
    return rc;
}

static int parse_linear_attn(json_t *tc, k3_config *c, const char *L) {
    json_t *lac = json_object_get(tc, "linear_attn_config");
    if (!json_is_object(lac))
        return k3_seterr("%s: field \"linear_attn_config\" is missing (needed for the KDA "
                         "layer list)",
                         L);
    int rc = 0;
    char lab[600];
    snprintf(lab, sizeof lab, "%.500s: linear_attn_config", L);
    rc |= get_int(lac, "num_heads", 0, &c->kda_heads, lab);
    rc |= get_int(lac, "head_dim", 0, &c->kda_head_dim, lab);
    rc |= get_int(lac, "short_conv_kernel_size", 4, &c->kda_conv_kernel, lab);
    rc |= get_num(lac, "gate_lower_bound", 0.0, &c->kda_gate_lower_bound, &c->kda_has_lower_bound,
                  lab);
    rc |= get_int(lac, "use_full_rank_gate", 0, &c->kda_full_rank_gate, lab);
    if (rc) return -1;
    return parse_kda_layers(lac, c, L);
}

static int positive(int v, const char *field, const char *L) {
    if (v > 0 && v <= (1 << 24)) return 0;
    return k3_seterr("%s: field \"%s\" = %d, expected a positive size", L, field, v);
}

/* Sizes the layers actually use must be positive and consistent. */
static int check_sizes(const k3_config *c, const char *L) {
    int any_mla = 0, any_kda = 0;
    for (int i = 0; i < c->num_hidden_layers; i++) {
        any_kda |= c->is_kda[i];
        any_mla |= !c->is_kda[i];
    }
    if (positive(c->vocab_size, "vocab_size", L) || positive(c->hidden_size, "hidden_size", L) ||
        positive(c->num_hidden_layers, "num_hidden_layers", L))
        return -1;
    if (!(c->rms_norm_eps > 0 && c->rms_norm_eps < 0.1))
        return k3_seterr("%s: field \"rms_norm_eps\" = %g, expected a small positive number "
                         "(0 < eps < 0.1; K3 uses 1e-5)",
                         L, c->rms_norm_eps);
    if (c->situ_linear_beta < 0)
        return k3_seterr("%s: field \"activation_situ_linear_beta\" must be positive", L);
    if (c->attn_res_block_size < 0)
        return k3_seterr("%s: field \"attn_res_block_size\" must be positive", L);
    if (any_kda && (positive(c->kda_heads, "linear_attn_config.num_heads", L) ||
                    positive(c->kda_head_dim, "linear_attn_config.head_dim", L) ||
                    positive(c->kda_conv_kernel, "linear_attn_config.short_conv_kernel_size", L)))
        return -1;
    if (any_mla && (positive(c->num_attention_heads, "num_attention_heads", L) ||
                    positive(c->kv_lora_rank, "kv_lora_rank", L) ||
                    positive(c->qk_nope_head_dim, "qk_nope_head_dim", L) ||
                    positive(c->v_head_dim, "v_head_dim", L)))
        return -1;
    if (c->num_attention_heads > 65536 || c->kda_heads > 65536)
        return k3_seterr("%s: more than 65536 attention heads are not supported", L);
    if (any_kda && c->kda_conv_kernel > 16)
        return k3_seterr("%s: field \"linear_attn_config.short_conv_kernel_size\" = %d, at most "
                         "16 is supported",
                         L, c->kda_conv_kernel);
    if (c->qk_rope_head_dim < 0 || c->q_lora_rank < 0)
        return k3_seterr("%s: qk_rope_head_dim / q_lora_rank must not be negative", L);
    return 0;
}

static int check_moe(const k3_config *c, const char *L) {
    int any_moe = 0;
    for (int i = 0; i < c->num_hidden_layers; i++) any_moe |= k3_config_is_moe_layer(c, i);
    if (c->moe_layer_freq <= 0) return k3_seterr("%s: field \"moe_layer_freq\" must be >= 1", L);
    int any_dense = 0;
    for (int i = 0; i < c->num_hidden_layers; i++) any_dense |= !k3_config_is_moe_layer(c, i);
    if (any_dense && positive(c->intermediate_size, "intermediate_size", L)) return -1;
    if (!any_moe) return 0;
    if (c->num_experts > 65536) /* per-expert bookkeeping is allocated before the lookups */
        return k3_seterr("%s: field \"num_experts\" = %d, at most 65536 are supported", L,
                         c->num_experts);
    if (positive(c->moe_intermediate_size, "moe_intermediate_size", L)) return -1;
    if (c->num_experts_per_token < 1 || c->num_experts_per_token > c->num_experts)
        return k3_seterr("%s: field \"num_experts_per_token\" = %d, expected 1..num_experts (%d)",
                         L, c->num_experts_per_token, c->num_experts);
    if (c->num_expert_group < 1 || c->num_expert_group > 1024 ||
        c->num_experts % c->num_expert_group)
        return k3_seterr("%s: field \"num_expert_group\" = %d must divide num_experts = %d "
                         "(and be at most 1024)",
                         L, c->num_expert_group, c->num_experts);
    if (c->topk_group < 1 || c->topk_group > c->num_expert_group)
        return k3_seterr("%s: field \"topk_group\" = %d, expected 1..num_expert_group (%d)", L,
                         c->topk_group, c->num_expert_group);
    if (c->num_expert_group > 1 && c->num_experts / c->num_expert_group < 2)
        return k3_seterr("%s: grouped routing needs at least 2 experts per group", L);
    if (c->num_shared_experts < 0 || c->routed_expert_hidden_size < 0)
        return k3_seterr("%s: num_shared_experts / routed_expert_hidden_size are negative", L);
    return 0;
}

/* The MLX "quantization" object: top-level "quantization", or a top-level
 * "quantization_config" written by mlx_lm.convert (it has "bits", unlike the
 * compressed-tensors one, which is decided per tensor instead). */
static json_t *find_mlx_quant(json_t *root) {
    json_t *q = json_object_get(root, "quantization");
    if (json_is_object(q)) return q;
    q = json_object_get(root, "quantization_config");
    if (json_is_object(q) && json_object_get(q, "bits")) return q;
    return NULL;
}

/* The global entry of an MLX quantization block: bits / group_size integers,
 * mode affine or mxfp4 (per-module entries are checked when a tensor uses them). */
static int check_mlx_quant(json_t *q, const char *field, const char *L) {
    json_t *b = json_object_get(q, "bits"), *g = json_object_get(q, "group_size");
    json_t *m = json_object_get(q, "mode");
    if (b && (!json_is_integer(b) || json_integer_value(b) < 2 || json_integer_value(b) > 8))
        return k3_seterr("%s: %s.bits must be an integer 2..8", L, field);
    if (g && (!json_is_integer(g) || json_integer_value(g) < 1 || json_integer_value(g) > 4096))
        return k3_seterr("%s: %s.group_size must be a positive integer", L, field);
    if (m && (!json_is_string(m) ||
              (strcmp(json_string_value(m), "affine") && strcmp(json_string_value(m), "mxfp4"))))
        return k3_seterr("%s: %s.mode is %s%s%s; k3 supports \"affine\" and \"mxfp4\"", L, field,
                         json_is_string(m) ? "\"" : "",
                         json_is_string(m) ? json_string_value(m) : "not a string",
                         json_is_string(m) ? "\"" : "");
    return 0;
}

/* One quantization_config (top level or in text_config): MLX's (with "bits") or
 * compressed-tensors MXFP4; anything else (GPTQ, AWQ, FP8, bitsandbytes...) would
 * be loaded as garbage, so it is refused by name. */
static int check_quant_config(json_t *qc, const char *where, const char *L) {
    if (!qc || json_is_null(qc)) return 0;
    if (!json_is_object(qc)) return k3_seterr("%s: %s is not an object", L, where);
    json_t *qm = json_object_get(qc, "quant_method");
    if (!qm && json_object_get(qc, "bits")) return check_mlx_quant(qc, where, L); /* mlx_lm's */
    const char *m = json_string_value(qm);
    if (!m || strcmp(m, "compressed-tensors"))
        return k3_seterr("%s: %s.quant_method is %s%s%s, which k3 does not load (supported: "
                         "compressed-tensors MXFP4 as released, and MLX affine/mxfp4)",
                         L, where, m ? "\"" : "", m ? m : "missing or not a string", m ? "\"" : "");
    json_t *f = json_object_get(qc, "format");
    if (f && (!json_is_string(f) || strcmp(json_string_value(f), "mxfp4-pack-quantized")))
        return k3_seterr("%s: %s.format is %s%s%s; k3 loads \"mxfp4-pack-quantized\" only", L,
                         where, json_is_string(f) ? "\"" : "",
                         json_is_string(f) ? json_string_value(f) : "not a string",
                         json_is_string(f) ? "\"" : "");
    json_t *groups = json_object_get(qc, "config_groups"), *g;
    const char *gname;
    if (groups && !json_is_object(groups))
        return k3_seterr("%s: %s.config_groups is not an object", L, where);
    json_object_foreach(groups, gname, g) {
        json_t *gf = json_object_get(g, "format");
        json_t *nb = json_object_get(json_object_get(g, "weights"), "num_bits");
        if ((gf &&
             (!json_is_string(gf) || strcmp(json_string_value(gf), "mxfp4-pack-quantized"))) ||
            (nb && (!json_is_integer(nb) || json_integer_value(nb) != 4)))
            return k3_seterr("%s: %s.config_groups.%s is not 4-bit mxfp4-pack-quantized, which "
                             "is the only compressed-tensors format k3 loads",
                             L, where, gname);
    }
    return 0;
}

static int check_quant(json_t *root, json_t *tc, const char *L) {
    json_t *q = json_object_get(root, "quantization");
    if (q && !json_is_null(q) && !json_is_object(q))
        return k3_seterr("%s: \"quantization\" is not an object", L);
    if (json_is_object(q) && check_mlx_quant(q, "quantization", L)) return -1;
    if (check_quant_config(json_object_get(root, "quantization_config"), "quantization_config", L))
        return -1;
    if (tc != root && check_quant_config(json_object_get(tc, "quantization_config"),
                                         "text_config.quantization_config", L))
        return -1;
    return 0;
}

int k3_config_parse(const char *text, size_t len, const char *L, k3_config *c) {
    memset(c, 0, sizeof *c);
    json_error_t jerr;
    json_t *root = json_loadb(text, len, 0, &jerr);
    if (!root) return k3_seterr("%s: invalid JSON: %s (line %d)", L, jerr.text, jerr.line);
    int rc = 0;
    json_t *tc = json_object_get(root, "text_config");
    if (!json_is_object(root)) rc = k3_seterr("%s: not a JSON object", L);
    if (!rc && tc && !json_is_object(tc)) rc = k3_seterr("%s: \"text_config\" is not an object", L);
    if (!rc && !tc) tc = root;
    if (!rc) rc = refuse_unsupported(tc, L);
    if (!rc) rc = parse_main_fields(tc, c, L);
    if (!rc) rc = check_ranges(c, L);
    if (!rc) rc = parse_max_positions(root, tc, c, L);
    if (!rc) rc = parse_linear_attn(tc, c, L);
    if (!rc) rc = check_sizes(c, L);
    if (!rc) rc = check_moe(c, L);
    if (!rc) rc = parse_token_ids(root, tc, c, L);
    if (!rc) rc = check_quant(root, tc, L);
    if (!rc) {
        json_t *q = find_mlx_quant(root);
        if (q) c->quant = json_incref(q);
    }
    json_decref(root);
    if (rc) k3_config_free(c);
    return rc;
}

int k3_config_load(const char *path, k3_config *c) {
    size_t len;
    char *text = k3_read_regular_file(path, K3_SMALL_FILE_MAX, &len);
    if (!text) return -1;
    int rc = k3_config_parse(text, len, path, c);
    free(text);
    return rc;
}

void k3_config_free(k3_config *c) {
    free(c->is_kda);
    if (c->quant) json_decref((json_t *)c->quant);
    memset(c, 0, sizeof *c);
}

int k3_config_is_moe_layer(const k3_config *c, int i) {
    return c->num_experts > 0 && i >= c->first_k_dense_replace && c->moe_layer_freq > 0 &&
           i % c->moe_layer_freq == 0;
}

static int quant_entry(json_t *e, int *bits, int *group, const char **mode) {
    if (!json_is_object(e)) return -1;
    json_t *m = json_object_get(e, "mode");
    *mode = json_is_string(m) ? json_string_value(m) : "affine";
    int mx = !strcmp(*mode, "mxfp4");
    json_t *b = json_object_get(e, "bits"), *g = json_object_get(e, "group_size");
    *bits = json_is_integer(b) ? (int)json_integer_value(b) : 4;
    *group = json_is_integer(g) ? (int)json_integer_value(g) : (mx ? 32 : 64);
    return 0;
}

int k3_config_quant_for(const k3_config *c, const char *module, int *bits, int *group,
                        const char **mode) {
    json_t *q = (json_t *)c->quant;
    if (!q) return -1;
    char buf[512];
    snprintf(buf, sizeof buf, "language_model.%s", module);
    if (!quant_entry(json_object_get(q, buf), bits, group, mode)) return 0;
    if (!quant_entry(json_object_get(q, module), bits, group, mode)) return 0;
    return quant_entry(q, bits, group, mode);
}
