/* synth.h — synthetic (random) Kimi K3 checkpoints in the Hugging Face release layout.
 *
 * What `k3 synth` and the built-in default model write: config.json (the
 * release's nested layout, model_type kimi_k3 + text_config), the weights as
 * safetensors (sharded with an index when larger than a shard) with exactly
 * the names, shapes and dtypes of the release (and of the oracle's
 * make_tiny.py), and a tokenizer (tiktoken.model + tokenizer_config.json).
 *
 * Init scale (as make_tiny.py, so activations stay non-degenerate through
 * the AttnRes mixes): Linears N(0, 1/in), embeddings N(0, 1), norms
 * 1 + 0.1 N(0, 1), MXFP4 experts uniform E2M1 codes with a per-group E8M0
 * scale of ~1/(2.93 sqrt(in)), A_log = log U(1, 16) with a zero tail.
 *
 * Tokenizer layout (matches k3_tok_byte_level, src/text/tokenizer.h): ids
 * 0..255 are the single bytes (id b = byte b); the control block is the
 * last 256 ids of the model vocabulary (K3 ids 163584.. when the vocabulary
 * has the K3 size), with the 16 K3 names at their K3 offsets. The ranks in
 * between are lower-case letter pairs, triples... so random text looks
 * word-like. config.json's eos_token_id is <|end_of_msg|> of that block and
 * bos_token_id [BOS], unless the given config sets them. */
#ifndef K3_GEN_SYNTH_H
#define K3_GEN_SYNTH_H

#include <jansson.h>
#include <stdint.h>

typedef struct k3_synth_opts {
    uint64_t seed;
    int f32;              /* weights in F32 (default BF16) */
    int mxfp4;            /* routed experts as compressed-tensors MXFP4 */
    uint64_t shard_bytes; /* 0: 4 GiB per shard */
    int progress;         /* 1: one line per shard on stderr */
    int64_t vocab;        /* > 0: vocab_size after the preset and the user's JSON */
} k3_synth_opts;

/* The text_config of the tiny preset (make_tiny.py TINY + EXTRA), a new reference. */
json_t *k3_synth_tiny_text_config(void);

/* 1 if preset is NULL or one of "tiny", "bench", "real-slice", "real-slice-v32k". */
int k3_synth_preset_known(const char *preset);

/* A full config.json object: preset ("tiny", "bench", "real-slice" = K3's
 * real per-layer shapes cut to 4 layers and 64 experts top-16 (the shape of
 * ../shared/bench/k3-real-slice-config.json), "real-slice-v32k" = the same
 * with a 32768-token vocabulary, or NULL = tiny) with the
 * user's JSON deep-merged over its text_config (user may be NULL; a user
 * object with "text_config" contributes that, otherwise it is taken as a flat
 * text config). bos/eos/pad ids default to the tokenizer layout above.
 * NULL + k3_errmsg (unknown preset, bad field). */
json_t *k3_synth_config(const char *preset, const json_t *user, const k3_synth_opts *o);

/* Write config.json, the weights and the tokenizer files into dir (created
 * if missing). 0, or -1 + k3_errmsg naming the field / file. */
int k3_synth_write(const char *dir, const json_t *config, const k3_synth_opts *o);

/* Only the tokenizer files for a model of vocab_size ids (>= 257). */
int k3_synth_tokenizer(const char *dir, int vocab_size);

/* First id of the control block for a model of vocab_size ids (layout above). */
int k3_synth_block_start(int vocab_size);

#endif
