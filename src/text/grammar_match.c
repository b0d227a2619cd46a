/* grammar_match.c — the symbol-at-a-time matcher over grammar nodes
 * (grammar.h): a stack of frames, one per open node, stepped by one symbol
 * at a time, plus the lower bound on the symbols still needed to finish.
 * The nodes themselves are built in grammar.c. */
#include <limits.h>
#include <string.h>

#include "text/grammar.h"
#include "text/grammar_num.h"
#include "text/regex.h"

#define BIG (INT_MAX / 4)

static int template_ok(const char *t, int pos, int prev, int c) {
    switch (t[pos]) {
    case 'd':
        return c >= '0' && c <= '9';
    case 'h':
        return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
    case 'M':
        return c == '0' || c == '1';
    case 'm':
        return prev == '0' ? c >= '1' && c <= '9' : c >= '0' && c <= '2';
    case 'D':
        return c >= '0' && c <= '2';
    case 'e':
        return prev == '0' ? c >= '1' && c <= '9' : c >= '0' && c <= '9';
    case 'H':
        return c == '0' || c == '1';
    case 'S':
        return c >= '0' && c <= '5';
    default:
        return c == (unsigned char)t[pos];
    }
}

enum { R_REJECT, R_ACCEPT, R_DONE, R_PASS, R_PUSH, R_AGAIN };

static int push(k3_gstate *st, const k3_gnode *n) {
    if (st->depth >= K3_G_MAX_DEPTH) return 0;
    k3_gframe *f = &st->f[st->depth++];
    memset(f, 0, sizeof *f);
    f->node = n;
    return 1;
}

void k3_gstate_init(k3_gstate *st, const k3_gnode *root) {
    st->depth = 0;
    st->failed = 0;
    push(st, root);
}

int k3_gstate_done(const k3_gstate *st) {
    return !st->failed && st->depth == 0;
}

/* range helpers for ENUM and KEYED: lo in the low 32 bits, hi in the high */
static int r_lo(const k3_gframe *f) {
    return (int)(uint32_t)f->mask;
}
static int r_hi(const k3_gframe *f) {
    return (int)(f->mask >> 32);
}
static void r_set(k3_gframe *f, int lo, int hi) {
    f->mask = (uint64_t)(uint32_t)lo | ((uint64_t)(uint32_t)hi << 32);
}

/* Narrow [lo, hi) of sorted literals to those whose symbol at pos is sym. */
static int narrow(const k3_gsyms *lits, int lo, int hi, int pos, int sym, int *nlo, int *nhi) {
    int a = lo;
    while (a < hi && !(lits[a].len > pos && lits[a].s[pos] == sym)) a++;
    int b = a;
    while (b < hi && lits[b].len > pos && lits[b].s[pos] == sym) b++;
    *nlo = a;
    *nhi = b;
    return b > a;
}

static int is_digit(int c) {
    return c >= '0' && c <= '9';
}

/* UTF-8: next continuation byte range after a lead byte (RFC 3629). */
static void utf8_lead(int c, int *pending, int *lo, int *hi) {
    *lo = 0x80, *hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF)
        *pending = 1;
    else if (c >= 0xE0 && c <= 0xEF) {
        *pending = 2;
        if (c == 0xE0) *lo = 0xA0;
        if (c == 0xED) *hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
        *pending = 3;
        if (c == 0xF0) *lo = 0x90;
        if (c == 0xF4) *hi = 0x8F;
    } else {
        *pending = -1;
    }
}

/* A STRING held to a DFA (text/regex.h): d is the DFA state; only
 * printable ASCII, with '"', '\\' and '/' also written escaped. */
static int step_re(k3_gframe *f, int sym) {
    const k3_redfa *re = f->node->re;
    int c = sym;
    if (f->a == 1 && sym == '"') return re->acc[f->d] ? R_DONE : R_REJECT;
    if (f->a == 1 && sym == '\\') { /* only when an escapable character may follow */
        for (const char *e = "\"\\/"; *e; e++)
            if (re->next[f->d * K3_RE_SIGMA + (*e - 0x20)] >= 0) return f->a = 2, R_ACCEPT;
        return R_REJECT;
    }
    if (f->a == 2 && !strchr("\"\\/", sym)) return R_REJECT;
    if (c < 0x20 || c > 0x7E || (f->a == 1 && c == '"')) return R_REJECT;
    int t = re->next[f->d * K3_RE_SIGMA + (c - 0x20)];
    if (t < 0) return R_REJECT;
    f->d = t, f->a = 1;
    return R_ACCEPT;
}

