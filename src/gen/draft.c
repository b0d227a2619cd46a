/* draft.c — n-gram drafts from the sequence's own tokens (see draft.h). */
#include "gen/draft.h"

#include "base/mem.h"

#include <stdlib.h>
#include <string.h>

/* The n-gram lengths indexed, longest first: a long match predicts a copy
 * better; a short one still catches restated names and keys. */
static const int NS[] = {6, 4, 3};
#define N_NS ((int)(sizeof NS / sizeof NS[0]))

/* The chance that a draft is kept is estimated per bucket of the match
 * behind it (the tokens before it that agree with the copy's source, the
 * drafts before it counted as kept): a long copy in progress is kept far
 * more often than a fresh 3-gram match in prose. Each bucket counts its
 * outcomes with weight DECAY on the older ones (about the last 16), from a
 * prior of PRIOR_N outcomes at prior_keep[class][b]. The priors decide the
 * first steps of each copy, before the bucket has outcomes: on the replays
 * (bench/replay, every candidate scored) drafts behind 8-15 tokens were
 * kept 82-88% of the time, behind 16-31 95-98%, behind 32 and more 99%,
 * so a copy that has agreed that long is trusted from its start. */
#define BUCKETS 8
#define DECAY (15.0 / 16)
#define PRIOR_N 2.0
static const int bucket_min[BUCKETS] = {0, 4, 6, 8, 12, 16, 32, 64};

/* A second feature splits each bucket in three: the other earlier places
 * that matched (of the n-gram's last K3_DRAFT_CHAIN occurrences) and still
 * agree with the copy up to the draft either all go on with the draft's
 * token (AGREE), or some do not (SPLIT), or there are none (ONE: a single
 * place, or a copy in progress). On the replays (bench/replay, the first
 * draft behind matches under 8 tokens) SPLIT drafts were kept 20-40% of
 * the time, AGREE ones 80-86%, ONE 60%. */
enum { ONE, AGREE, SPLIT, CLASSES };
static const double prior_keep[CLASSES][BUCKETS] = {
    {0.5, 0.6, 0.65, 0.8, 0.85, 0.92, 0.95, 0.97},
    {0.8, 0.85, 0.85, 0.9, 0.9, 0.95, 0.97, 0.98},
    {0.2, 0.25, 0.3, 0.4, 0.5, 0.6, 0.7, 0.7},
};

/* A long copy that breaks off may go on after a few tokens that differ (a
 * newline quoted as \n, a renamed word): RESYNC_AGE tokens after the break,
 * a token equal to one of the next RESYNC_SKIP + 1 the copy expected resumes
 * it, as a match of RESYNC_RUN tokens (below a copy that agrees longer, so a
 * resync that proves wrong breaks off short and is not held again). What
 * was written instead of the skipped tokens is learned (the last SUBS such
 * substitutions): drafts from a copy apply it, and a copy that breaks and
 * resumes by a substitution seen before keeps its length. */
#define HELD_RUN 16
#define RESYNC_AGE 4
#define RESYNC_SKIP 3
#define RESYNC_RUN 8
#define SUBS 4

/* The copy wrote to[0..nto) where its source had from[0..nfrom). */
typedef struct {
    int32_t from[RESYNC_SKIP], to[RESYNC_AGE + 1];
    int nfrom, nto, seen;
} subst;

#define CHAIN K3_DRAFT_CHAIN
#define MATCH_MAX K3_DRAFT_MATCH_MAX

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
    int64_t *prev[N_NS]; /* prev[k][i]: the earlier position that followed the n-gram before i */
    int64_t cur;         /* a copy in progress: tok[cur - run, cur) ends the sequence; -1 none */
    int run;
    int64_t held;     /* where a long copy broke off (the token it expected), while it may resume */
    int64_t broke_at; /* the position of the first token that differed */
    int held_age, held_run;
    subst sub[SUBS];
    int nsub, sub_next;
    int kmax;
    double cost[K3_DRAFT_MAX + 1]; /* cost[k]: a verify step of k drafts over a plain step */
    double kept[CLASSES][BUCKETS], seen[CLASSES][BUCKETS]; /* decayed outcomes of drafts */
    int32_t shadow[K3_DRAFT_MAX];       /* the last candidates, scored as the tokens come */
    uint8_t shadow_class[K3_DRAFT_MAX]; /* each one's class */
    int nshadow, shadow_at, shadow_run; /* how many, the next to score, the match behind [0] */
    int64_t occ[CHAIN];                 /* the places the last lookup matched */
    int nocc;
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
 * gives its first slot to the newer n-gram. Returns the position key had
 * before, or -1. */
static int64_t table_put(table *t, k3_drafter *d, uint64_t key, int64_t next) {
    if (2 * (t->used + 1) > t->cap) table_grow(t, d);
    int64_t mask = t->cap - 1, home = (int64_t)(key & (uint64_t)mask);
    for (int i = 0; i < K3_DRAFT_PROBES; i++) {
        slot *s = &t->s[(home + i) & mask];
        d->probes++;
        if (s->key == key || !s->key) {
            int64_t before = s->key ? s->next : -1;
            t->used += !s->key;
            *s = (slot){key, next};
            return before;
        }
    }
    t->s[home] = (slot){key, next};
    return -1;
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
    k3_drafter_set_cost(d, NULL);
    d->cur = d->held = -1;
    return d;
}

