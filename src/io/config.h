/* config.h — the Kimi K3 text configuration read from config.json.
 *
 * Accepts the release's nested layout ({"text_config": {...}}) and a flat
 * layout (text keys at the top level). Missing keys take the defaults of
 * mlx-lm's kimi_k3 TextArgs (the oracle's TEXT_DEFAULTS). Values the engine
 * does not implement (hidden_act other than situ, a non-sigmoid router,
 * mla_use_nope false...) are refused with a message naming the field. */
#ifndef K3_IO_CONFIG_H
#define K3_IO_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#define K3_CONFIG_MAX_EOS 16

typedef struct k3_config {
    int vocab_size, hidden_size, num_hidden_layers;
    int num_attention_heads, intermediate_size;
    double rms_norm_eps;
    double situ_beta;        /* activation_situ_beta (default 1.0 when null) */
    double situ_linear_beta; /* activation_situ_linear_beta; 0 = no soft clip of the up branch */
    int attn_res_block_size; /* 0 = plain pre-norm residual (no AttnRes) */
    int q_lora_rank;         /* 0 = plain q_proj */
    int kv_lora_rank, qk_nope_head_dim, qk_rope_head_dim, v_head_dim;
    int mla_use_output_gate;
    int num_experts, num_experts_per_token, num_shared_experts, moe_intermediate_size;
    int moe_renormalize;
    double routed_scaling_factor;
    int first_k_dense_replace, moe_layer_freq;
    int num_expert_group, topk_group;
    int routed_expert_hidden_size; /* 0 = experts work on the full hidden */
    int latent_moe_use_norm;
    int tie_word_embeddings;
    int max_position_embeddings;  /* the trained context; 0 when config.json has none */
    int num_nextn_predict_layers; /* MTP layers after the model's (listed, never run) */
    /* linear_attn_config */
    int kda_heads, kda_head_dim, kda_conv_kernel;
    int kda_has_lower_bound; /* gate_lower_bound present: exp(lb*sigmoid(...)) form */
    double kda_gate_lower_bound;
    int kda_full_rank_gate;
    uint8_t *is_kda; /* [num_hidden_layers]: 1 if layer i (0-based) is KDA, else MLA */
    int bos_token_id, eos_token_id; /* -1 if absent; eos_token_id is eos_ids[0] */
    int eos_ids[K3_CONFIG_MAX_EOS]; /* every end-of-sequence id: eos_token_id may be a list */
    int n_eos;
    void *quant; /* jansson object "quantization" (MLX), NULL if none */
} k3_config;

/* Parse config.json at path. 0, or -1 with k3_errmsg naming the file and field. */
int k3_config_load(const char *path, k3_config *cfg);
/* Same from a JSON text (label names it in messages; used by the fuzz target). */
int k3_config_parse(const char *text, size_t len, const char *label, k3_config *cfg);
void k3_config_free(k3_config *cfg);

int k3_config_is_moe_layer(const k3_config *c, int layer);

/* MLX quantization parameters of a module path ("model.layers.1.mlp.gate"):
 * the per-module entry if present (with or without the "language_model."
 * prefix), else the global one. mode is "affine" or "mxfp4". Returns 0 if the
 * config has quantization info, -1 if none. */
int k3_config_quant_for(const k3_config *c, const char *module, int *bits, int *group,
                        const char **mode);

#endif
