/* regex_min.c — minimizing an acyclic DFA (text/regex.h), so that a
 * product of automata keeps only the states that can still be told apart.
 *
 * The DFAs that bound a string's length (formats, `.{1,253}`-style
 * lookaheads) have no cycles. For those, equivalent states are found in
 * one pass (Revuz): visit states successors first, and give each state the
 * class of its signature (accepting, and the class reached on each
 * character); two states with the same signature are equivalent. This is
 * linear in the automaton's size. A DFA with a cycle is copied as is. */
#include <stdlib.h>
#include <string.h>

#include "base/mem.h"
#include "text/regex.h"

typedef struct {
    const k3_redfa *d;
    int *cls;   /* [n] class, -1 unseen, -2 on the path */
    int *order; /* states, successors first */
    int n_order;
    int cyclic;
} walk;

/* Post-order over the states reachable from 0 (iterative: depth up to n). */
static void post_order(walk *w) {
    int n = w->d->n;
    int *stack = k3_xmalloc(sizeof(int) * (size_t)n), *edge = k3_xcalloc((size_t)n, sizeof(int));
    int top = 0;
    stack[top++] = 0;
    w->cls[0] = -2;
    while (top && !w->cyclic) {
        int s = stack[top - 1];
        if (edge[s] == K3_RE_SIGMA) {
            w->order[w->n_order++] = s;
            w->cls[s] = 0; /* done (the class comes later) */
            top--;
            continue;
        }
        int t = w->d->next[s * K3_RE_SIGMA + edge[s]++];
        if (t < 0) continue;
        if (w->cls[t] == -2) w->cyclic = 1;
        if (w->cls[t] == -1) w->cls[t] = -2, stack[top++] = t;
    }
    free(stack), free(edge);
}

static uint64_t sig_hash(const int *sig) {
    uint64_t h = 1469598103934665603ull;
    for (int i = 0; i <= K3_RE_SIGMA; i++) h = (h ^ (uint64_t)(sig[i] + 2)) * 1099511628211ull;
    return h;
}

static k3_redfa *alloc(k3_gram *g, int n) {
    k3_redfa *m = k3_gram_alloc(g, sizeof *m);
    m->n = n;
    m->next = k3_gram_alloc(g, sizeof(int16_t) * (size_t)n * K3_RE_SIGMA);
    m->acc = k3_gram_alloc(g, (size_t)n);
    m->dist = k3_gram_alloc(g, sizeof(int) * (size_t)n);
    return m;
}

static k3_redfa *copy(k3_gram *g, const k3_redfa *d) {
    k3_redfa *m = alloc(g, d->n);
    memcpy(m->next, d->next, sizeof(int16_t) * (size_t)d->n * K3_RE_SIGMA);
    memcpy(m->acc, d->acc, (size_t)d->n);
    memcpy(m->dist, d->dist, sizeof(int) * (size_t)d->n);
    return m;
}

k3_redfa *k3_re_minimize(k3_gram *g, const k3_redfa *d) {
    walk w = {.d = d};
    w.cls = k3_xmalloc(sizeof(int) * (size_t)d->n);
    for (int i = 0; i < d->n; i++) w.cls[i] = -1;
    w.order = k3_xmalloc(sizeof(int) * (size_t)d->n);
    post_order(&w);
    if (w.cyclic) {
        free(w.cls), free(w.order);
        return copy(g, d);
    }
    /* signatures: [acc, class per character]; classes numbered as found */
    int sw = K3_RE_SIGMA + 1, nslot = 1;
    while (nslot < 2 * w.n_order) nslot <<= 1;
    int *sigs = k3_xmalloc(sizeof(int) * (size_t)sw * (size_t)w.n_order);
    int *slot = k3_xcalloc((size_t)nslot, sizeof(int)),
        *rep = k3_xmalloc(sizeof(int) * (size_t)w.n_order);
    int n_cls = 0;
    for (int k = 0; k < w.n_order; k++) {
        int s = w.order[k], *sig = sigs + (size_t)n_cls * (size_t)sw;
        sig[0] = d->acc[s];
        for (int c = 0; c < K3_RE_SIGMA; c++) {
            int t = d->next[s * K3_RE_SIGMA + c];
            sig[c + 1] = t < 0 ? -1 : w.cls[t];
        }
        int i = (int)(sig_hash(sig) & (uint64_t)(nslot - 1));
        while (slot[i] &&
               memcmp(sigs + (size_t)(slot[i] - 1) * (size_t)sw, sig, sizeof(int) * (size_t)sw))
            i = (i + 1) & (nslot - 1);
        if (!slot[i]) slot[i] = ++n_cls, rep[n_cls - 1] = s;
        w.cls[s] = slot[i] - 1;
    }
    /* renumber so the start (visited last) is class 0 */
    int start = w.cls[0];
    k3_redfa *m = alloc(g, n_cls);
#define RENUM(x) ((x) == start ? 0 : (x) == 0 ? start : (x))
    for (int k = 0; k < n_cls; k++) {
        int to = RENUM(k);
        const int *sig = sigs + (size_t)k * (size_t)sw;
        m->acc[to] = (unsigned char)sig[0];
        m->dist[to] = d->dist[rep[k]];
        for (int c = 0; c < K3_RE_SIGMA; c++)
            m->next[to * K3_RE_SIGMA + c] = (int16_t)(sig[c + 1] < 0 ? -1 : RENUM(sig[c + 1]));
    }
#undef RENUM
    free(w.cls), free(w.order), free(sigs), free(slot), free(rep);
    return m;
}
