/* pcache.h — the prompt cache: sequence snapshots keyed by token prefix.
 *
 * After a request's prompt is prefilled (a turn boundary), the scheduler
 * stores a k3_seq_clone snapshot together with the prompt ids. A later
 * request whose ids extend a stored prefix (the next turn of the same
 * conversation) starts from a clone of the longest such snapshot and only
 * prefills the rest. The KDA recurrent state cannot be rewound, so a
 * snapshot is usable only when its ids are an exact prefix.
 *
 * Memory is bounded by a byte budget; the least recently used snapshots are
 * evicted first. Only the scheduler thread calls these functions; stats are
 * read under the cache's mutex from the HTTP threads. */
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
} serve_pcache_stats;

/* budget_bytes 0 disables the cache (lookups miss, inserts are dropped). */
serve_pcache *serve_pcache_new(size_t budget_bytes);
void serve_pcache_free(serve_pcache *pc);

/* A fresh clone of the longest snapshot whose ids are a prefix of
 * ids[0..n) with length < n (at least one token must still be fed to get
 * logits). *matched = its length. NULL and *matched = 0 on a miss, or -1
 * set in *matched if cloning failed (k3_errmsg). */
k3_seq *serve_pcache_lookup(serve_pcache *pc, const int32_t *ids, int64_t n, int64_t *matched);

/* Store a snapshot (a clone) of seq, which has consumed exactly ids[0..n).
 * Its cost is the bytes of its caches plus the ids. Evicts LRU
 * entries to fit; a snapshot larger than the whole budget is dropped; an
 * entry with identical ids is replaced. Returns 0, or -1 if cloning failed. */
int serve_pcache_insert(serve_pcache *pc, const int32_t *ids, int64_t n, const k3_seq *seq);

serve_pcache_stats serve_pcache_get_stats(serve_pcache *pc);

#endif
