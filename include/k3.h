/* k3.h — the public C API of k3, an inference engine for Kimi K3.
 *
 * Load a checkpoint directory (Hugging Face release layout, MLX-quantized or
 * k3's own output), create sequences (each owns its KDA recurrent state and
 * MLA latent cache), and push tokens through them to get logits:
 *
 *     k3_model *m = k3_model_load("Kimi-K3", NULL);
 *     if (!m) { fprintf(stderr, "%s\n", k3_errmsg()); exit(1); }
 *     k3_seq *s = k3_seq_new(m);
 *     float *logits = malloc(sizeof(float) * k3_model_vocab(m));
 *     k3_forward(s, prompt, n_prompt, logits, 0);    // prefill, last row only
 *     k3_forward(s, &next, 1, logits, 0);            // decode one token
 *     k3_seq_free(s); k3_model_free(m);
 *
 * Errors: functions return NULL or -1 and leave a message naming the file,
 * tensor or field in k3_errmsg() (thread-local). */
#ifndef K3_H
#define K3_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct k3_model k3_model;
typedef struct k3_seq k3_seq;

typedef struct k3_load_opts {
    int threads;  /* OpenMP threads; 0 = leave the OpenMP default */
    int progress; /* 1: progress bar on stderr while mapping/validating */
    int tp_rank;  /* tensor-parallel slice held by this process (0 of 1 = whole model) */
    int tp_size;
    int pp_rank; /* pipeline-parallel stage (0 of 1 = all layers) */
    int pp_size;
    int cache_type; /* the MLA latent cache's element: K3_CACHE_F32 (0, exact) or K3_CACHE_BF16 */
} k3_load_opts;

/* The MLA latent cache's element type (--cache-type): f32 is exact; bf16
 * halves the bytes per cached token (the reference implementation's dtype)
 * at a small, measured cost in accuracy (docs/performance.md). */
enum { K3_CACHE_F32 = 0, K3_CACHE_BF16 = 1 };
/* "f32" or "bf16" into *type; -1 + k3_errmsg naming the accepted values otherwise. */
int k3_cache_type_parse(const char *s, int *type);

/* Load a model directory. opts may be NULL (defaults). NULL + k3_errmsg() on error. */
k3_model *k3_model_load(const char *dir, const k3_load_opts *opts);
void k3_model_free(k3_model *m);

int k3_model_vocab(const k3_model *m);
/* End-of-turn token id from config.json (K3: 163586), -1 if none. */
int k3_model_eos(const k3_model *m);
/* Every end-of-sequence id of config.json (eos_token_id may be a list); returns
 * their count (0 if none) and points *ids at them. */
int k3_model_eos_ids(const k3_model *m, const int **ids);
int k3_model_bos(const k3_model *m);
/* Bytes of weights mapped by this process, and bytes read per decoded token. */
uint64_t k3_model_weight_bytes(const k3_model *m);
uint64_t k3_model_active_bytes(const k3_model *m);
/* Facts of the checkpoint that callers size things by. */
typedef struct k3_model_info {
    int64_t ctx_train;     /* config.json max_position_embeddings (0 if absent) */
    int experts;           /* routed experts per MoE layer (0: no MoE) */
    int experts_per_token; /* of which each token picks this many */
    uint64_t expert_bytes; /* bytes of one routed expert of every MoE layer held here, summed */
} k3_model_info;
void k3_model_get_info(const k3_model *m, k3_model_info *info);
/* 1: after each layer and the head, drop the mapped weight pages from this
 * process (the page cache keeps them): RSS bounded by one layer, for a
 * one-off pass over a model larger than RAM (k3 quantize's check). */
void k3_model_set_drop_pages(k3_model *m, int on);

k3_seq *k3_seq_new(k3_model *m);
void k3_seq_free(k3_seq *s);
/* Deep copy of a sequence's caches (prompt cache snapshots). */
k3_seq *k3_seq_clone(const k3_seq *s);
/* k3_seq_clone in two halves, so the copy can run on another thread: begin
 * returns the new sequence (allocated; on follower ranks already a copy, made
 * in command order), copy then fills it from s. Between the two, neither s nor
 * the new sequence may be fed or freed; other sequences may. copy runs on the
 * calling thread's OpenMP threads (omp_set_num_threads(1) there: one core). */
