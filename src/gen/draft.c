/* draft.c — n-gram drafts from the sequence's own tokens (see draft.h). */
#include "gen/draft.h"

#include "base/mem.h"

#include <stdlib.h>
#include <string.h>

/* The n-gram lengths indexed, longest first: a long match predicts a copy
 * better; a short one still catches restated names and keys. */
static const int NS[] = {6, 4, 3};
#define N_NS ((int)(sizeof NS / sizeof NS[0]))

/* Plain-decode tokens after a step that kept nothing, doubling per missed
 * probe up to BACKOFF_MAX. */
#define BACKOFF_MAX 64

typedef struct {
    uint64_t key; /* hash of the n tokens, never 0; 0 = empty slot */
    int64_t next; /* the position that followed them */
} slot;

typedef struct {
    slot *s;
    int64_t cap, used; /* cap a power of two */
} table;

struct k3_drafter {
    int32_t *tok;
    int64_t len, cap_tok;
    table t[N_NS];
    int kmax, budget, misses, backoff, pause;
    double rate; /* running share of drafted tokens kept (weight 1/4 on the latest step) */
    int64_t probes;
};

static uint64_t mix(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Hash of tok[at..at+n), never 0. */
static uint64_t gram_key(const int32_t *tok, int64_t at, int n) {
    uint64_t h = 0x9E3779B97F4A7C15ull * (uint64_t)n;
    for (int i = 0; i < n; i++) h = mix(h ^ (uint32_t)tok[at + i]);
    return h | 1;
}

static void table_grow(table *t, k3_drafter *d);

/* key -> next, in at most K3_DRAFT_PROBES probes; a full neighbourhood
 * gives its first slot to the newer n-gram. */
static void table_put(table *t, k3_drafter *d, uint64_t key, int64_t next) {
    if (2 * (t->used + 1) > t->cap) table_grow(t, d);
    int64_t mask = t->cap - 1, home = (int64_t)(key & (uint64_t)mask);
    for (int i = 0; i < K3_DRAFT_PROBES; i++) {
        slot *s = &t->s[(home + i) & mask];
        d->probes++;
        if (s->key == key || !s->key) {
            t->used += !s->key;
            *s = (slot){key, next};
            return;
        }
    }
    t->s[home] = (slot){key, next};
}

static void table_grow(table *t, k3_drafter *d) {
    table old = *t;
    t->cap = old.cap ? 2 * old.cap : 1024;
    t->s = k3_xcalloc((size_t)t->cap, sizeof *t->s);
    t->used = 0;
    for (int64_t i = 0; i < old.cap; i++)
        if (old.s[i].key) table_put(t, d, old.s[i].key, old.s[i].next);
    free(old.s);
}

/* The position recorded for key, or -1. */
static int64_t table_get(const table *t, k3_drafter *d, uint64_t key) {
    if (!t->cap) return -1;
    int64_t mask = t->cap - 1, home = (int64_t)(key & (uint64_t)mask);
    for (int i = 0; i < K3_DRAFT_PROBES; i++) {
        const slot *s = &t->s[(home + i) & mask];
        d->probes++;
        if (s->key == key) return s->next;
        if (!s->key) return -1;
    }
    return -1;
}

k3_drafter *k3_drafter_new(int kmax) {
    k3_drafter *d = k3_xcalloc(1, sizeof *d);
    d->kmax = kmax < 1 ? 1 : kmax > K3_DRAFT_MAX ? K3_DRAFT_MAX : kmax;
    d->budget = d->kmax < 4 ? d->kmax : 4;
    d->backoff = 2;
    d->rate = 1;
    return d;
}

void k3_drafter_free(k3_drafter *d) {
    if (!d) return;
    for (int i = 0; i < N_NS; i++) free(d->t[i].s);
    free(d->tok);
    free(d);
}

void k3_drafter_push(k3_drafter *d, int32_t id) {
    if (d->len == d->cap_tok) {
        d->cap_tok = d->cap_tok ? 2 * d->cap_tok : 256;
        d->tok = k3_xrealloc(d->tok, sizeof *d->tok * (size_t)d->cap_tok);
    }
    int64_t i = d->len++;
    d->tok[i] = id;
    for (int k = 0; k < N_NS; k++) /* the n-gram before i was followed by position i */
        if (i >= NS[k]) table_put(&d->t[k], d, gram_key(d->tok, i - NS[k], NS[k]), i);
}

/* Where the longest indexed suffix of the tokens occurred before (the
 * position after it), or -1. A hash collision is caught by comparing. */
static int64_t find_match(k3_drafter *d) {
    for (int k = 0; k < N_NS; k++) {
        int n = NS[k];
        if (d->len < n + 1) continue;
        int64_t p = table_get(&d->t[k], d, gram_key(d->tok, d->len - n, n));
        if (p >= n && p < d->len &&
            !memcmp(d->tok + p - n, d->tok + d->len - n, sizeof *d->tok * (size_t)n))
            return p;
    }
    return -1;
}

int k3_drafter_propose(k3_drafter *d, int32_t *out) {
    if (d->pause > 0) {
        d->pause--;
        return 0;
    }
    int64_t p = find_match(d);
    if (p < 0) return 0;
    int64_t period = d->len - p; /* a copy that reaches the present repeats itself */
    for (int j = 0; j < d->budget; j++) out[j] = p + j < d->len ? d->tok[p + j] : out[j - period];
    return d->budget;
}

/* A verify step costs more than a plain one (at least a third more on the
 * presets measured, bench/RESULTS.md), so drafts that are kept less than
 * half the time lose: below that share the drafter pauses like after misses. */
#define KEEP_RATE_MIN 0.5

void k3_drafter_result(k3_drafter *d, int drafted, int accepted) {
    if (drafted <= 0) return;
    d->rate = 0.75 * d->rate + 0.25 * (double)accepted / drafted;
    if (accepted > 0) d->misses = 0;
    if (accepted == drafted) {
        d->backoff = 2;
        d->budget = 2 * d->budget < d->kmax ? 2 * d->budget : d->kmax;
        return;
    }
    d->budget = accepted + 1 < d->kmax ? accepted + 1 : d->kmax;
    if (accepted ? d->rate >= KEEP_RATE_MIN : ++d->misses < 1) return;
    d->pause = d->backoff; /* missing: decode plainly, then probe with one draft */
    d->backoff = 2 * d->backoff < BACKOFF_MAX ? 2 * d->backoff : BACKOFF_MAX;
    d->rate = KEEP_RATE_MIN; /* the probe after the pause starts from the threshold */
}

k3_drafter_counts k3_drafter_count(const k3_drafter *d) {
    k3_drafter_counts c = {.tokens = d->len, .probes = d->probes};
    c.bytes = sizeof *d + sizeof *d->tok * (size_t)d->cap_tok;
    for (int k = 0; k < N_NS; k++) {
        c.entries += d->t[k].used;
        c.bytes += sizeof(slot) * (size_t)d->t[k].cap;
    }
    return c;
}
