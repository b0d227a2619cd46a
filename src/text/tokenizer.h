/* tokenizer.h — the Kimi K3 tokenizer: text bytes <-> token ids (chat.md §1).
 *
 * A tokenizer is either loaded from a model directory (`tiktoken.model` ranks
 * + `tokenizer_config.json` control-token names) or built byte-level for a
 * model that ships no tokenizer files (the synthetic/built-in models).
 *
 * Vocabulary layout (both kinds):
 *   ids [0, num_base)               BPE ranks (loaded) / the 256 raw bytes
 *                                   (byte-level: id b = byte b; nothing else)
 *   ids [block, block + block_len)  the control block: every id is a special
 *                                   token, named from tokenizer_config.json
 *                                   or `<|reserved_token_<id>|>`.
 * Loaded: block = num_base (K3: 163584), block_len = 256.
 * Byte-level for a model vocab size V (see k3_tok_byte_level):
 *   V >= 163840      block = 163584 (the real K3 ids), ids 256..163583 unused
 *   512 <= V < 163840 block = V - 256 (the last 256 ids of the model)
 *   257 <= V < 512    block = 256, block_len = V - 256
 * The 16 named K3 tokens keep their K3 offsets inside the block ([BOS] +0,
 * <|end_of_msg|> +2, <|open|> +3, <|close|> +4, <|sep|> +5, ..., [PAD] +255);
 * a named token whose offset does not fit in a short block is absent
 * (k3_tok_special_id returns -1). V <= 256 is refused.
 *
 * Encoding follows the reference exactly: 400 000-code-point windows, the
 * 25 000-run whitespace split, optional special-token matching, the K3
 * pre-tokenizer pattern (PCRE2 UTF+UCP, JIT) and rank BPE.
 *
 * Thread safety: a loaded tokenizer is read-only except for an internal
 * piece cache guarded by a mutex; encode/decode may run concurrently. The
 * pre-tokenizer's PCRE2 match data and JIT stack are per thread, created
 * once and reused (pretok.h). */
#ifndef K3_TEXT_TOKENIZER_H
#define K3_TEXT_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

#include "text/ids.h"  /* k3_ids, the id list encode appends to */
#include "text/utf8.h" /* k3_utf8_sanitize, the repair k3_tok_decode applies */

typedef struct k3_tokenizer k3_tokenizer;

/* Number of ids in the K3 control block and the real K3 sizes. */
#define K3_TOK_BLOCK_LEN 256
#define K3_TOK_K3_NUM_BASE 163584
#define K3_TOK_K3_VOCAB 163840

/* Load DIR/tiktoken.model and DIR/tokenizer_config.json. NULL + k3_errmsg
 * naming the file (and line, for the ranks file) on any problem. */
k3_tokenizer *k3_tok_load(const char *model_dir);
/* Load explicit files; config_path may be NULL (all block ids reserved
 * except the K3 default names at their K3 offsets). */
k3_tokenizer *k3_tok_load_files(const char *ranks_path, const char *config_path);
/* Same from memory (fuzzing, tests). `what` names the source in errors.
 * config may be NULL (defaults as above). */
k3_tokenizer *k3_tok_from_memory(const char *ranks, size_t ranks_len, const char *config,
                                 size_t config_len, const char *what);
/* Byte-level tokenizer for a model with vocab_size ids (layout above). */
k3_tokenizer *k3_tok_byte_level(int vocab_size);
/* k3_tok_load if DIR/tiktoken.model exists, else k3_tok_byte_level(vocab_size)
 * when the checkpoint is marked byte-level (config.json "k3_tokenizer":
 * "byte-level") or k3_tok_byte_level_requested(); otherwise NULL + an error
 * naming tiktoken.model. */
k3_tokenizer *k3_tok_open(const char *model_dir, int vocab_size);
/* 1 if the user asked for the byte-level tokenizer (K3_BYTE_TOKENIZER set and
 * not "0"; the CLI's --byte-tokenizer sets it). */
int k3_tok_byte_level_requested(void);
/* For a model directory: its tokenizer files if DIR/tiktoken.model exists,
 * else byte-level for DIR/config.json's vocab_size (top level, or
 * text_config.vocab_size) under the same rule as k3_tok_open. model_dir NULL:
 * byte-level with the K3 vocab size 163840. NULL + k3_errmsg naming the file
 * on failure. */
