/* regex.c — the safe regex dialect of regex.h compiled to a DFA: a
 * recursive-descent parser builds a Thompson NFA (counted repetition by
 * re-parsing the atom, bounded by K3_RE_MAX_NFA), subset construction
 * makes the DFA (bounded by K3_RE_MAX_STATES), and states that cannot reach
 * an accepting one are cut so a writer is never led into a dead end. */
#include "text/regex.h"

#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/mem.h"

typedef struct {
    uint64_t set[2]; /* characters (bit i: 0x20 + i) leading to out */
    int out, e1, e2; /* -1: none */
} nst;

typedef struct {
    int a, b; /* start, end (the end has no outgoing edge yet) */
} frag;

typedef struct {
    nst *s;
    int n, cap;
    const char *p, *end;
    int depth, failed, too_big, dollar, in_look;
    char *err;
    size_t errcap;
} re;

static void fail(re *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void fail(re *r, const char *fmt, ...) {
    if (r->failed) return;
    r->failed = 1;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->err, r->errcap, fmt, ap);
    va_end(ap);
}

static int add(re *r) {
    if (r->n >= K3_RE_MAX_NFA) {
        r->too_big = 1;
        fail(r, "the pattern expands to more than %d automaton states (the limit)", K3_RE_MAX_NFA);
        return 0;
    }
    if (r->n == r->cap) {
        r->cap = r->cap ? 2 * r->cap : 256;
        r->s = k3_xrealloc(r->s, sizeof *r->s * (size_t)r->cap);
    }
    r->s[r->n] = (nst){{0, 0}, -1, -1, -1};
    return r->n++;
}

static void edge(re *r, int from, int to) {
    if (r->s[from].e1 < 0)
        r->s[from].e1 = to;
    else
        r->s[from].e2 = to;
}

static void set_add(uint64_t *set, int c) {
    if (c >= 0x20 && c <= 0x7E) set[(c - 0x20) >> 6] |= 1ull << ((c - 0x20) & 63);
}
static void set_range(uint64_t *set, int lo, int hi) {
    for (int c = lo; c <= hi; c++) set_add(set, c);
}
static void set_neg(uint64_t *set) {
    set[0] = ~set[0];
    set[1] = ~set[1] & ((1ull << (K3_RE_SIGMA - 64)) - 1);
}
static int set_has(const uint64_t *set, int i) {
    return (int)((set[i >> 6] >> (i & 63)) & 1);
}

static frag chars(re *r, const uint64_t *set) {
    int a = add(r), b = add(r);
    if (r->failed) return (frag){0, 0};
    r->s[a].set[0] = set[0], r->s[a].set[1] = set[1];
    r->s[a].out = b;
    return (frag){a, b};
}

static int hexval(re *r, int digits) {
    int v = 0;
    for (int i = 0; i < digits; i++, r->p++) {
        int c = r->p < r->end ? *r->p : 0;
        int d = c >= '0' && c <= '9'   ? c - '0'
                : c >= 'a' && c <= 'f' ? c - 'a' + 10
                : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                       : -1;
        if (d < 0) return fail(r, "bad hex escape in pattern"), 0;
        v = v * 16 + d;
    }
    return v;
}

/* After a '\': fills set; returns the character when it is one (else -1). */
static int escape(re *r, uint64_t *set) {
    if (r->p >= r->end) return fail(r, "pattern ends with '\\'"), -1;
    int c = (unsigned char)*r->p++;
    switch (c) {
    case 'd':
    case 'D':
        set_range(set, '0', '9');
        if (c == 'D') set_neg(set);
        return -1;
    case 'w':
    case 'W':
        set_range(set, 'a', 'z'), set_range(set, 'A', 'Z'), set_range(set, '0', '9');
        set_add(set, '_');
        if (c == 'W') set_neg(set);
        return -1;
    case 's':
    case 'S':
        set_add(set, ' ');
        if (c == 'S') set_neg(set);
        return -1;
    case 't':
        return 9;
    case 'n':
        return 10;
    case 'r':
        return 13;
    case 'f':
        return 12;
    case 'v':
        return 11;
    case '0':
        return 0;
    case 'x':
        c = hexval(r, 2);
        break;
    case 'u':
        c = hexval(r, 4);
        break;
    default:
        if ((c >= '1' && c <= '9') || c == 'k')
            return fail(r, "backreferences are not supported in 'pattern'"), -1;
        if (c == 'b' || c == 'B') return fail(r, "'\\%c' is not supported in 'pattern'", c), -1;
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))
            return fail(r, "unknown escape '\\%c' in 'pattern'", c), -1;
    }
    set_add(set, c);
    return c;
}

