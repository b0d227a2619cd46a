/* bpe.c — rank table and rank BPE (see bpe.h). */
#include "text/bpe.h"

#include "base/err.h"
#include "base/mem.h"

#include <stdlib.h>
#include <string.h>

/* The first min(n, 8) bytes as a zero-padded word. */
static uint64_t head_word(const uint8_t *p, size_t n) {
    uint64_t w = 0;
    memcpy(&w, p, n < 8 ? n : 8);
    return w;
}

/* A multiply-xorshift hash over 8-byte words; token strings are short. */
static uint64_t hash_bytes(const uint8_t *p, size_t n, uint64_t head) {
    uint64_t h = (0x9E3779B97F4A7C15ull ^ (uint64_t)n ^ head) * 0xff51afd7ed558ccdull;
    h ^= h >> 32;
    for (size_t i = 8; i < n; i += 8) {
        uint64_t w = 0;
        memcpy(&w, p + i, n - i < 8 ? n - i : 8);
        h = (h ^ w) * 0xc4ceb9fe1a85ec53ull;
        h ^= h >> 29;
    }
    return h;
}

static int slot_matches(const k3_ranks *r, const k3_rank_slot *s, const uint8_t *b, size_t n,
                        uint64_t head) {
    if (s->len != n || s->head != head) return 0;
    return n <= 8 || !memcmp(r->bytes + r->off[s->rank_plus1 - 1] + 8, b + 8, n - 8);
}

int32_t k3_ranks_find(const k3_ranks *r, const uint8_t *b, size_t n) {
    if (n == 1) return r->byte_rank[b[0]];
    if (n == 2) return r->pair_rank[(size_t)b[0] << 8 | b[1]];
    uint64_t head = head_word(b, n);
    for (uint64_t i = hash_bytes(b, n, head);; i++) {
        const k3_rank_slot *s = &r->slot[i & r->mask];
        if (!s->rank_plus1) return -1;
        if (slot_matches(r, s, b, n, head)) return (int32_t)(s->rank_plus1 - 1);
    }
}

int k3_ranks_build(k3_ranks *r, uint32_t n, const uint8_t *const *tok, const uint32_t *len,
                   uint32_t *dup_a, uint32_t *dup_b) {
    memset(r, 0, sizeof *r);
    size_t total = 0;
    for (uint32_t i = 0; i < n; i++) total += len[i];
    r->n = n;
    r->off = k3_xmalloc(sizeof(uint32_t) * ((size_t)n + 1));
    r->bytes = k3_xmalloc(total ? total : 1);
    size_t pos = 0;
    for (uint32_t i = 0; i < n; i++) {
        r->off[i] = (uint32_t)pos;
        memcpy(r->bytes + pos, tok[i], len[i]);
        pos += len[i];
    }
    r->off[n] = (uint32_t)pos;
    uint32_t cap = 16;
    while (cap < 2 * (uint64_t)n) cap *= 2; /* load factor <= 1/2 */
    r->mask = cap - 1;
    r->slot = k3_xcalloc(cap, sizeof *r->slot);
    for (int c = 0; c < 256; c++) r->byte_rank[c] = -1;
    r->pair_rank = k3_xmalloc(65536 * sizeof *r->pair_rank);
    for (size_t c = 0; c < 65536; c++) r->pair_rank[c] = -1;
    for (uint32_t i = 0; i < n; i++) {
        const uint8_t *b = r->bytes + r->off[i];
        uint64_t head = head_word(b, len[i]);
        for (uint64_t h = hash_bytes(b, len[i], head);; h++) {
            k3_rank_slot *s = &r->slot[h & r->mask];
            if (!s->rank_plus1) {
                *s = (k3_rank_slot){head, i + 1, len[i]};
                if (len[i] == 1) r->byte_rank[b[0]] = (int32_t)i;
                if (len[i] == 2) r->pair_rank[(size_t)b[0] << 8 | b[1]] = (int32_t)i;
                break;
            }
            if (slot_matches(r, s, b, len[i], head)) {
                *dup_a = s->rank_plus1 - 1;
                *dup_b = i;
                k3_ranks_free(r);
                return k3_seterr("ranks %u and %u have the same token bytes", *dup_a, *dup_b);
            }
        }
    }
    return 0;
}

