/* qconvert.h — HF release checkpoint -> MLX-layout quantized checkpoint, streamed.
 *
 * What `k3 quantize` runs. The input (HF release layout, bf16/f16/f32 with
 * optional compressed-tensors MXFP4 experts) is renamed as mlx-lm's sanitize
 * does (spec §4.2.1: language_model. prefix kept, block_sparse_moe -> mlp,
 * stacked switch_mlp experts, fused qkv_proj / qkv_conv, embed_q / unembed_out,
 * A_log sliced, *_res_proj) and every Linear whose input dimension the group
 * size divides is quantized (spec §4.2.2: weight u32 codes, scales, biases).
 * *_res_proj is never quantized; routers (*.mlp.gate) keep their source dtype
 * unless quant_router (then 8-bit group 64). Everything that is not a Linear
 * keeps its dtype. config.json gets a "quantization" (and identical
 * "quantization_config") block: the global triple plus one entry per
 * quantized module; tokenizer and other side files are copied.
 *
 * Memory: the output is planned first (every tensor's shape, the shards and
 * their headers, see io/st_stream.h), then produced a few rows at a time and
 * written at its final offset: a stacked expert tensor [E, rows, cols] is
 * built expert by expert, and each input range is dropped from the mapping
 * once consumed, so peak memory is a few matrices whatever the model size.
 *
 * Output directory: refused if it exists and is not empty, unless force
 * (its shards, index and manifest are removed first) or resume (the shards a
 * previous run of the same plan finished and that still verify are kept).
 *
 * Recipes: uniform = every Linear at bits; mixed = routed experts at bits,
 * embed_tokens / lm_head at 6 bits, every other Linear at max(bits, 4).
 *
 * Check (quant/qverify.c), after every conversion and alone with check_only:
 * the output is re-planned from the input and read back with pread (nothing
 * of it is mapped, so memory stays bounded): every shard has the planned size
 * and header bytes; every tensor the plan declares is compared with the input
 * on sampled rows: per Linear its first and last row, one row per expert of
 * a stacked expert tensor, and 6 more rows chosen by a fixed hash, each
 * rebuilt from the input and re-quantized, must equal the stored codes,
 * scales and biases byte for byte (the quantizers are deterministic, so a
 * wrong row, transform, offset or recipe shows up as a difference); raw copies
 * are compared at their start, middle and end; small f32 vectors in full.
 * check_only also re-reads every shard and compares its SHA-256, and each
 * tensor's, with OUT/k3-manifest.json (a changed byte anywhere is found and
 * its tensor named). This is integrity against the manifest: whoever can
 * rewrite the shards can rewrite the manifest too.
 *
 * Test hook: K3_QCONV_FAULT=module makes the conversion flip one bit of that
 * module's first code word as written (a conversion bug the digests cannot
 * see: the check must report the module). */
#ifndef K3_IO_QCONVERT_H
#define K3_IO_QCONVERT_H

#include <stdint.h>

typedef struct k3_qconv_opts {
    const char *in, *out;
    int bits, group;      /* affine bits 2..8 (not 7), group 32/64/128 */
    int mxfp4;            /* MLX mxfp4 mode instead of affine */
    int keep_mxfp4;       /* copy MXFP4 routed experts unchanged */
    int mixed;            /* the mixed recipe */
    int quant_router;     /* routers 8-bit group 64 instead of their source dtype */
    uint64_t shard_bytes; /* 0 = one shard */
    int force, resume;
    int check_only; /* only check an existing out against in (with SHA-256 digests) */
    int progress;   /* progress bar on stderr (per-shard lines are always printed) */
} k3_qconv_opts;

/* Summary of a finished conversion. */
typedef struct k3_qconv_stats {
    int nshards, kept;        /* shards written in total / kept from an earlier run */
    uint64_t out_bytes;       /* tensor data bytes of the output */
    uint64_t router_bytes;    /* bytes the routers take in the output */
    uint64_t router_q8_bytes; /* what they would take at 8-bit group 64 */
    int64_t tensors_checked;  /* by the check: output tensors compared with the input */
    int64_t rows_checked;     /* Linear rows re-quantized and compared */
    uint64_t bytes_checked;   /* output bytes compared */
} k3_qconv_stats;

/* Convert o->in into o->out. 0, or -1 + k3_errmsg(). */
int k3_qconvert(const k3_qconv_opts *o, k3_qconv_stats *stats);

#endif
