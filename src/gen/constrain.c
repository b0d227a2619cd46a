/* constrain.c — vocabulary byte trie and grammar-driven logit masking
 * (constrain.h). */
#include "gen/constrain.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "base/mem.h"

struct k3_vtrie {
    const k3_tokenizer *tok;
    int vocab;
    int32_t ctl[4];
    size_t n;         /* nodes, depth-first order */
    uint8_t *byte;    /* the byte that leads into the node */
    uint8_t *plain;   /* every byte in the subtree is plain string ASCII */
    uint16_t *depth;  /* 1 = a child of the root */
    uint16_t *here;   /* tokens whose bytes end exactly here */
    int32_t *skip;    /* first node after the subtree */
    int32_t *tb, *te; /* the subtree's tokens: sorted[tb..te) (the `here` ones first) */
    int32_t *sorted;  /* token ids by bytes */
    size_t n_sorted;
    int32_t *other; /* ids not in the trie (control tokens, ids without bytes) */
    size_t n_other;
    int max_depth;
};

typedef struct {
    const uint8_t *b;
    size_t len;
    int32_t id;
} tok_ref;

static int tok_cmp(const void *x, const void *y) {
    const tok_ref *a = x, *b = y;
    size_t n = a->len < b->len ? a->len : b->len;
    int c = memcmp(a->b, b->b, n);
    if (c) return c;
    if (a->len != b->len) return a->len < b->len ? -1 : 1;
    return a->id < b->id ? -1 : a->id > b->id;
}

/* Plain: may appear in a JSON string as itself (printable ASCII, no " or \). */
static int plain_byte(int c) {
    return c >= 0x20 && c < 0x7F && c != '"' && c != '\\';
}

k3_vtrie *k3_vtrie_build(const k3_tokenizer *tok, const int32_t ctl_ids[4], int vocab) {
    tok_ref *refs = k3_xmalloc(sizeof *refs * (size_t)(vocab > 0 ? vocab : 1));
    size_t nt = 0, total = 0;
    for (int32_t id = 0; id < vocab; id++) {
        if (k3_tok_is_special(tok, id)) continue;
        size_t len = 0;
        const char *b = k3_tok_token_bytes(tok, id, &len);
        if (!b || !len || len > 1024) continue;
        refs[nt++] = (tok_ref){(const uint8_t *)b, len, id};
        total += len;
    }
    qsort(refs, nt, sizeof *refs, tok_cmp);
    k3_vtrie *t = k3_xcalloc(1, sizeof *t);
    t->tok = tok;
    t->vocab = vocab;
    memcpy(t->ctl, ctl_ids, sizeof t->ctl);
    size_t cap = total + 1;
    t->byte = k3_xmalloc(cap);
    t->plain = k3_xmalloc(cap);
    t->depth = k3_xmalloc(sizeof *t->depth * cap);
    t->here = k3_xcalloc(cap, sizeof *t->here);
    t->skip = k3_xmalloc(sizeof *t->skip * cap);
    t->tb = k3_xmalloc(sizeof *t->tb * cap);
    t->te = k3_xmalloc(sizeof *t->te * cap);
    t->sorted = k3_xmalloc(sizeof *t->sorted * (nt ? nt : 1));
    int32_t open[1025]; /* node index open at each depth */
    size_t cur = 0;     /* depth of the open path */
    const tok_ref *prev = NULL;
    for (size_t k = 0; k < nt; k++) {
        const tok_ref *r = &refs[k];
        t->sorted[k] = r->id;
        size_t lcp = 0;
        if (prev)
            while (lcp < prev->len && lcp < r->len && prev->b[lcp] == r->b[lcp]) lcp++;
        while (cur > lcp) { /* close the nodes the new token leaves */
            int32_t x = open[cur--];
            t->skip[x] = (int32_t)t->n;
            t->te[x] = (int32_t)k;
        }
        for (size_t d = lcp + 1; d <= r->len; d++) {
            size_t x = t->n++;
            t->byte[x] = r->b[d - 1];
            t->depth[x] = (uint16_t)d;
            t->tb[x] = (int32_t)k;
            open[d] = (int32_t)x;
            cur = d;
            if ((int)d > t->max_depth) t->max_depth = (int)d;
        }
        t->here[open[r->len]]++;
        prev = r;
    }
    while (cur > 0) {
        int32_t x = open[cur--];
        t->skip[x] = (int32_t)t->n;
        t->te[x] = (int32_t)nt;
    }
    /* plain[x]: x's byte and every byte below it are plain */
    for (size_t i = t->n; i-- > 0;) {
        int p = plain_byte(t->byte[i]);
        for (int32_t c = (int32_t)i + 1; p && c < t->skip[i]; c = t->skip[c]) p = t->plain[c];
        t->plain[i] = (uint8_t)p;
    }
    t->n_sorted = nt;
    /* every id not in the trie: always masked unless it is an allowed control */
    uint8_t *in = k3_xcalloc((size_t)(vocab > 0 ? vocab : 1), 1);
    for (size_t k = 0; k < nt; k++) in[t->sorted[k]] = 1;
    t->other = k3_xmalloc(sizeof *t->other * (size_t)(vocab - (int)nt + 1));
    for (int32_t id = 0; id < vocab; id++)
        if (!in[id]) t->other[t->n_other++] = id;
    free(in);
    free(refs);
    return t;
}

