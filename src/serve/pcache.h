/* pcache.h — the prompt cache: sequence snapshots in a trie over token prefixes.
 *
 * The scheduler stores a snapshot (a k3_seq_clone: KDA conv and recurrent
 * state, MLA latent cache) where conversations branch: after the end of the
 * system prompt and of every message of a rendered prompt, after the whole
 * prompt together with its last logits (so a byte-identical repeat prefills
 * nothing), and after a finished turn. A request starts from a clone of the
 * deepest snapshot on its prompt's path and only prefills the rest. The KDA
 * recurrent state cannot be rewound, so only exact prefixes are usable.
 *
 * Snapshots live in a radix trie (edges labelled with runs of token ids), one
 * trie per scope: the API key the client presented plus its optional
 * cache_salt. A lookup never crosses scopes, so one client cannot learn from
 * cached_tokens whether another client sent a given prompt.
 *
 * Cost: one snapshot holds every KDA layer's recurrent state (heads x dk x dv
 * floats) and conv tail, plus the MLA latents of its tokens (kv_lora_rank +
 * rope floats per token and MLA layer). At K3's real size the 69 KDA layers'
 * recurrent state alone is about 434 MB per snapshot; the budget counts that.
 * Memory is bounded by a byte budget; the least recently used snapshots are
 * evicted first. Only the scheduler thread changes the cache; stats are read
 * under its mutex from the HTTP threads. */
#ifndef K3_SERVE_PCACHE_H
#define K3_SERVE_PCACHE_H

#include <stddef.h>
#include <stdint.h>

#include "k3.h"

typedef struct serve_pcache serve_pcache;

typedef struct {
    int entries;
    size_t bytes, budget;
    uint64_t lookups, hits, evictions;
    uint64_t tokens_reused; /* prompt tokens not prefilled thanks to hits */
    uint64_t snapshots;     /* snapshots stored (clones made) */
    int scopes;             /* distinct key + salt scopes holding snapshots */
} serve_pcache_stats;

/* budget_bytes 0 disables the cache (lookups miss, inserts are dropped).
 * vocab: floats of the logits stored with whole-prompt snapshots. */
serve_pcache *serve_pcache_new(size_t budget_bytes, int vocab);
void serve_pcache_free(serve_pcache *pc);

/* A fresh clone of the deepest snapshot in scope whose ids are a prefix of
 * ids[0..n): of length < n, or exactly n when it was stored with logits (then
 * they are copied to `logits`, [vocab], and the caller feeds nothing).
 * *matched = its length. NULL and *matched = 0 on a miss, or -1 in *matched
 * if cloning failed (k3_errmsg). */
k3_seq *serve_pcache_lookup(serve_pcache *pc, const char *scope, size_t scope_len,
                            const int32_t *ids, int64_t n, float *logits, int64_t *matched);

/* Store a snapshot (a clone) of seq, which has consumed exactly ids[0..n),
 * in scope; logits (may be NULL) are those of its last token. An existing
 * snapshot of the same ids is only marked used (no clone), unless this one
 * adds logits. Evicts LRU snapshots to fit; one larger than the whole budget
 * is dropped. Returns 0, or -1 if cloning failed. */
int serve_pcache_insert(serve_pcache *pc, const char *scope, size_t scope_len, const int32_t *ids,
                        int64_t n, const k3_seq *seq, const float *logits);

/* Bytes one snapshot of seq costs (its caches at their capacity). */
size_t serve_pcache_seq_bytes(const k3_seq *seq);

serve_pcache_stats serve_pcache_get_stats(serve_pcache *pc);

#endif
