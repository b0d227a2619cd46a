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
 * under its mutex from the HTTP threads.
 *
 * The copies (hundreds of MB per snapshot at real size) are made by the
 * cache's own copier thread, so the scheduler can go on with other work
 * meanwhile: the _async calls queue the copy and hand back a ticket, and the
 * sequences involved must not be fed or freed until it is no longer pending.
 * A restore from a snapshot whose own copy is still queued is made after it
 * (one thread, FIFO). Sequences are created and freed on the caller's thread
 * only (in driver/follower mode that sends a command). */
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
    uint64_t copies;        /* sequence copies made (snapshot fills and restores) */
} serve_pcache_stats;

/* A copy queued for the copier thread: pending until it is made. */
typedef struct {
    int pending; /* read with serve_pcache_copying (under the cache's mutex) */
} serve_pcache_ticket;

/* budget_bytes 0 disables the cache (lookups miss, inserts are dropped).
 * vocab: floats of the logits stored with whole-prompt snapshots. */
serve_pcache *serve_pcache_new(size_t budget_bytes, int vocab);
void serve_pcache_free(serve_pcache *pc);

/* A fresh clone of the deepest snapshot in scope whose ids are a prefix of
 * ids[0..n): of length < n, or exactly n when it was stored with logits (then
 * they are copied to `logits`, [vocab], and the caller feeds nothing).
 * *matched = its length. NULL and *matched = 0 on a miss. Waits for the copy. */
k3_seq *serve_pcache_lookup(serve_pcache *pc, const char *scope, size_t scope_len,
                            const int32_t *ids, int64_t n, float *logits, int64_t *matched);

/* lookup without waiting: the sequence returned is filled by the copier
 * thread; it may not be fed or freed while serve_pcache_copying(pc, t). */
k3_seq *serve_pcache_lookup_async(serve_pcache *pc, const char *scope, size_t scope_len,
                                  const int32_t *ids, int64_t n, float *logits, int64_t *matched,
                                  serve_pcache_ticket *t);

/* Store a snapshot (a clone) of seq, which has consumed exactly ids[0..n),
 * in scope; logits (may be NULL) are those of its last token. An existing
 * snapshot of the same ids is only marked used (no clone), unless this one
 * adds logits. Evicts LRU snapshots to fit; one larger than the whole budget
 * is dropped. Waits for the copy. Returns 0. */
int serve_pcache_insert(serve_pcache *pc, const char *scope, size_t scope_len, const int32_t *ids,
                        int64_t n, const k3_seq *seq, const float *logits);
/* insert without waiting: returns 1 when a copy of seq was queued (then seq
 * may not be fed or freed while serve_pcache_copying(pc, t)), else 0. */
int serve_pcache_insert_async(serve_pcache *pc, const char *scope, size_t scope_len,
                              const int32_t *ids, int64_t n, const k3_seq *seq, const float *logits,
                              serve_pcache_ticket *t);
/* Store seq itself (no copy), with its last token's logits or NULL: the cache
 * owns it from now on and frees it if it keeps it not (same ids stored
 * already, unless this one adds logits, or over the budget). */
void serve_pcache_insert_take(serve_pcache *pc, const char *scope, size_t scope_len,
                              const int32_t *ids, int64_t n, k3_seq *seq, const float *logits);

/* 0 when an insert of a snapshot of a sequence of like's model at ids[0..n) in
 * scope, with logits or not, would surely be dropped: the same ids are stored
 * already (with logits, or this one has none), or it would take more than the
 * whole budget even with its caches holding exactly n tokens. Else 1. Lets a
 * caller skip building a snapshot (at K3's size ~465 MB and more) in vain. */
int serve_pcache_would_keep(serve_pcache *pc, const char *scope, size_t scope_len,
                            const int32_t *ids, int64_t n, const k3_seq *like, int with_logits);

/* 1 while the ticket's copy is not made yet. */
int serve_pcache_copying(serve_pcache *pc, const serve_pcache_ticket *t);
/* Block until the ticket's copy is made: the caller makes the copies queued
 * up to it itself, with its OpenMP threads, unless the copier has begun them. */
void serve_pcache_wait(serve_pcache *pc, const serve_pcache_ticket *t);
/* Free snapshots evicted while a copy used them, now that none does (the
 * insert and lookup calls do this too). */
void serve_pcache_reap(serve_pcache *pc);
/* Tests: with hold = 1 the copier thread starts no copy until hold = 0
 * (serve_pcache_wait still makes them). */
void serve_pcache_hold(serve_pcache *pc, int hold);

/* Bytes one snapshot of seq costs (its caches at their capacity). */
size_t serve_pcache_seq_bytes(const k3_seq *seq);

serve_pcache_stats serve_pcache_get_stats(serve_pcache *pc);

#endif