void k3_vtrie_free(k3_vtrie *t) {
    if (!t) return;
    free(t->byte);
    free(t->plain);
    free(t->depth);
    free(t->here);
    free(t->skip);
    free(t->tb);
    free(t->te);
    free(t->sorted);
    free(t->other);
    free(t);
}

size_t k3_vtrie_nodes(const k3_vtrie *t) {
    return t->n;
}

struct k3_constraint {
    const k3_vtrie *t;
    k3_gram *g;
    k3_gstate st;
    k3_gstate *work; /* [max_depth + 1] states of the trie walk */
    uint64_t *allow; /* bitset over trie token positions (t->sorted order) */
    int32_t ctl_ok[4];
    int n_ctl_ok;
    float *saved; /* logits of the allowed ids while the rest is filled */
    int32_t *saved_id;
    size_t visits;
    int budget_cut; /* a token was refused only for the budget */
};

k3_constraint *k3_constraint_new(const k3_vtrie *t, k3_gram *g, const k3_gnode *root) {
    k3_constraint *c = k3_xcalloc(1, sizeof *c);
    c->t = t;
    c->g = g;
    k3_gstate_init(&c->st, root);
    c->work = k3_xmalloc(sizeof *c->work * (size_t)(t->max_depth + 1));
    c->allow = k3_xcalloc((t->n_sorted + 63) / 64 + 1, sizeof *c->allow);
    c->saved = k3_xmalloc(sizeof *c->saved * (t->n_sorted / 4 + 8));
    c->saved_id = k3_xmalloc(sizeof *c->saved_id * (t->n_sorted / 4 + 8));
    return c;
}

void k3_constraint_free(k3_constraint *c) {
    if (!c) return;
    k3_gram_free(c->g);
    free(c->work);
    free(c->allow);
    free(c->saved);
    free(c->saved_id);
    free(c);
}

typedef struct {
    k3_constraint *c;
    int lim; /* largest remainder a token may leave */
    int count;
    int best_rem;
    int32_t best_id;
} walk;

static void set_bit(uint64_t *b, int32_t i) {
    b[i >> 6] |= 1ull << (i & 63);
}

/* Set bits [lo, hi). */
static void set_range(uint64_t *b, int32_t lo, int32_t hi) {
    while (lo < hi && (lo & 63)) set_bit(b, lo++);
    while (lo + 64 <= hi) b[lo >> 6] = ~0ull, lo += 64;
    while (lo < hi) set_bit(b, lo++);
}

/* pos: a trie position, or -1 - k for control symbol k. */
static void consider(walk *w, int32_t pos, int rem) {
    if (rem <= w->lim) {
        if (pos >= 0)
            set_bit(w->c->allow, pos);
        else
            w->c->ctl_ok[w->c->n_ctl_ok++] = w->c->t->ctl[-1 - pos];
        w->count++;
        return;
    }
    w->c->budget_cut = 1;
    if (rem < w->best_rem) w->best_rem = rem, w->best_id = pos;
}

/* logits[0..n) = -inf, in blocks the compiler turns into wide stores. */
static void fill_neg_inf(float *x, size_t n) {
    float blk[64];
    for (int i = 0; i < 64; i++) blk[i] = -INFINITY;
    size_t i = 0;
    for (; i + 64 <= n; i += 64) memcpy(x + i, blk, sizeof blk);
    for (; i < n; i++) x[i] = -INFINITY;
}

