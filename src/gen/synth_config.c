/* synth_config.c — the config.json of a synthetic checkpoint: the tiny,
 * bench and real-slice presets, merging the user's JSON over them, and the
 * derived ids. */
#include "gen/synth.h"

#include "base/err.h"

#include <string.h>

/* make_tiny.py: TINY (mlx-lm tests/test_models.py kimi_k3 entry) + EXTRA. */
static const char tiny_json[] =
    "{\"model_type\": \"kimi_linear\", \"vocab_size\": 1000, \"hidden_size\": 64,"
    " \"num_hidden_layers\": 4, \"num_attention_heads\": 2, \"num_key_value_heads\": 2,"
    " \"intermediate_size\": 96, \"rms_norm_eps\": 1e-05, \"hidden_act\": \"situ\","
    " \"activation_situ_beta\": 4.0, \"activation_situ_linear_beta\": 25.0,"
    " \"linear_attn_config\": {\"kda_layers\": [1, 2, 3], \"full_attn_layers\": [4],"
    " \"num_heads\": 2, \"head_dim\": 32, \"short_conv_kernel_size\": 4,"
    " \"gate_lower_bound\": -5.0, \"use_full_rank_gate\": true},"
    " \"num_experts\": 8, \"moe_intermediate_size\": 32, \"q_lora_rank\": 24,"
    " \"kv_lora_rank\": 16, \"qk_nope_head_dim\": 16, \"qk_rope_head_dim\": 8,"
    " \"v_head_dim\": 16, \"mla_use_nope\": true, \"mla_use_output_gate\": true,"
    " \"num_experts_per_token\": 2, \"num_shared_experts\": 1, \"first_k_dense_replace\": 1,"
    " \"routed_expert_hidden_size\": 32, \"latent_moe_use_norm\": true,"
    " \"attn_res_block_size\": 2,"
    " \"moe_layer_freq\": 1, \"moe_router_activation_func\": \"sigmoid\","
    " \"moe_renormalize\": true, \"routed_scaling_factor\": 1.0, \"use_grouped_topk\": true,"
    " \"num_expert_group\": 1, \"topk_group\": 1, \"tie_word_embeddings\": false,"
    " \"max_position_embeddings\": 4096, \"architectures\": [\"KimiLinearForCausalLM\"]}";

/* The differences of ../shared/bench/k3-bench-config.json (hidden 1024, 8
 * layers, 64 experts top-8, ~267M parameters) from the tiny preset. */
static const char bench_json[] =
    "{\"vocab_size\": 16384, \"hidden_size\": 1024, \"num_hidden_layers\": 8,"
    " \"num_attention_heads\": 8, \"num_key_value_heads\": 8, \"intermediate_size\": 2048,"
    " \"linear_attn_config\": {\"kda_layers\": [1, 2, 3, 5, 6, 7], \"full_attn_layers\": [4, 8],"
    " \"num_heads\": 8, \"head_dim\": 128},"
    " \"num_experts\": 64, \"moe_intermediate_size\": 256, \"q_lora_rank\": 384,"
    " \"kv_lora_rank\": 256, \"qk_nope_head_dim\": 64, \"qk_rope_head_dim\": 32,"
    " \"v_head_dim\": 64, \"num_experts_per_token\": 8, \"routed_expert_hidden_size\": 512,"
    " \"attn_res_block_size\": 4,"
    " \"bos_token_id\": 16382, \"eos_token_id\": 16383, \"pad_token_id\": 16383}";

/* ../shared/bench/k3-real-slice-config.json over the tiny preset: K3 at its
 * real per-layer shapes (hidden 7168, 96 KDA and MLA heads, dense MLP 33792,
 * latent MoE 3584 -> 3072 with 2 shared experts, vocabulary 163840), cut to
 * 4 layers (3 KDA + 1 MLA) and 64 routed experts top-16. The bos/eos/pad ids
 * are left to the derived defaults (163584 / 163586 / 163839 at this
 * vocabulary, as in the shared file), so --vocab can shrink it. */
static const char real_slice_json[] =
    "{\"vocab_size\": 163840, \"hidden_size\": 7168, \"num_hidden_layers\": 4,"
    " \"num_attention_heads\": 96, \"num_key_value_heads\": 96, \"intermediate_size\": 33792,"
    " \"linear_attn_config\": {\"kda_layers\": [1, 2, 3], \"full_attn_layers\": [4],"
    " \"num_heads\": 96, \"head_dim\": 128},"
    " \"num_experts\": 64, \"num_experts_per_token\": 16, \"num_shared_experts\": 2,"
    " \"moe_intermediate_size\": 3072, \"routed_expert_hidden_size\": 3584,"
    " \"q_lora_rank\": 1536, \"kv_lora_rank\": 512, \"qk_nope_head_dim\": 128,"
    " \"qk_rope_head_dim\": 64, \"v_head_dim\": 128, \"attn_res_block_size\": 12,"
    " \"first_k_dense_replace\": 1, \"max_position_embeddings\": 1048576}";