void k3_ranks_free(k3_ranks *r) {
    free(r->pair_rank);
    free(r->off);
    free(r->bytes);
    free(r->slot);
    memset(r, 0, sizeof *r);
}

#define NO_RANK UINT32_MAX

static uint32_t span_rank(const k3_ranks *r, const uint8_t *b, size_t from, size_t to) {
    int32_t k = k3_ranks_find(r, b + from, to - from);
    return k < 0 ? NO_RANK : (uint32_t)k;
}

/* Append the ranks of the final parts; parts[i] starts at start[i]. */
static int emit_parts(const k3_ranks *r, const uint8_t *b, const size_t *start, size_t nparts,
                      size_t n, k3_ids *out) {
    for (size_t i = 0; i < nparts; i++) {
        size_t end = i + 1 < nparts ? start[i + 1] : n;
        uint32_t k = span_rank(r, b, start[i], end);
        if (k == NO_RANK) return k3_seterr("byte 0x%02x has no rank", b[start[i]]);
        k3_ids_push(out, (int32_t)k);
    }
    return 0;
}

int k3_bpe_ref(const k3_ranks *r, const uint8_t *b, size_t n, k3_ids *out) {
    size_t *start = k3_xmalloc(sizeof(size_t) * (n + 1));
    size_t np = n;
    for (size_t i = 0; i < n; i++) start[i] = i;
    for (;;) {
        uint32_t best = NO_RANK;
        size_t bi = 0;
        for (size_t i = 0; i + 1 < np; i++) {
            size_t end = i + 2 < np ? start[i + 2] : n;
            uint32_t k = span_rank(r, b, start[i], end);
            if (k < best) best = k, bi = i; /* strict <: leftmost wins ties */
        }
        if (best == NO_RANK) break;
        memmove(start + bi + 1, start + bi + 2, sizeof(size_t) * (np - bi - 2));
        np--;
    }
    int rc = emit_parts(r, b, start, np, n, out);
    free(start);
    return rc;
}

/* Short pieces: tiktoken's variant — one rank per adjacent pair, cached,
 * and only the two neighbours of a merge are re-ranked. O(n * merges) with
 * tiny constants; best below a few dozen bytes. */
static int bpe_short(const k3_ranks *r, const uint8_t *b, size_t n, k3_ids *out) {
    size_t start_buf[72];
    uint32_t rank_buf[72];
    size_t np = n;
    for (size_t i = 0; i < n; i++) start_buf[i] = i;
    start_buf[n] = n;
    /* rank_buf[i] = rank of parts i and i+1 merged */
    for (size_t i = 0; i + 1 < np; i++) rank_buf[i] = span_rank(r, b, i, i + 2);
    for (;;) {
        uint32_t best = NO_RANK;
        size_t bi = 0;
        for (size_t i = 0; i + 1 < np; i++)
            if (rank_buf[i] < best) best = rank_buf[i], bi = i;
        if (best == NO_RANK) break;
        memmove(start_buf + bi + 1, start_buf + bi + 2, sizeof(size_t) * (np - bi - 1));
        memmove(rank_buf + bi + 1, rank_buf + bi + 2,
                sizeof(uint32_t) * (np >= bi + 3 ? np - bi - 3 : 0));
        np--;
        if (bi + 1 < np) rank_buf[bi] = span_rank(r, b, start_buf[bi], start_buf[bi + 2]);
        if (bi > 0) rank_buf[bi - 1] = span_rank(r, b, start_buf[bi - 1], start_buf[bi + 1]);
    }
    return emit_parts(r, b, start_buf, np, n, out);
}