int k3_constraint_mask(k3_constraint *c, float *logits, int budget) {
    const k3_vtrie *t = c->t;
    size_t words = (t->n_sorted + 63) / 64;
    memset(c->allow, 0, words * sizeof *c->allow);
    c->n_ctl_ok = 0;
    walk w = {c, budget - 1, 0, INT_MAX, INT32_MIN};
    c->visits = 0;
    if (!k3_gstate_done(&c->st) && !c->st.failed) {
        for (int k = 0; k < 4; k++) {
            if (t->ctl[k] < 0 || t->ctl[k] >= t->vocab) continue;
            k3_gstate_copy(&c->work[0], &c->st);
            if (k3_gstate_step(&c->work[0], K3_SYM_OPEN + k))
                consider(&w, -1 - k, k3_gstate_rem(&c->work[0]));
        }
        k3_gstate_copy(&c->work[0], &c->st);
        for (size_t i = 0; i < t->n;) {
            c->visits++;
            int d = t->depth[i];
            k3_gstate *parent = &c->work[d - 1];
            int ascii = 0;
            if (k3_gstate_free_bytes(parent, &ascii) && (!ascii || t->plain[i])) {
                int r = k3_gstate_rem(parent);
                if (r <= w.lim) {
                    set_range(c->allow, t->tb[i], t->te[i]);
                    w.count += t->te[i] - t->tb[i];
                } else {
                    consider(&w, t->tb[i], r);
                }
                i = (size_t)t->skip[i];
                continue;
            }
            k3_gstate *s = &c->work[d];
            k3_gstate_copy(s, parent);
            if (!k3_gstate_step(s, t->byte[i])) {
                i = (size_t)t->skip[i];
                continue;
            }
            if (t->here[i]) {
                int r = k3_gstate_rem(s);
                for (int32_t k = t->tb[i]; k < t->tb[i] + t->here[i]; k++) consider(&w, k, r);
            }
            i++;
        }
    }
    if (w.count == 0 && w.best_id != INT32_MIN) {
        w.lim = INT_MAX;
        consider(&w, w.best_id, 0);
    }
    int n_trie = w.count - c->n_ctl_ok;
    if ((size_t)n_trie * 4 <= t->n_sorted) {
        /* few allowed: keep their logits, fill everything, put them back */
        int k = 0;
        for (size_t wd = 0; wd < words; wd++)
            for (uint64_t m = c->allow[wd]; m; m &= m - 1) {
                int32_t id = t->sorted[wd * 64 + (size_t)__builtin_ctzll(m)];
                c->saved_id[k] = id;
                c->saved[k++] = logits[id];
            }
        for (int q = 0; q < c->n_ctl_ok; q++) {
            c->saved_id[k] = c->ctl_ok[q];
            c->saved[k++] = logits[c->ctl_ok[q]];
        }
        fill_neg_inf(logits, (size_t)t->vocab);
        for (int q = 0; q < k; q++) logits[c->saved_id[q]] = c->saved[q];
    } else {
        /* most allowed: mask the others, and every id outside the trie */
        for (size_t wd = 0; wd < words; wd++) {
            uint64_t m = ~c->allow[wd];
            if (wd == words - 1 && (t->n_sorted & 63)) m &= (1ull << (t->n_sorted & 63)) - 1;
            for (; m; m &= m - 1)
                logits[t->sorted[wd * 64 + (size_t)__builtin_ctzll(m)]] = -INFINITY;
        }
        for (size_t q = 0; q < t->n_other; q++) {
            int32_t id = t->other[q];
            int ok = 0;
            for (int z = 0; z < c->n_ctl_ok; z++) ok |= c->ctl_ok[z] == id;
            if (!ok) logits[id] = -INFINITY;
        }
    }
    return w.count;
}

int k3_constraint_accept(k3_constraint *c, int32_t id) {
    for (int k = 0; k < 4; k++)
        if (c->t->ctl[k] == id) return k3_gstate_step(&c->st, K3_SYM_OPEN + k) ? 0 : -1;
    if (id < 0 || id >= c->t->vocab || k3_tok_is_special(c->t->tok, id)) return -1;
    size_t len = 0;
    const char *b = k3_tok_token_bytes(c->t->tok, id, &len);
    if (!b || !len) return -1;
    for (size_t i = 0; i < len; i++)
        if (!k3_gstate_step(&c->st, (unsigned char)b[i])) return -1;
    return 0;
}

int k3_constraint_fits(k3_constraint *c, const int32_t *ids, int n) {
    k3_gstate was;
    k3_gstate_copy(&was, &c->st);
    int k = 0;
    while (k < n && !k3_constraint_accept(c, ids[k])) k++;
    k3_gstate_copy(&c->st, &was);
    return k;
}

int k3_constraint_budget_cut(const k3_constraint *c) {
    return c->budget_cut;
}

int k3_constraint_done(const k3_constraint *c) {
    return k3_gstate_done(&c->st);
}

size_t k3_constraint_last_visits(const k3_constraint *c) {
    return c->visits;
}