void k3_drafter_free(k3_drafter *d) {
    if (!d) return;
    for (int i = 0; i < N_NS; i++) free(d->t[i].s), free(d->prev[i]);
    free(d->tok);
    free(d);
}

/* Learn that tok[to, to_end) was written for tok[from, from + nfrom);
 * 1 if that substitution was known. */
static int learn(k3_drafter *d, int64_t from, int nfrom, int64_t to, int64_t to_end) {
    int nto = (int)(to_end - to);
    if (nfrom < 1 || nto < 1 || nto > RESYNC_AGE + 1) return 0;
    for (int i = 0; i < d->nsub; i++) {
        const subst *s = &d->sub[i];
        if (s->nfrom == nfrom && s->nto == nto &&
            !memcmp(s->from, d->tok + from, sizeof *s->from * (size_t)nfrom) &&
            !memcmp(s->to, d->tok + to, sizeof *s->to * (size_t)nto))
            return ++d->sub[i].seen;
    }
    subst *s = &d->sub[d->sub_next];
    d->sub_next = (d->sub_next + 1) % SUBS;
    d->nsub += d->nsub < SUBS;
    s->nfrom = nfrom, s->nto = nto, s->seen = 1;
    memcpy(s->from, d->tok + from, sizeof *s->from * (size_t)nfrom);
    memcpy(s->to, d->tok + to, sizeof *s->to * (size_t)nto);
    return 0;
}

/* The copy in progress after id is appended at d->len - 1. */
static void follow(k3_drafter *d, int32_t id) {
    int64_t at = d->len - 1;
    if (d->cur >= 0 && d->tok[d->cur] == id) { /* the copy goes on */
        d->cur++, d->run += d->run < MATCH_MAX;
        return;
    }
    if (d->cur >= 0 && d->run >= HELD_RUN)
        d->held = d->cur, d->held_age = 0, d->held_run = d->run, d->broke_at = at;
    d->cur = -1, d->run = 0;
    if (d->held < 0 || d->held_age++ == 0) return; /* the breaking token itself differs */
    for (int64_t j = 0; j <= RESYNC_SKIP && d->held + j < at; j++)
        if (d->tok[d->held + j] == id) {
            int known = learn(d, d->held, (int)j, d->broke_at, at);
            d->cur = d->held + j + 1, d->run = known ? d->held_run : RESYNC_RUN, d->held = -1;
            return;
        }
    if (d->held_age > RESYNC_AGE) d->held = -1;
}

static int bucket(int match) {
    int b = BUCKETS - 1;
    while (b > 0 && match < bucket_min[b]) b--;
    return b;
}

/* The chance that a draft behind a match of this length is kept. */
static double keep_chance(const k3_drafter *d, int c, int match) {
    int b = bucket(match);
    return (d->kept[c][b] + PRIOR_N * prior_keep[c][b]) / (d->seen[c][b] + PRIOR_N);
}

/* The token that came scores the next candidate of the last proposal,
 * whether it was sent as a draft or not: so the estimate learns while
 * decoding plainly, and a candidate after a missed one is not scored (it
 * could not have been kept). */
static void score(k3_drafter *d, int32_t id) {
    if (d->shadow_at >= d->nshadow) return;
    int b = bucket(d->shadow_run + d->shadow_at), hit = d->shadow[d->shadow_at] == id;
    int c = d->shadow_class[d->shadow_at];
    d->kept[c][b] = DECAY * d->kept[c][b] + hit;
    d->seen[c][b] = DECAY * d->seen[c][b] + 1;
    d->shadow_at = hit ? d->shadow_at + 1 : d->nshadow;
}

void k3_drafter_push(k3_drafter *d, int32_t id) {
    if (d->len == d->cap_tok) {
        d->cap_tok = d->cap_tok ? 2 * d->cap_tok : 256;
        d->tok = k3_xrealloc(d->tok, sizeof *d->tok * (size_t)d->cap_tok);
        for (int k = 0; k < N_NS; k++)
            d->prev[k] = k3_xrealloc(d->prev[k], sizeof *d->prev[k] * (size_t)d->cap_tok);
    }
    int64_t i = d->len++;
    d->tok[i] = id;
    score(d, id);
    follow(d, id);
    for (int k = 0; k < N_NS; k++) /* the n-gram before i was followed by position i */
        d->prev[k][i] =
            i < NS[k] ? -1 : table_put(&d->t[k], d, gram_key(d->tok, i - NS[k], NS[k]), i);
}

/* How many tokens before position p equal the last ones, up to MATCH_MAX. */
static int match_len(k3_drafter *d, int64_t p) {
    int l = 0;
    while (l < MATCH_MAX && l < p && d->tok[p - 1 - l] == d->tok[d->len - 1 - l]) l++;
    d->probes += l;
    return l;
}