/* Long pieces: parts form a linked list; every adjacent pair sits in a
 * min-heap keyed (rank, start offset). Stale entries (a part that has since
 * merged or whose right neighbour changed) are skipped when popped, so the
 * popped pair is always the leftmost lowest-rank pair — the reference's
 * choice — and a merge costs O(log n). */
typedef struct {
    uint32_t rank;
    uint32_t pos;
} heap_ent;

static int ent_less(heap_ent a, heap_ent b) {
    return a.rank < b.rank || (a.rank == b.rank && a.pos < b.pos);
}

static void heap_push(heap_ent *h, size_t *n, heap_ent e) {
    size_t i = (*n)++;
    while (i > 0 && ent_less(e, h[(i - 1) / 2])) {
        h[i] = h[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h[i] = e;
}

static heap_ent heap_pop(heap_ent *h, size_t *n) {
    heap_ent top = h[0], last = h[--(*n)];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= *n) break;
        if (c + 1 < *n && ent_less(h[c + 1], h[c])) c++;
        if (!ent_less(h[c], last)) break;
        h[i] = h[c];
        i = c;
    }
    if (*n) h[i] = last;
    return top;
}

typedef struct {
    uint32_t *next, *prev, *pair_rank; /* per part, indexed by its start byte */
    uint8_t *alive;
    heap_ent *heap;
    size_t nheap;
} merge_state;

/* Re-rank the pair starting at part i and queue it. */
static void rank_pair(const k3_ranks *r, const uint8_t *b, size_t n, merge_state *m, uint32_t i) {
    uint32_t j = m->next[i];
    if (j >= n) {
        m->pair_rank[i] = NO_RANK;
        return;
    }
    uint32_t end = m->next[j];
    m->pair_rank[i] = span_rank(r, b, i, end);
    if (m->pair_rank[i] != NO_RANK) heap_push(m->heap, &m->nheap, (heap_ent){m->pair_rank[i], i});
}

static int bpe_heap(const k3_ranks *r, const uint8_t *b, size_t n, k3_ids *out) {
    merge_state m;
    m.next = k3_xmalloc(sizeof(uint32_t) * n);
    m.prev = k3_xmalloc(sizeof(uint32_t) * n);
    m.pair_rank = k3_xmalloc(sizeof(uint32_t) * n);
    m.alive = k3_xmalloc(n);
    m.heap = k3_xmalloc(sizeof(heap_ent) * 3 * n); /* n initial + <= 2 pushes per merge */
    m.nheap = 0;
    for (uint32_t i = 0; i < n; i++) {
        m.next[i] = i + 1; /* n = end of list */
        m.prev[i] = i ? i - 1 : UINT32_MAX;
        m.alive[i] = 1;
    }
    for (uint32_t i = 0; i < n; i++) rank_pair(r, b, n, &m, i);
    while (m.nheap) {
        heap_ent e = heap_pop(m.heap, &m.nheap);
        if (!m.alive[e.pos] || m.pair_rank[e.pos] != e.rank) continue;
        uint32_t i = e.pos, j = m.next[i];
        m.alive[j] = 0;
        m.next[i] = m.next[j];
        if (m.next[j] < n) m.prev[m.next[j]] = i;
        rank_pair(r, b, n, &m, i);
        if (m.prev[i] != UINT32_MAX) rank_pair(r, b, n, &m, m.prev[i]);
    }
    size_t *start = k3_xmalloc(sizeof(size_t) * n);
    size_t np = 0;
    for (uint32_t i = 0; i < n; i = m.next[i]) start[np++] = i;
    int rc = emit_parts(r, b, start, np, n, out);
    free(start);
    free(m.next);
    free(m.prev);
    free(m.pair_rank);
    free(m.alive);
    free(m.heap);
    return rc;
}

#define SHORT_PIECE 64

int k3_bpe_merge(const k3_ranks *r, const uint8_t *b, size_t n, k3_ids *out) {
    if (n == 0) return 0;
    if (n <= SHORT_PIECE) return bpe_short(r, b, n, out);
    return bpe_heap(r, b, n, out);
}