static frag parse_class(re *r) {
    uint64_t set[2] = {0, 0};
    int neg = r->p < r->end && *r->p == '^';
    if (neg) r->p++;
    while (!r->failed) {
        if (r->p >= r->end) return fail(r, "unclosed '[' in pattern"), (frag){0, 0};
        if (*r->p == ']') break;
        uint64_t one[2] = {0, 0};
        int lo = (unsigned char)*r->p++;
        if (lo == '\\')
            lo = escape(r, one);
        else if (lo >= 0x80)
            return fail(r, "only ASCII patterns are supported"), (frag){0, 0};
        else
            set_add(one, lo);
        if (lo >= 0 && r->p + 1 < r->end && r->p[0] == '-' && r->p[1] != ']') {
            r->p++;
            uint64_t tmp[2] = {0, 0};
            int hi = (unsigned char)*r->p++;
            if (hi == '\\') hi = escape(r, tmp);
            if (hi < lo) return fail(r, "bad range in a pattern class"), (frag){0, 0};
            set_range(one, lo, hi);
        }
        set[0] |= one[0], set[1] |= one[1];
    }
    r->p++; /* ']' */
    if (neg) set_neg(set);
    return chars(r, set);
}

static frag parse_alt(re *r);

static frag parse_atom(re *r) {
    uint64_t set[2] = {0, 0};
    int c = (unsigned char)*r->p++;
    switch (c) {
    case '(': {
        if (r->p < r->end && *r->p == '?') {
            if (r->p + 1 < r->end && r->p[1] == ':')
                r->p += 2;
            else if (r->p + 2 < r->end && r->p[1] == '<' && r->p[2] != '=' && r->p[2] != '!') {
                while (r->p < r->end && *r->p != '>') r->p++;
                r->p++;
            } else {
                return fail(r, "lookaround is only supported as '^(?=...)' in 'pattern'"),
                       (frag){0, 0};
            }
        }
        if (++r->depth > 64) return fail(r, "the pattern nests too deeply"), (frag){0, 0};
        frag f = parse_alt(r);
        r->depth--;
        if (r->p >= r->end || *r->p != ')') return fail(r, "unclosed '(' in pattern"), f;
        r->p++;
        return f;
    }
    case '[':
        return parse_class(r);
    case '.':
        set_neg(set);
        return chars(r, set);
    case '\\':
        escape(r, set);
        return chars(r, set);
    case '$':
        if (r->p == r->end || (r->in_look && *r->p == ')')) {
            r->dollar = 1;
            int a = add(r);
            return (frag){a, a};
        }
        /* fallthrough */
    case '^':
        return fail(r, "'^' and '$' are only supported at the ends of 'pattern'"), (frag){0, 0};
    case '*':
    case '+':
    case '?':
    case '{':
    case ')':
    case ']':
    case '}':
        return fail(r, "unexpected '%c' in pattern", c), (frag){0, 0};
    default:
        if (c >= 0x80) return fail(r, "only ASCII patterns are supported"), (frag){0, 0};
        set_add(set, c);
        return chars(r, set);
    }
}

static frag star(re *r, frag f) {
    int s = add(r), e = add(r);
    if (r->failed) return f;
    edge(r, s, f.a), edge(r, s, e), edge(r, f.b, f.a), edge(r, f.b, e);
    return (frag){s, e};
}

static frag opt(re *r, frag f) {
    int s = add(r), e = add(r);
    if (r->failed) return f;
    edge(r, s, f.a), edge(r, s, e), edge(r, f.b, e);
    return (frag){s, e};
}

static frag cat(re *r, frag f, frag g) {
    edge(r, f.b, g.a);
    return (frag){f.a, g.b};
}

/* The atom at p0 again (a fresh copy for counted repetition). */
static frag again(re *r, const char *p0) {
    const char *save = r->p;
    r->p = p0;
    frag f = parse_atom(r);
    r->p = save;
    return f;
}