k3_tokenizer *k3_tok_for_model(const char *model_dir);
void k3_tok_free(k3_tokenizer *tok);

/* Ids the tokenizer knows: block + block_len (K3: 163840). */
int k3_tok_vocab_size(const k3_tokenizer *tok);
/* Number of BPE ranks (byte-level: 256). */
int k3_tok_num_base(const k3_tokenizer *tok);
/* First id of the control block. */
int k3_tok_block_start(const k3_tokenizer *tok);
/* 1 if loaded from files, 0 if byte-level. */
int k3_tok_is_loaded(const k3_tokenizer *tok);

/* Encode text[0..len) and APPEND the ids to *out. allow_special: 1 = control
 * token spellings in the text become their ids (allowed_special="all"),
 * 0 = they are ordinary text. Invalid UTF-8 is kept: each maximal
 * ill-formed subsequence is a pre-token piece of its own, so
 * decode_bytes(encode(x)) == x for any bytes. Inputs of 1 MiB or more are
 * encoded slice-parallel with OpenMP (same ids). Returns 0, or -1 +
 * k3_errmsg. */
int k3_tok_encode_append(const k3_tokenizer *tok, const char *text, size_t len, int allow_special,
                         k3_ids *out);
/* Convenience: *ids is malloc'd (free()), *n its length. */
int k3_tok_encode(const k3_tokenizer *tok, const char *text, size_t len, int allow_special,
                  int32_t **ids, size_t *n);

/* Raw bytes of ids (may be invalid UTF-8), malloc'd and NUL-terminated.
 * skip_special: drop control-block ids whose `special` flag is true (HF
 * skip_special_tokens; keeps <|open|>/<|close|>/<|sep|>). Ids with no bytes
 * (out of range, byte-level gap) decode to nothing. */
char *k3_tok_decode_bytes(const k3_tokenizer *tok, const int32_t *ids, size_t n, int skip_special,
                          size_t *len);
/* As above, then invalid UTF-8 replaced like Python errors="replace" (each
 * maximal ill-formed subsequence -> U+FFFD). */
char *k3_tok_decode(const k3_tokenizer *tok, const int32_t *ids, size_t n, int skip_special,
                    size_t *len);

/* The bytes of one id (a rank's bytes or a special token's spelling); NULL
 * and *len = 0 for an id with no bytes. Not NUL-terminated in general. */
const char *k3_tok_token_bytes(const k3_tokenizer *tok, int32_t id, size_t *len);
/* Id of a control token by its exact spelling ("<|open|>"), -1 if none. */
int32_t k3_tok_special_id(const k3_tokenizer *tok, const char *spelling);
/* 1 if id is in the control block. */
int k3_tok_is_special(const k3_tokenizer *tok, int32_t id);
/* 1 if id is in the control block and its `special` flag is true. */
int k3_tok_special_flag(const k3_tokenizer *tok, int32_t id);

typedef struct {
    int32_t id;
    const char *text; /* NUL-terminated spelling */
    size_t len;
    int special_flag; /* tokenizer_config "special" (reserved ids: 1) */
} k3_special_token;
/* All control tokens in id order (block_len entries). */
const k3_special_token *k3_tok_specials(const k3_tokenizer *tok, size_t *n);

/* Streaming detokenizer: push ids (or bytes) as they are generated; each
 * call returns the text that is now final — always whole UTF-8 characters,
 * invalid bytes as U+FFFD, an incomplete trailing sequence (<= 3 bytes) held
 * back. flush returns whatever is held (an incomplete tail -> U+FFFD). The
 * returned pointer is valid until the next call on the same object. */
typedef struct k3_detok k3_detok;
k3_detok *k3_detok_new(const k3_tokenizer *tok, int skip_special);
const char *k3_detok_push(k3_detok *d, int32_t id, size_t *len);
const char *k3_detok_push_bytes(k3_detok *d, const char *bytes, size_t n, size_t *len);
const char *k3_detok_flush(k3_detok *d, size_t *len);
void k3_detok_free(k3_detok *d);

/* The 16 named K3 control tokens, by offset from the start of the 256-id
 * control block (chat.md §1.3); special_flag is tokenizer_config.json's
 * "special". The one table both the tokenizer and `k3 synth` use. */
typedef struct {
    int offset;
    const char *text;
    int special_flag;
} k3_named_token;
extern const k3_named_token k3_named_tokens[];
extern const size_t k3_num_named_tokens;

#endif