/* Fewest symbols to close a DFA-held string from f. */
static long long rem_re(const k3_gframe *f) {
    const k3_redfa *re = f->node->re;
    if (f->a == 0) return 2 + re->dist[0];
    if (f->a == 1) return 1 + re->dist[f->d];
    long long best = BIG;
    for (const char *c = "\"\\/"; *c; c++) {
        int t = re->next[f->d * K3_RE_SIGMA + (*c - 0x20)];
        if (t >= 0 && 2 + re->dist[t] < best) best = 2 + re->dist[t];
    }
    return best;
}

static int step_string(k3_gframe *f, int sym) {
    const k3_gnode *n = f->node;
    /* a: 0 before '"', 1 content, 2 after '\', 3 in \uXXXX; b: code points;
     * c: UTF-8 continuation bytes (phase 1) / hex digits left (phase 3);
     * d: template position; mask: next continuation byte range */
    if (f->a == 0) {
        if (sym != '"') return R_REJECT;
        f->a = 1;
        return R_ACCEPT;
    }
    if (sym >= 256) return R_REJECT;
    if (n->re) return step_re(f, sym);
    if (f->a == 1 && n->format) {
        int len = (int)strlen(n->format);
        if (f->d == len) return sym == '"' ? R_DONE : R_REJECT;
        if (!template_ok(n->format, f->d, (int)f->mask, sym)) return R_REJECT;
        f->mask = (uint64_t)sym;
        f->d++;
        return R_ACCEPT;
    }
    if (f->a == 1) {
        if (f->c > 0) {
            int lo = (int)(f->mask & 0xFF), hi = (int)((f->mask >> 8) & 0xFF);
            if (sym < lo || sym > hi) return R_REJECT;
            f->mask = 0x80 | (0xBF << 8);
            if (--f->c == 0) f->b++;
            return R_ACCEPT;
        }
        if (sym == '"') return f->b >= n->min ? R_DONE : R_REJECT;
        int room = n->max < 0 || f->b < n->max;
        if (sym == '\\') {
            if (!room) return R_REJECT;
            f->a = 2;
            return R_ACCEPT;
        }
        if (sym < 0x20) return R_REJECT;
        if (!room) return R_REJECT;
        if (sym < 0x80) {
            f->b++;
            return R_ACCEPT;
        }
        int pending, lo, hi;
        utf8_lead(sym, &pending, &lo, &hi);
        if (pending < 0) return R_REJECT;
        f->c = pending;
        f->mask = (uint64_t)lo | ((uint64_t)hi << 8);
        return R_ACCEPT;
    }
    if (f->a == 2) {
        if (sym == 'u') {
            f->a = 3;
            f->c = 4;
            f->mask = 0; /* becomes 1 once a digit is not '0' */
            return R_ACCEPT;
        }
        if (!strchr("\"\\/bfnrt", sym) || !sym) return R_REJECT;
        f->a = 1;
        f->b++;
        return R_ACCEPT;
    }
    /* \uXXXX: no surrogates (first digit never d/D) and never \u0000: JSON
     * allows U+0000, but jansson cannot hold it in an object key and C
     * strings downstream would be cut at it */
    int hex = is_digit(sym) || (sym >= 'a' && sym <= 'f') || (sym >= 'A' && sym <= 'F');
    if (!hex || (f->c == 4 && (sym == 'd' || sym == 'D'))) return R_REJECT;
    if (f->c == 1 && sym == '0' && !f->mask) return R_REJECT;
    if (sym != '0') f->mask = 1;
    if (--f->c == 0) {
        f->a = 1;
        f->b++;
    }
    return R_ACCEPT;
}