static int number(re *r, int *v) {
    if (r->p >= r->end || *r->p < '0' || *r->p > '9') return 0;
    long x = 0;
    while (r->p < r->end && *r->p >= '0' && *r->p <= '9' && x < 100000)
        x = x * 10 + (*r->p++ - '0');
    *v = (int)x;
    return 1;
}

static frag parse_repeat(re *r) {
    const char *p0 = r->p;
    frag f = parse_atom(r);
    while (!r->failed && r->p < r->end && strchr("*+?{", *r->p)) {
        int c = *r->p++, lo = 0, hi = -1;
        if (c == '*') {
            f = star(r, f);
        } else if (c == '+') {
            f = cat(r, f, star(r, again(r, p0)));
        } else if (c == '?') {
            f = opt(r, f);
        } else {
            if (!number(r, &lo)) return fail(r, "bad '{' quantifier in pattern"), f;
            hi = lo;
            if (r->p < r->end && *r->p == ',') {
                r->p++;
                if (!number(r, &hi)) hi = -1;
            }
            if (r->p >= r->end || *r->p != '}' || (hi >= 0 && hi < lo))
                return fail(r, "bad '{' quantifier in pattern"), f;
            r->p++;
            if (lo > 1000 || hi > 1000) {
                r->too_big = 1;
                return fail(r, "a pattern repeat count above 1000 (the limit)"), f;
            }
            /* lo copies (the first is f), then hi-lo optional ones or a star */
            int a = add(r);
            frag out = {a, a};
            for (int i = 0; i < lo && !r->failed; i++) out = cat(r, out, i ? again(r, p0) : f);
            if (hi < 0) out = cat(r, out, star(r, lo ? again(r, p0) : f));
            for (int i = lo; i < hi && !r->failed; i++)
                out = cat(r, out, opt(r, i || lo ? again(r, p0) : f));
            f = out;
        }
        if (r->p < r->end && *r->p == '?') r->p++; /* lazy: the same language */
    }
    return f;
}

static frag parse_concat(re *r) {
    int a = add(r);
    frag f = {a, a};
    while (!r->failed && r->p < r->end && *r->p != '|' && *r->p != ')')
        f = cat(r, f, parse_repeat(r));
    return f;
}

static frag parse_alt(re *r) {
    frag f = parse_concat(r);
    while (!r->failed && r->p < r->end && *r->p == '|') {
        r->p++;
        frag g = parse_concat(r);
        int s = add(r), e = add(r);
        if (r->failed) break;
        edge(r, s, f.a), edge(r, s, g.a), edge(r, f.b, e), edge(r, g.b, e);
        f = (frag){s, e};
    }
    return f;
}

/* Unanchored ends: any characters before / after. */
static frag anchor(re *r, frag f, int at_start, int at_end) {
    uint64_t all[2] = {0, 0};
    set_neg(all);
    if (!at_start) f = cat(r, star(r, chars(r, all)), f);
    if (!at_end) f = cat(r, f, star(r, chars(r, all)));
    return f;
}

/* ---------------- subset construction ---------------- */

typedef struct {
    int **sets; /* per DFA state: its NFA states, sorted, [0] = count */
    int n, cap;
    int16_t *next;
    unsigned char *acc;
    int *slot; /* hash -> state + 1 */
    int nslot;
} dfa_build;

static uint64_t set_hash(const int *s) {
    uint64_t h = 1469598103934665603ull;
    for (int i = 0; i <= s[0]; i++) h = (h ^ (uint64_t)s[i]) * 1099511628211ull;
    return h;
}

static int cmp_int(const void *a, const void *b) {
    return *(const int *)a - *(const int *)b;
}

/* Characters no NFA edge tells apart share a class (cls[c]); returns the
 * number of classes, rep[k] one character of class k. */
static int char_classes(const re *r, int *cls, int *rep) {
    int n = 1, map[2 * K3_RE_SIGMA];
    memset(cls, 0, sizeof(int) * K3_RE_SIGMA);
    for (int s = 0; s < r->n; s++) {
        if (r->s[s].out < 0) continue;
        for (int i = 0; i < 2 * n; i++) map[i] = -1;
        int m = 0;
        for (int c = 0; c < K3_RE_SIGMA; c++) {
            int key = 2 * cls[c] + set_has(r->s[s].set, c);
            if (map[key] < 0) map[key] = m++;
            cls[c] = map[key];
        }
        n = m;
    }
    for (int c = K3_RE_SIGMA - 1; c >= 0; c--) rep[cls[c]] = c;
    return n;
}