/* Where the sequence's end occurred before (the position after it), or -1:
 * of the copy in progress and the last CHAIN occurrences of the longest
 * indexed n-gram that has one, the longest match (a copy that has gone on
 * for a while, or the place whose context agrees furthest back), the copy
 * in progress or the most recent on a tie. A hash collision matches less
 * than n and is skipped. */
static int64_t find_match(k3_drafter *d) {
    int64_t best = d->cur;
    int best_len = d->cur >= 0 ? d->run : 0;
    d->nocc = 0;
    for (int k = 0; k < N_NS; k++) {
        int n = NS[k], found = 0;
        if (d->len < n + 1) continue;
        int64_t p = table_get(&d->t[k], d, gram_key(d->tok, d->len - n, n));
        for (int c = 0; c < CHAIN && best_len < MATCH_MAX && p >= n && p < d->len;
             c++, p = d->prev[k][p]) {
            int l = match_len(d, p);
            if (l < n) continue;
            found = 1;
            d->occ[d->nocc++] = p;
            if (l > best_len) best = p, best_len = l;
        }
        if (found || best_len >= n) break; /* a shorter n-gram cannot match longer */
    }
    d->cur = best, d->run = best_len;
    return best;
}

/* A learned substitution whose source starts at q, or NULL. */
static const subst *sub_at(const k3_drafter *d, int64_t q) {
    for (int i = 0; i < d->nsub; i++) {
        const subst *s = &d->sub[i];
        if (s->seen >= 2 && q + s->nfrom <= d->len &&
            !memcmp(d->tok + q, s->from, sizeof *s->from * (size_t)s->nfrom))
            return s;
    }
    return NULL;
}

/* Up to k drafts copied from position p on, substitutions applied; how many.
 * A copy that reaches the present repeats itself (unless a substitution
 * shifted it: then it stops there). */
static int copy_from(const k3_drafter *d, int64_t p, int k, int32_t *out) {
    int64_t period = d->len - p, q = p;
    int j = 0, shifted = 0;
    while (j < k) {
        const subst *s = q < d->len ? sub_at(d, q) : NULL;
        if (s) {
            for (int t = 0; t < s->nto && j < k; t++) out[j++] = s->to[t];
            q += s->nfrom, shifted = 1;
        } else if (q < d->len)
            out[j++] = d->tok[q++];
        else if (!shifted)
            out[j] = out[j - period], j++;
        else
            break;
    }
    return j;
}

/* The class of each of n drafts copied from p: the other places matched
 * that agreed with the source up to draft j either all go on with its next
 * token, or some differ (and are dropped), or none is left. Where the
 * source or a place reaches the present it gives no evidence. */
static void classify(const k3_drafter *d, int64_t p, int n, uint8_t *cls) {
    int64_t alive[CHAIN];
    int na = 0;
    for (int i = 0; i < d->nocc; i++)
        if (d->occ[i] != p) alive[na++] = d->occ[i];
    for (int j = 0; j < n; j++) {
        int agree = 0, split = 0, left = 0;
        for (int i = 0; p + j < d->len && i < na; i++) {
            if (alive[i] + j >= d->len) continue;
            if (d->tok[alive[i] + j] != d->tok[p + j])
                split = 1;
            else
                agree = 1, alive[left++] = alive[i];
        }
        na = p + j < d->len ? left : 0;
        cls[j] = split ? SPLIT : agree ? AGREE : ONE;
    }
}

int k3_drafter_candidates(k3_drafter *d, int32_t *out) {
    d->nshadow = d->shadow_at = 0;
    int64_t p = find_match(d);
    if (p < 0) return 0;
    int n = copy_from(d, p, d->kmax, out);
    memcpy(d->shadow, out, sizeof *out * (size_t)n);
    classify(d, p, n, d->shadow_class);
    d->nshadow = n, d->shadow_run = d->run;
    return n;
}

int k3_drafter_propose(k3_drafter *d, int32_t *out) {
    int n = k3_drafter_candidates(d, out);
    double keep[K3_DRAFT_MAX];
    for (int j = 0; j < n; j++) keep[j] = keep_chance(d, d->shadow_class[j], d->shadow_run + j);
    return k3_draft_choose(keep, n, d->cost);
}

void k3_drafter_set_cost(k3_drafter *d, const double *cost) {
    d->cost[0] = 1;
    for (int k = 1; k <= K3_DRAFT_MAX; k++)
        d->cost[k] = cost ? cost[k] : K3_DRAFT_STEP_COST + K3_DRAFT_ROW_COST * k;
}

int k3_draft_choose(const double *keep, int n, const double *cost) {
    double all = 1, expect = 0, best = 1; /* a plain step: one token for one step */
    int best_k = 0;
    for (int k = 1; k <= n; k++) {
        all *= keep[k - 1]; /* the chance that the first k drafts are all kept */
        expect += all;
        double per_cost = (1 + expect) / cost[k];
        if (per_cost > best) best = per_cost, best_k = k;
    }
    return best_k;
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