static int step_number(k3_gframe *f, int sym) {
    /* a: 0 start, 1 after '-', 2 leading 0, 3 int digits, 4 after '.', 5 frac
     * digits, 6 after e, 7 after exponent sign, 8 exponent digits; b: digits
     * in the current part (15 / 15 / 2 at most) */
    int integer = f->node->integer & 1, d = is_digit(sym);
    switch (f->a) {
    case 0:
        if (sym == '-' && !(f->node->integer & 2)) return f->a = 1, R_ACCEPT;
        /* fallthrough */
    case 1:
        if (!d) return R_REJECT;
        f->a = sym == '0' ? 2 : 3;
        f->b = 1;
        return R_ACCEPT;
    case 2:
    case 3:
        if (f->a == 3 && d && f->b < 15) return f->b++, R_ACCEPT;
        if (!integer && sym == '.') return f->a = 4, f->b = 0, R_ACCEPT;
        if (!integer && (sym == 'e' || sym == 'E')) return f->a = 6, R_ACCEPT;
        return d ? R_REJECT : R_PASS;
    case 4:
        if (!d) return R_REJECT;
        return f->a = 5, f->b = 1, R_ACCEPT;
    case 5:
        if (d && f->b < 15) return f->b++, R_ACCEPT;
        if (sym == 'e' || sym == 'E') return f->a = 6, R_ACCEPT;
        return d ? R_REJECT : R_PASS;
    case 6:
        if (sym == '+' || sym == '-') return f->a = 7, R_ACCEPT;
        /* fallthrough */
    case 7:
        if (!d) return R_REJECT;
        return f->a = 8, f->b = 1, R_ACCEPT;
    default:
        if (d && f->b < 2) return f->b++, R_ACCEPT;
        return d ? R_REJECT : R_PASS;
    }
}

static int step_lits(k3_gstate *st, k3_gframe *f, int sym, int keyed) {
    const k3_gnode *n = f->node;
    if (keyed && f->b) return R_REJECT; /* child active: never here */
    int lo = r_lo(f), hi = r_hi(f), pos = f->a, nlo, nhi;
    if (!narrow(n->lits, lo, hi, pos, sym, &nlo, &nhi)) {
        /* ENUM: a literal that ended here may be complete (1 vs 12) */
        if (!keyed && lo < hi && n->lits[lo].len == pos) return R_PASS;
        return R_REJECT;
    }
    r_set(f, nlo, nhi);
    f->a = ++pos;
    if (nhi - nlo == 1 && n->lits[nlo].len == pos) {
        if (!keyed || !n->kids[nlo]) return R_DONE;
        f->b = 1;
        return push(st, n->kids[nlo]) ? R_ACCEPT : R_REJECT;
    }
    return R_ACCEPT;
}

static int step_object(k3_gstate *st, k3_gframe *f, int sym) {
    const k3_gnode *n = f->node;
    /* a: phase; b: cursor; c: first flag (phase 1) / chosen (3..5); d: key
     * position (2) or space used (4); mask: live candidates (2) */
    switch (f->a) {
    case 0:
        if (n->lead) { /* the enclosing KEYED wrote '{' and began property 0 */
            f->a = n->lead == 1 ? 4 : 5, f->c = 0, f->d = 0;
            return R_AGAIN;
        }
        if (sym != '{') return R_REJECT;
        f->a = 1, f->c = 1;
        return R_ACCEPT;
    case 1:
        if (sym == '}' && f->c && n->n_req[f->b] == 0) return R_DONE;
        if (sym == ' ' && !f->c && !f->d) return f->d = 1, R_ACCEPT;
        if (sym != '"' || f->b >= n->n_kids) return R_REJECT;
        f->mask = 0;
        for (int j = f->b; j < n->n_kids; j++) {
            f->mask |= 1ull << j;
            if (n->required[j]) break;
        }
        f->a = 2, f->d = 1;
        return R_ACCEPT;
    case 2: {
        uint64_t live = 0;
        int done = -1;
        for (int j = 0; j < n->n_kids; j++) {
            if (!((f->mask >> j) & 1)) continue;
            const k3_gsyms *k = &n->lits[j];
            if (k->len > f->d && k->s[f->d] == sym) {
                live |= 1ull << j;
                if (k->len == f->d + 1) done = j;
            }
        }
        if (!live) return R_REJECT;
        f->mask = live;
        f->d++;
        if (done >= 0) f->a = 3, f->c = done, f->d = 0;
        return R_ACCEPT;
    }
    case 3:
        if (sym != ':') return R_REJECT;
        f->a = 4;
        return R_ACCEPT;
    case 4:
        if (sym == ' ' && !f->d) return f->d = 1, R_ACCEPT;
        f->a = 5;
        return push(st, n->kids[f->c]) ? R_AGAIN : R_REJECT;
    default:
        if (sym == ',' && f->c + 1 < n->n_kids) {
            f->a = 1, f->b = f->c + 1, f->c = 0, f->d = 0;
            return R_ACCEPT;
        }
        if (sym == '}' && n->n_req[f->c + 1] == 0) return R_DONE;
        return R_REJECT;
    }
}