/* The epsilon closure of seeds, sorted, as [count, states...]. */
static int *closure(const re *r, int *stack, int nstack, unsigned *mark, unsigned gen) {
    int *out = k3_xmalloc(sizeof(int) * (size_t)(r->n + 1)), k = 0;
    for (int i = 0; i < nstack; i++) mark[stack[i]] = gen;
    while (nstack) {
        int s = stack[--nstack];
        out[1 + k++] = s;
        int e[2] = {r->s[s].e1, r->s[s].e2};
        for (int j = 0; j < 2; j++)
            if (e[j] >= 0 && mark[e[j]] != gen) mark[e[j]] = gen, stack[nstack++] = e[j];
    }
    out[0] = k;
    qsort(out + 1, (size_t)k, sizeof(int), cmp_int);
    return k3_xrealloc(out, sizeof(int) * (size_t)(k + 1));
}

/* Index of set in b (added when new; -2 when the state bound is passed). */
static int intern(dfa_build *b, int *set, int accept_state) {
    uint64_t h = set_hash(set);
    int i = (int)(h & (uint64_t)(b->nslot - 1));
    for (; b->slot[i]; i = (i + 1) & (b->nslot - 1)) {
        int *o = b->sets[b->slot[i] - 1];
        if (o[0] == set[0] && !memcmp(o + 1, set + 1, sizeof(int) * (size_t)set[0])) {
            free(set);
            return b->slot[i] - 1;
        }
    }
    if (b->n >= K3_RE_MAX_STATES) return free(set), -2;
    b->slot[i] = b->n + 1;
    b->sets[b->n] = set;
    b->acc[b->n] = 0;
    for (int j = 1; j <= set[0]; j++) b->acc[b->n] |= set[j] == accept_state;
    return b->n++;
}

/* Cut what cannot reach an accepting state; fill dist. 0, or -1 when the
 * start cannot accept. */
static int prune(k3_redfa *d) {
    /* breadth first from the accepting states over reversed edges */
    size_t edges = (size_t)d->n * K3_RE_SIGMA;
    int *start = k3_xcalloc((size_t)d->n + 1, sizeof(int)), *from = k3_xmalloc(sizeof(int) * edges);
    for (size_t i = 0; i < edges; i++)
        if (d->next[i] >= 0) start[d->next[i] + 1]++;
    for (int s = 0; s < d->n; s++) start[s + 1] += start[s];
    int *fill = k3_xmalloc(sizeof(int) * (size_t)d->n),
        *queue = k3_xmalloc(sizeof(int) * (size_t)d->n);
    memcpy(fill, start, sizeof(int) * (size_t)d->n);
    for (size_t i = 0; i < edges; i++)
        if (d->next[i] >= 0) from[fill[d->next[i]]++] = (int)(i / K3_RE_SIGMA);
    int qn = 0;
    for (int s = 0; s < d->n; s++) {
        d->dist[s] = d->acc[s] ? 0 : INT_MAX;
        if (d->acc[s]) queue[qn++] = s;
    }
    for (int qi = 0; qi < qn; qi++) {
        int t = queue[qi];
        for (int e = start[t]; e < start[t + 1]; e++)
            if (d->dist[from[e]] == INT_MAX)
                d->dist[from[e]] = d->dist[t] + 1, queue[qn++] = from[e];
    }
    free(start), free(from), free(fill), free(queue);
    for (size_t i = 0; i < edges; i++)
        if (d->next[i] >= 0 && d->dist[d->next[i]] == INT_MAX) d->next[i] = -1;
    return d->dist[0] == INT_MAX ? -1 : 0;
}

static k3_redfa *dfa_alloc(k3_gram *g, int n) {
    k3_redfa *d = k3_gram_alloc(g, sizeof *d);
    d->n = n;
    d->next = k3_gram_alloc(g, sizeof(int16_t) * (size_t)n * K3_RE_SIGMA);
    d->acc = k3_gram_alloc(g, (size_t)n);
    d->dist = k3_gram_alloc(g, sizeof(int) * (size_t)n);
    return d;
}