k3_seq *k3_seq_clone_begin(const k3_seq *s);
void k3_seq_clone_copy(k3_seq *d, const k3_seq *s);
/* A reserve of sequence state blocks (every KDA layer's state; 465 MB at
 * K3's real size), faulted in ahead of need: a fresh block costs a page fault
 * per page when a sequence or a clone first touches it. The reserve is this
 * process's memory: on follower ranks sequences fault their own. */
/* Keep as many blocks ready as fit in bytes, at most max_blocks (0: none).
 * Blocks freed by sequences are kept up to the reserve as well. */
void k3_model_state_reserve(k3_model *m, size_t bytes, int max_blocks);
/* Fault in the next 8 MiB of one more block while fewer are kept; 1 while
 * it made progress, so an idle caller can check for work between calls.
 * One thread calls it. */
int k3_model_state_refill(k3_model *m);
/* Blocks ready now, and the bytes of one block (0 without KDA layers). */
int k3_model_state_kept(k3_model *m);
size_t k3_model_state_bytes(const k3_model *m);
/* Forget every token (caches back to zero length / zero state). */
void k3_seq_reset(k3_seq *s);
/* Number of tokens the sequence has consumed. */
int64_t k3_seq_len(const k3_seq *s);
/* Bytes of memory a copy of s holds (the sequence, its KDA state and its MLA
 * caches at their capacity); with at >= 0, those of a copy at exactly `at`
 * tokens: the least any sequence of s's model at that length costs (for
 * budgets of kept copies, e.g. a prompt cache). */
size_t k3_seq_state_bytes(const k3_seq *s, int64_t at);

/* Feed n >= 1 tokens, appending them to the sequence's caches.
 * logits: NULL (caches only), or with all=1 a [n, vocab] buffer for every
 * position, with all=0 a [vocab] buffer for the last position.
 * Returns 0, or -1 with k3_errmsg() (e.g. token id out of range). */
int k3_forward(k3_seq *s, const int32_t *tokens, int64_t n, float *logits, int all);

/* One step over many sequences of the same model (continuous batching): item i
 * feeds seq[i] its n >= 1 tokens (one decode token, or a chunk of its prompt
 * of at most 512), and with logits != NULL gets the [vocab] logits of its last
 * token. All the tokens of the step go through every weight matrix together
 * (one read of the weights per step); each sequence's KDA state and MLA cache
 * see only its own tokens, so the logits equal those of k3_forward on each
 * sequence alone (to rounding). A sequence may appear once per step.
 * snap (may be NULL): a new sequence of the same model (k3_seq_new, nothing
 * fed) that after the step holds seq's state as it was after the item's
 * first snap_at tokens (0 < snap_at <= n), as if fed those alone: a prompt
 * cache's snapshot at a message end inside a chunk, without a copy and
 * without a step that stops there.
 * verify (speculative decoding): the item is a verify pass as k3_forward_spec
 * (the last token and up to 31 drafts, no snap): logits, if not NULL, is
 * [n, vocab] with every row's, and the sequence waits for k3_seq_spec_commit
 * before it is fed again. Not on pipeline-parallel models.
 * Returns 0, or -1 with k3_errmsg() (nothing consumed when the items are
 * refused: bad token, duplicate or foreign sequence, bad snap). */
typedef struct k3_batch_item {
    k3_seq *seq;
    const int32_t *tokens;
    int64_t n;
    float *logits;
    k3_seq *snap;
    int64_t snap_at;
    int verify;
} k3_batch_item;
int k3_forward_batch(k3_batch_item *items, int n);

/* Speculative decoding: a verify pass feeds n tokens (the last token and up to
 * 31 drafts) and writes logits for every row ([n, vocab]); then
 * k3_seq_spec_commit(s, keep) keeps the first keep rows (0..n) and forgets
 * the rest, leaving the sequence as if only those tokens had been fed (the
 * kept rows' state is what the pass computed for them). No other call may
 * feed s between the two. Not available on pipeline-parallel models (tensor
 * parallel: the followers run the same pass and commit).
 * 0, or -1 with k3_errmsg() (a failed pass leaves the sequence as before). */
int k3_forward_spec(k3_seq *s, const int32_t *tokens, int64_t n, float *logits);
int k3_seq_spec_commit(k3_seq *s, int64_t keep);
/* 1 if m's sequences can take verify passes (0: a pipeline-parallel model). */
int k3_model_can_speculate(const k3_model *m);

const char *k3_errmsg(void);

#ifdef __cplusplus
}
#endif
#endif
