/* checkpoint.h — a checkpoint directory as typed weights: name mapping + k3_wmat views.
 *
 * Knows both layouts the engine loads:
 *   HF release   language_model. prefix (optional), block_sparse_moe.*,
 *                experts.N.w1/w2/w3 (bf16/f32 or compressed-tensors MXFP4
 *                weight_packed + weight_scale), q/k/v_proj + q/k/v_conv1d [C,1,K],
 *                kv_b_proj, *_res.proj_weight or *_res_proj.weight
 *   MLX          mlp.*, fused qkv_proj / qkv_conv.conv.weight [C,K,1],
 *                embed_q / unembed_out, stacked mlp.switch_mlp.*, and MLX
 *                quantized Linears (weight u32 + scales [+ biases]) with
 *                per-module bits / group / mode from config "quantization".
 * Names passed in are MLX-style module paths without "language_model."
 * ("model.layers.3.mlp.gate"); the aliases of the HF spelling are tried too.
 * Weight views point into the mapped files; small fp32 vectors (norms, conv
 * taps, A_log, dt_bias) are converted into caller buffers. Every lookup marks
 * the tensor used so that k3_ckpt_check_unused() can report leftovers. */
#ifndef K3_QUANT_CHECKPOINT_H
#define K3_QUANT_CHECKPOINT_H

#include "io/config.h"
#include "io/safetensors.h"
#include "quant/wmat.h"

typedef struct k3_ckpt {
    char *dir;
    k3_config cfg;
    k3_st *st;
    uint8_t *used; /* [st->n] */
} k3_ckpt;

int k3_ckpt_open(const char *dir, k3_ckpt *ck);
/* The same, drawing a progress bar over the shards when progress != 0. */
int k3_ckpt_open_progress(const char *dir, int progress, k3_ckpt *ck);
void k3_ckpt_close(k3_ckpt *ck);

/* The tensor for an MLX-style name (aliases and prefix tried), NULL if absent. Marks it used. */
const k3_tensor *k3_ckpt_find(k3_ckpt *ck, const char *name);
/* 1 if a Linear module (any storage) or tensor of that name exists; does not mark. */
int k3_ckpt_has_module(k3_ckpt *ck, const char *module);

/* A Linear [rows, cols] (y = W x). Plain f32/f16/bf16 .weight, compressed-tensors
 * .weight_packed/.weight_scale (MXFP4) or MLX .weight/.scales[/.biases]. */
int k3_ckpt_linear(k3_ckpt *ck, const char *module, int64_t rows, int64_t cols, k3_wmat *out);
/* n stacked Linears [n, rows, cols] in one tensor (MLX SwitchLinear / MultiLinear). */
/* Element i of a float tensor (f32, f16 or bf16) as f32. */
float k3_tensor_f32_at(const k3_tensor *t, int64_t i);

int k3_ckpt_stacked(k3_ckpt *ck, const char *module, int64_t n, int64_t rows, int64_t cols,
                    k3_wmat *out);
/* A float vector of n elements (any shape with n elements; f32/f16/bf16) into out. */
int k3_ckpt_vec(k3_ckpt *ck, const char *name, int64_t n, float *out);
/* A_log: n_stored >= heads values; a zero tail beyond `heads` is dropped, a non-zero
 * tail is an error naming the key, the stored length and the head count. */
int k3_ckpt_alog(k3_ckpt *ck, const char *name, int heads, float *out);
/* Depthwise conv taps [C, K] from [C,1,K] (HF), [C,K,1] (MLX) or [C,K]; out is [C*K]. */
int k3_ckpt_conv(k3_ckpt *ck, const char *name, int64_t C, int K, float *out);

/* Error naming the first tensor no lookup consumed (ignoring vision/MTP tensors,
 * compressed-tensors bookkeeping and layers past num_hidden_layers). */
int k3_ckpt_check_unused(k3_ckpt *ck);

#endif