static k3_redfa *determinize(k3_gram *g, re *r, frag f) {
    dfa_build b = {0};
    b.nslot = 4096; /* a power of two above 2 * K3_RE_MAX_STATES */
    b.slot = k3_xcalloc((size_t)b.nslot, sizeof(int));
    b.sets = k3_xcalloc(K3_RE_MAX_STATES, sizeof(int *));
    b.acc = k3_xcalloc(K3_RE_MAX_STATES, 1);
    b.next = k3_xmalloc(sizeof(int16_t) * K3_RE_MAX_STATES * K3_RE_SIGMA);
    unsigned *mark = k3_xcalloc((size_t)r->n, sizeof(unsigned)), gen = 1;
    int *stack = k3_xmalloc(sizeof(int) * (size_t)r->n * 2);
    stack[0] = f.a;
    intern(&b, closure(r, stack, 1, mark, gen++), f.b);
    int over = 0, cls[K3_RE_SIGMA], rep[K3_RE_SIGMA], ncls = char_classes(r, cls, rep);
    for (int s = 0; s < b.n && !over; s++) {
        int16_t by_class[K3_RE_SIGMA];
        for (int k3 = 0; k3 < ncls; k3++) {
            int c = rep[k3];
            int k = 0, *set = b.sets[s];
            for (int j = 1; j <= set[0]; j++) {
                const nst *q = &r->s[set[j]];
                if (q->out >= 0 && set_has(q->set, c)) stack[k++] = q->out;
            }
            int t = -1;
            if (k) {
                gen++;
                int m = 0; /* drop duplicate seeds */
                for (int i = 0; i < k; i++)
                    if (mark[stack[i]] != gen) mark[stack[i]] = gen, stack[m++] = stack[i];
                t = intern(&b, closure(r, stack, m, mark, ++gen), f.b);
            }
            if (t == -2) {
                over = 1;
                break;
            }
            by_class[k3] = (int16_t)t;
        }
        for (int c = 0; c < K3_RE_SIGMA && !over; c++)
            b.next[s * K3_RE_SIGMA + c] = by_class[cls[c]];
    }
    k3_redfa *d = NULL;
    if (!over) {
        d = dfa_alloc(g, b.n);
        memcpy(d->next, b.next, sizeof(int16_t) * (size_t)b.n * K3_RE_SIGMA);
        memcpy(d->acc, b.acc, (size_t)b.n);
    }
    for (int i = 0; i < b.n; i++) free(b.sets[i]);
    free(b.sets), free(b.slot), free(b.acc), free(b.next), free(mark), free(stack);
    return d;
}

static k3_redfa *finish(k3_redfa *d, char *err, size_t cap, int *too_big) {
    if (!d) {
        *too_big = 1;
        snprintf(err, cap, "the pattern needs more than %d automaton states (the limit)",
                 K3_RE_MAX_STATES);
        return NULL;
    }
    if (prune(d)) {
        snprintf(err, cap, "the pattern matches no string of printable ASCII characters");
        return NULL;
    }
    return d;
}