static int step_freeobj(k3_gstate *st, k3_gframe *f, int sym) {
    const k3_gnode *n = f->node;
    /* a: 0 '{', 1 key or '}' (c: first), 2 ':', 3 value, 4 ',' or '}'; d: space used */
    switch (f->a) {
    case 0:
        if (sym != '{') return R_REJECT;
        f->a = 1, f->c = 1;
        return R_ACCEPT;
    case 1:
        if (sym == '}' && f->c) return R_DONE;
        if (sym == ' ' && !f->c && !f->d) return f->d = 1, R_ACCEPT;
        if (sym != '"') return R_REJECT;
        f->a = 2;
        return push(st, n->kids[0]) ? R_AGAIN : R_REJECT;
    case 2:
        if (sym != ':') return R_REJECT;
        f->a = 3, f->d = 0;
        return R_ACCEPT;
    case 3:
        if (sym == ' ' && !f->d) return f->d = 1, R_ACCEPT;
        f->a = 4;
        return push(st, n->item) ? R_AGAIN : R_REJECT;
    default:
        if (sym == ',') return f->a = 1, f->c = 0, f->d = 0, R_ACCEPT;
        return sym == '}' ? R_DONE : R_REJECT;
    }
}

static int step_array(k3_gstate *st, k3_gframe *f, int sym) {
    const k3_gnode *n = f->node;
    /* a: 0 '[', 1 item or ']' (c: first), 2 ',' or ']'; b: items; d: space used */
    switch (f->a) {
    case 0:
        if (sym != '[') return R_REJECT;
        f->a = 1, f->c = 1;
        return R_ACCEPT;
    case 1:
        if (sym == ']' && f->c && n->min <= 0) return R_DONE;
        if (sym == ' ' && !f->c && !f->d) return f->d = 1, R_ACCEPT;
        if (sym >= K3_SYM_COUNT || !k3_gnode_has_first(n->item, sym)) return R_REJECT;
        f->a = 2, f->b++;
        return push(st, n->item) ? R_AGAIN : R_REJECT;
    default:
        if (sym == ',' && (n->max < 0 || f->b < n->max))
            return f->a = 1, f->c = 0, f->d = 0, R_ACCEPT;
        if (sym == ']' && f->b >= n->min) return R_DONE;
        return R_REJECT;
    }
}

/* ANY: become the concrete kind the first symbol selects. */
static int step_any(k3_gstate *st, k3_gframe *f, int sym) {
    const k3_gnode *to = NULL;
    k3_gnode *const *kinds = f->node->kids; /* object, array, string, number, bool, null */
    if (sym == '{')
        to = kinds[0];
    else if (sym == '[')
        to = kinds[1];
    else if (sym == '"')
        to = kinds[2];
    else if (sym == '-' || is_digit(sym))
        to = kinds[3];
    else if (sym == 't' || sym == 'f')
        to = kinds[4];
    else if (sym == 'n')
        to = kinds[5];
    if (!to) return R_REJECT;
    if ((sym == '{' || sym == '[') && st->depth >= K3_G_MAX_DEPTH - 2) return R_REJECT;
    memset(f, 0, sizeof *f);
    f->node = to;
    return R_AGAIN;
}