static json_t *parse_builtin(const char *text) {
    json_error_t e;
    json_t *j = json_loads(text, 0, &e);
    if (!j) k3_die("built-in preset JSON is invalid at %d: %s", e.position, e.text);
    return j;
}

json_t *k3_synth_tiny_text_config(void) {
    return parse_builtin(tiny_json);
}

/* dst <- src, recursing into objects both have (make_tiny.py deep_merge). */
static void deep_merge(json_t *dst, const json_t *src) {
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)src, k, v) {
        json_t *d = json_object_get(dst, k);
        if (json_is_object(v) && json_is_object(d))
            deep_merge(d, v);
        else
            json_object_set_new(dst, k, json_deep_copy(v));
    }
}

int k3_synth_block_start(int vocab_size) {
    if (vocab_size >= 163840) return 163584;
    if (vocab_size >= 512) return vocab_size - 256;
    return 256;
}

static void set_default_id(json_t *tc, const char *key, int id, int vocab) {
    if (json_object_get(tc, key)) return;
    if (id >= vocab) id = vocab - 1; /* short block (vocab < 512): clamp */
    json_object_set_new(tc, key, json_integer(id));
}

/* The overlay a user file contributes: its text_config (plus top-level ids), or itself. */
static json_t *user_overlay(const json_t *user) {
    json_t *tc = json_object_get(user, "text_config");
    if (!json_is_object(tc)) return json_deep_copy(user);
    json_t *o = json_deep_copy(tc);
    static const char *ids[] = {"bos_token_id", "eos_token_id", "pad_token_id"};
    for (int i = 0; i < 3; i++)
        if (!json_object_get(o, ids[i]) && json_object_get(user, ids[i]))
            json_object_set(o, ids[i], json_object_get(user, ids[i]));
    return o;
}

static json_t *wrap_config(json_t *tc, const k3_synth_opts *o) {
    json_t *cfg = json_pack("{s[s]ss}", "architectures", "KimiK3ForConditionalGeneration",
                            "model_type", "kimi_k3");
    static const char *copy[] = {"vocab_size", "num_hidden_layers"};
    for (int i = 0; i < 2; i++) json_object_set(cfg, copy[i], json_object_get(tc, copy[i]));
    json_object_set_new(cfg, "torch_dtype", json_string(o && o->f32 ? "float32" : "bfloat16"));
    json_t *tie = json_object_get(tc, "tie_word_embeddings");
    json_object_set_new(cfg, "tie_word_embeddings", json_boolean(json_is_true(tie)));
    static const char *ids[] = {"bos_token_id", "eos_token_id", "pad_token_id"};
    for (int i = 0; i < 3; i++) json_object_set(cfg, ids[i], json_object_get(tc, ids[i]));
    json_object_set_new(cfg, "text_config", tc);
    if (o && o->mxfp4)
        json_object_set_new(cfg, "quantization_config",
                            json_pack("{ssss}", "quant_method", "compressed-tensors", "format",
                                      "mxfp4-pack-quantized"));
    return cfg;
}

int k3_synth_preset_known(const char *preset) {
    return !preset || !strcmp(preset, "tiny") || !strcmp(preset, "bench") ||
           !strcmp(preset, "real-slice") || !strcmp(preset, "real-slice-v32k");
}

json_t *k3_synth_config(const char *preset, const json_t *user, const k3_synth_opts *o) {
    if (!k3_synth_preset_known(preset)) {
        k3_seterr("unknown preset '%s' (expected tiny, bench, real-slice or real-slice-v32k)",
                  preset);
        return NULL;
    }
    if (user && !json_is_object(user)) {
        k3_seterr("the config must be a JSON object");
        return NULL;
    }
    json_t *tc = parse_builtin(tiny_json);
    if (preset && !strcmp(preset, "bench")) {
        json_t *b = parse_builtin(bench_json);
        deep_merge(tc, b);
        json_decref(b);
    }
    if (preset && !strncmp(preset, "real-slice", 10)) {
        json_t *b = parse_builtin(real_slice_json);
        deep_merge(tc, b);
        json_decref(b);
        if (!strcmp(preset, "real-slice-v32k"))
            json_object_set_new(tc, "vocab_size", json_integer(32768));
    }
    if (user) {
        json_t *ov = user_overlay(user);
        deep_merge(tc, ov);
        json_decref(ov);
    }
    if (o && o->vocab) json_object_set_new(tc, "vocab_size", json_integer(o->vocab));
    json_t *v = json_object_get(tc, "vocab_size");
    if (!json_is_integer(v) || json_integer_value(v) < 257 || json_integer_value(v) > (1 << 24)) {
        json_decref(tc);
        k3_seterr("text_config.vocab_size: expected an integer in 257..16777216");
        return NULL;
    }
    int V = (int)json_integer_value(v), block = k3_synth_block_start(V);
    set_default_id(tc, "bos_token_id", block, V);     /* [BOS] */
    set_default_id(tc, "eos_token_id", block + 2, V); /* <|end_of_msg|> */
    set_default_id(tc, "pad_token_id", block + 255, V);
    return wrap_config(tc, o);
}
