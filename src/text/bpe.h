/* bpe.h — the rank table (token bytes <-> rank) and rank byte-pair merging
 * (chat.md §1.5.1, tiktoken's _byte_pair_merge).
 *
 * Ranks are ids 0..n-1; a hash table maps byte strings to ranks. The merge
 * has a literal scalar reference (k3_bpe_ref, O(n^2) per step, for tests)
 * and the fast k3_bpe_merge (cached pair ranks for short pieces, a binary
 * heap over a linked list for long ones) with identical results. */
#ifndef K3_TEXT_BPE_H
#define K3_TEXT_BPE_H

#include <stddef.h>
#include <stdint.h>

#include "text/ids.h"

/* One hash slot: the token's first 8 bytes inline (zero-padded), so most
 * lookups touch one cache line; longer tokens compare the rest in bytes. */
typedef struct {
    uint64_t head;
    uint32_t rank_plus1; /* 0 = empty */
    uint32_t len;
} k3_rank_slot;

typedef struct {
    uint32_t n;    /* number of ranks */
    uint32_t *off; /* n + 1 offsets into bytes: rank r = bytes[off[r]..off[r+1]) */
    uint8_t *bytes;
    k3_rank_slot *slot; /* open addressing, linear probing, load <= 1/2 */
    uint32_t mask;
    /* Direct tables for 1- and 2-byte strings (-1 = not a rank): binary or
     * unusual text is mostly 1-byte pieces, and every BPE starts by ranking
     * all adjacent byte pairs; a hash probe per lookup into the multi-MB
     * slot table is a cache miss each time on such input. */
    int32_t byte_rank[256];
    int32_t *pair_rank; /* 65536 entries, index b0 << 8 | b1 */
} k3_ranks;

/* Build from n token byte strings given in rank order (tok[r], len[r]).
 * Returns 0, or -1 + k3_errmsg if two ranks have the same bytes (*dup_a,
 * *dup_b are set to the ranks). */
int k3_ranks_build(k3_ranks *r, uint32_t n, const uint8_t *const *tok, const uint32_t *len,
                   uint32_t *dup_a, uint32_t *dup_b);
void k3_ranks_free(k3_ranks *r);
/* Rank of the byte string, -1 if it is not a token. */
int32_t k3_ranks_find(const k3_ranks *r, const uint8_t *b, size_t n);

/* BPE one piece (n >= 1; every single byte must be a rank) and append its
 * ids. Returns 0, or -1 + k3_errmsg if a byte has no rank. */
int k3_bpe_merge(const k3_ranks *r, const uint8_t *b, size_t n, k3_ids *out);
/* The literal reference algorithm, same contract. */
int k3_bpe_ref(const k3_ranks *r, const uint8_t *b, size_t n, k3_ids *out);

#endif