static int step_frame(k3_gstate *st, k3_gframe *f, int sym) {
    const k3_gnode *n = f->node;
    switch (n->kind) {
    case K3_G_LIT:
        if (f->a >= n->lit.len || n->lit.s[f->a] != sym) return R_REJECT;
        return ++f->a == n->lit.len ? R_DONE : R_ACCEPT;
    case K3_G_SEQ:
        if (f->a >= n->n_kids) return R_PASS;
        f->b = 1;
        return push(st, n->kids[f->a++]) ? R_AGAIN : R_REJECT;
    case K3_G_KEYED:
        if (f->a == 0 && r_hi(f) == 0) r_set(f, 0, n->n_kids);
        return step_lits(st, f, sym, 1);
    case K3_G_REPEAT:
        if ((n->max < 0 || f->a < n->max) && sym < K3_SYM_COUNT &&
            k3_gnode_has_first(n->item, sym)) {
            f->b = 1;
            return push(st, n->item) ? R_AGAIN : R_REJECT;
        }
        return f->a >= n->min ? R_PASS : R_REJECT;
    case K3_G_TEXT:
        return sym < 256 ? R_ACCEPT : R_PASS;
    case K3_G_STRING:
        return step_string(f, sym);
    case K3_G_NUMBER:
        if (n->ranged) {
            int r = k3_gnum_step(f, sym);
            return r == K3_GNUM_ACCEPT ? R_ACCEPT : r == K3_GNUM_PASS ? R_PASS : R_REJECT;
        }
        return step_number(f, sym);
    case K3_G_ENUM:
        if (f->a == 0 && r_hi(f) == 0) r_set(f, 0, n->n_kids);
        return step_lits(st, f, sym, 0);
    case K3_G_OBJECT:
        return step_object(st, f, sym);
    case K3_G_FREEOBJ:
        return step_freeobj(st, f, sym);
    case K3_G_ARRAY:
        return step_array(st, f, sym);
    case K3_G_ANY:
        return step_any(st, f, sym);
    case K3_G_UNION:
        for (int i = 0; i < n->n_kids; i++)
            if (sym < K3_SYM_COUNT && k3_gnode_has_first(n->kids[i], sym)) {
                memset(f, 0, sizeof *f);
                f->node = n->kids[i];
                return R_AGAIN;
            }
        return R_REJECT;
    }
    return R_REJECT;
}

/* The top frame finished: pop it and let the parents that finish with it go too. */
static void pop_done(k3_gstate *st) {
    st->depth--;
    while (st->depth > 0) {
        k3_gframe *p = &st->f[st->depth - 1];
        const k3_gnode *n = p->node;
        int complete = 0;
        if (n->kind == K3_G_SEQ) {
            p->b = 0;
            complete = p->a >= n->n_kids;
        } else if (n->kind == K3_G_KEYED) {
            complete = 1;
        } else if (n->kind == K3_G_REPEAT) {
            p->b = 0;
            p->a++;
            complete = n->max >= 0 && p->a >= n->max;
        }
        if (!complete) return;
        st->depth--;
    }
}

int k3_gstate_step(k3_gstate *st, int sym) {
    if (st->failed) return 0;
    for (int guard = 0; guard < 4 * K3_G_MAX_DEPTH + 8; guard++) {
        if (st->depth == 0) break;
        k3_gframe *f = &st->f[st->depth - 1];
        int r = step_frame(st, f, sym);
        switch (r) {
        case R_ACCEPT:
            return 1;
        case R_DONE:
            pop_done(st);
            return 1;
        case R_PASS:
            pop_done(st);
            continue;
        case R_AGAIN:
            continue;
        default:
            st->failed = 1;
            return 0;
        }
    }
    st->failed = 1;
    return 0;
}

static long long rem_frame_raw(const k3_gframe *f);

/* Each node's minlen saturates at BIG; sums and products of them are taken
 * in 64 bits and saturate here too. */
static int rem_frame(const k3_gframe *f) {
    long long r = rem_frame_raw(f);
    return r > BIG ? BIG : (int)r;
}