k3_redfa *k3_re_intersect(k3_gram *g, const k3_redfa *a, const k3_redfa *b, char *err, size_t cap,
                          int *too_big) {
    *too_big = 0;
    int n = 1, nslot = 32768, over = 0; /* a power of two above 2 * K3_RE_MAX_PRODUCT */
    int *pair = k3_xmalloc(sizeof(int) * 2 * K3_RE_MAX_PRODUCT);
    int *slot = k3_xcalloc((size_t)nslot, sizeof(int));
    int16_t *next = k3_xmalloc(sizeof(int16_t) * K3_RE_MAX_PRODUCT * K3_RE_SIGMA);
    pair[0] = pair[1] = 0;
    slot[0] = 1; /* (0,0) hashes to 0 */
    for (int s = 0; s < n && !over; s++)
        for (int c = 0; c < K3_RE_SIGMA; c++) {
            int x = a->next[pair[2 * s] * K3_RE_SIGMA + c],
                y = b->next[pair[2 * s + 1] * K3_RE_SIGMA + c];
            int t = -1;
            if (x >= 0 && y >= 0) {
                uint64_t h = ((uint64_t)x * 1000003u + (uint64_t)y) * 0x9E3779B97F4A7C15ull;
                int i = (int)(h >> 40) & (nslot - 1);
                if (x == 0 && y == 0) i = 0;
                while (slot[i] &&
                       !(pair[2 * (slot[i] - 1)] == x && pair[2 * (slot[i] - 1) + 1] == y))
                    i = (i + 1) & (nslot - 1);
                if (!slot[i]) {
                    if (n >= K3_RE_MAX_PRODUCT) {
                        over = 1;
                        break;
                    }
                    pair[2 * n] = x, pair[2 * n + 1] = y;
                    slot[i] = ++n;
                }
                t = slot[i] - 1;
            }
            next[s * K3_RE_SIGMA + c] = (int16_t)t;
        }
    /* the product lives on the heap: only its minimized form joins the grammar */
    k3_redfa tmp = {.n = n, .next = next, .acc = NULL, .dist = NULL}, *d = NULL;
    if (!over) {
        tmp.acc = k3_xmalloc((size_t)n);
        tmp.dist = k3_xmalloc(sizeof(int) * (size_t)n);
        for (int s = 0; s < n; s++) tmp.acc[s] = a->acc[pair[2 * s]] && b->acc[pair[2 * s + 1]];
        if (prune(&tmp))
            snprintf(err, cap, "the pattern matches no string of printable ASCII characters");
        else
            d = k3_re_minimize(g, &tmp);
    } else {
        *too_big = 1;
        snprintf(err, cap,
                 "'format', 'pattern' and its lookahead together need more than %d "
                 "automaton states (the limit)",
                 K3_RE_MAX_PRODUCT);
    }
    free(pair), free(slot), free(next), free(tmp.acc), free(tmp.dist);
    return d;
}

k3_redfa *k3_re_compile(k3_gram *g, const char *pattern, k3_redfa *within, char *err, size_t cap,
                        int *too_big) {
    re r = {.p = pattern, .end = pattern + strlen(pattern), .err = err, .errcap = cap};
    *too_big = 0;
    int at_start = *r.p == '^';
    if (at_start) r.p++;
    k3_redfa *look = NULL;
    if (at_start && !strncmp(r.p, "(?=", 3)) { /* ^(?=A)B: strings of B that start with A */
        r.p += 3;
        r.in_look = 1;
        frag la = parse_alt(&r);
        r.in_look = 0;
        if (!r.failed && (r.p >= r.end || *r.p != ')')) fail(&r, "unclosed '(?=' in pattern");
        r.p++;
        if (!r.failed) {
            la = anchor(&r, la, 1, r.dollar);
            look = r.failed ? NULL : finish(determinize(g, &r, la), err, cap, too_big);
            if (!look) r.failed = 1;
        }
        r.dollar = 0;
    }
    frag f = {0, 0};
    if (!r.failed) f = parse_alt(&r);
    if (!r.failed && r.p < r.end) fail(&r, "unexpected ')' in pattern");
    if (!r.failed) f = anchor(&r, f, at_start, r.dollar);
    k3_redfa *d = NULL;
    if (!r.failed) d = finish(determinize(g, &r, f), err, cap, too_big);
    *too_big |= r.too_big;
    free(r.s);
    if (d && look && within) {
        within = k3_re_intersect(g, within, look, err, cap, too_big);
        look = NULL;
        if (!within) return NULL;
    }
    if (d && look) d = k3_re_intersect(g, look, d, err, cap, too_big);
    if (d && within) d = k3_re_intersect(g, within, d, err, cap, too_big);
    return d;
}

/* Longest accepted string from s (-1: unbounded, a cycle); memo[s] -2 unseen, -3 on the path. */
static int longest(const k3_redfa *d, int s, int *memo) {
    if (memo[s] == -3) return -1;
    if (memo[s] != -2) return memo[s];
    memo[s] = -3;
    int best = d->acc[s] ? 0 : INT_MIN;
    for (int c = 0; c < K3_RE_SIGMA; c++) {
        int t = d->next[s * K3_RE_SIGMA + c];
        if (t < 0) continue;
        int l = longest(d, t, memo);
        if (l < 0) return memo[s] = -1;
        if (l + 1 > best) best = l + 1;
    }
    return memo[s] = best;
}

void k3_re_lengths(const k3_redfa *d, int *shortest, int *longest_len) {
    int *memo = k3_xmalloc(sizeof(int) * (size_t)d->n);
    for (int i = 0; i < d->n; i++) memo[i] = -2;
    *shortest = d->dist[0];
    *longest_len = longest(d, 0, memo);
    free(memo);
}