static long long rem_frame_raw(const k3_gframe *f) {
    const k3_gnode *n = f->node;
    long long r = 0;
    switch (n->kind) {
    case K3_G_LIT:
        return n->lit.len - f->a;
    case K3_G_SEQ:
        for (int i = f->a; i < n->n_kids; i++) r += n->kids[i]->minlen;
        return r;
    case K3_G_KEYED:
    case K3_G_ENUM: {
        if (n->kind == K3_G_KEYED && f->b) return 0;
        int lo = r_lo(f), hi = r_hi(f);
        if (f->a == 0 && hi == 0) return n->minlen;
        r = BIG;
        for (int i = lo; i < hi; i++) {
            long long m = n->lits[i].len - f->a +
                          (n->kind == K3_G_KEYED && n->kids[i] ? n->kids[i]->minlen : 0);
            if (m < r) r = m;
        }
        return r;
    }
    case K3_G_REPEAT: {
        int left = n->min - f->a - (f->b ? 1 : 0);
        return left > 0 ? (long long)left * n->item->minlen : 0;
    }
    case K3_G_TEXT:
        return 0;
    case K3_G_STRING:
        if (n->re) return rem_re(f);
        if (f->a == 0) return n->minlen;
        if (n->format) return (int)strlen(n->format) - f->d + 1;
        {
            int left = n->min - f->b;
            if (f->a == 2 || f->a == 3) left--; /* the escape makes one */
            r = 1 + (left > 0 ? left : 0);
            if (f->a == 1) r += f->c;
            if (f->a == 2) r += 1;
            if (f->a == 3) r += f->c;
            return r;
        }
    case K3_G_NUMBER:
        if (n->ranged) return k3_gnum_rem(f);
        return f->a == 2 || f->a == 3 || f->a == 5 || f->a == 8 ? 0 : 1;
    case K3_G_OBJECT:
        switch (f->a) {
        case 0:
            return n->minlen;
        case 1:
            if (f->c) return n->req_after[f->b] - (n->n_req[f->b] > 0);
            return n->n_req[f->b] > 0 ? n->req_after[f->b] - 1 : (long long)n->opt_min[f->b] + 1;
        case 2:
            r = BIG;
            for (int j = 0; j < n->n_kids; j++) {
                if (!((f->mask >> j) & 1)) continue;
                long long m =
                    (long long)n->lits[j].len - f->d + 1 + n->kids[j]->minlen + n->req_after[j + 1];
                if (m < r) r = m;
            }
            return r;
        case 3:
            return 1 + (long long)n->kids[f->c]->minlen + n->req_after[f->c + 1];
        case 4:
            return (long long)n->kids[f->c]->minlen + n->req_after[f->c + 1];
        default:
            return n->req_after[f->c + 1];
        }
    case K3_G_FREEOBJ:
        switch (f->a) {
        case 0:
            return 2;
        case 1:
            return f->c ? 1 : (long long)n->kids[0]->minlen + 1 + n->item->minlen + 1;
        case 2:
            return 1 + n->item->minlen + 1;
        case 3:
            return n->item->minlen + 1;
        default:
            return 1;
        }
    case K3_G_ARRAY: {
        long long ml = n->item->minlen;
        if (f->a == 0) return n->minlen;
        if (f->a == 1 && f->c) return 1 + n->min * ml + (n->min > 0 ? n->min - 1 : 0);
        if (f->a == 1) {
            int k = n->min - f->b > 1 ? n->min - f->b : 1;
            return k * ml + (k - 1) + 1;
        }
        int k = n->min - f->b;
        return (k > 0 ? k * (ml + 1) : 0) + 1;
    }
    case K3_G_ANY:
    case K3_G_UNION:
        return n->minlen;
    }
    return 0;
}

int k3_gstate_rem(const k3_gstate *st) {
    if (st->failed) return BIG;
    long r = 0;
    for (int i = 0; i < st->depth; i++) r += rem_frame(&st->f[i]);
    return r > BIG ? BIG : (int)r;
}

int k3_gstate_free_bytes(const k3_gstate *st, int *ascii_only) {
    if (st->failed || st->depth == 0) return 0;
    const k3_gframe *f = &st->f[st->depth - 1];
    const k3_gnode *n = f->node;
    if (n->kind == K3_G_TEXT) return *ascii_only = 0, 1;
    if (n->kind == K3_G_STRING && f->a == 1 && !n->format && !n->re && n->max < 0 && f->c == 0 &&
        f->b >= n->min)
        return *ascii_only = 1, 1;
    return 0;
}
