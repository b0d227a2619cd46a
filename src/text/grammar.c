/* grammar.c — grammar nodes, their builders and the symbol-at-a-time
 * matcher (grammar.h). */
#include "text/grammar.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "base/mem.h"

#define BIG (INT_MAX / 4)

struct k3_gram {
    void **allocs; /* everything to free */
    size_t n, cap;
    k3_gnode *any, *any_obj, *any_arr, *any_str, *any_num, *any_bool, *any_null, *key_str;
};

static void *galloc(k3_gram *g, size_t n) {
    void *p = k3_xcalloc(1, n ? n : 1);
    if (g->n == g->cap) {
        g->cap = g->cap ? g->cap * 2 : 64;
        g->allocs = k3_xrealloc(g->allocs, g->cap * sizeof *g->allocs);
    }
    g->allocs[g->n++] = p;
    return p;
}

k3_gram *k3_gram_new(void) {
    return k3_xcalloc(1, sizeof(k3_gram));
}

void k3_gram_free(k3_gram *g) {
    if (!g) return;
    for (size_t i = 0; i < g->n; i++) free(g->allocs[i]);
    free(g->allocs);
    free(g);
}

static void set_first(k3_gnode *n, int sym) {
    n->first[sym >> 6] |= 1ull << (sym & 63);
}
static int has_first(const k3_gnode *n, int sym) {
    return (n->first[sym >> 6] >> (sym & 63)) & 1;
}
static void or_first(k3_gnode *n, const k3_gnode *k) {
    for (int i = 0; i < 5; i++) n->first[i] |= k->first[i];
}

static k3_gnode *node(k3_gram *g, k3_gkind kind) {
    k3_gnode *n = galloc(g, sizeof *n);
    n->kind = kind;
    n->max = -1;
    return n;
}

static k3_gsyms syms_copy(k3_gram *g, const uint16_t *s, int len) {
    k3_gsyms r = {galloc(g, sizeof(uint16_t) * (size_t)(len ? len : 1)), len};
    memcpy(r.s, s, sizeof(uint16_t) * (size_t)len);
    return r;
}

static k3_gsyms syms_bytes(k3_gram *g, const char *t, size_t len) {
    k3_gsyms r = {galloc(g, sizeof(uint16_t) * (len ? len : 1)), (int)len};
    for (size_t i = 0; i < len; i++) r.s[i] = (unsigned char)t[i];
    return r;
}

static int syms_cmp(const k3_gsyms *a, const k3_gsyms *b) {
    int n = a->len < b->len ? a->len : b->len;
    for (int i = 0; i < n; i++)
        if (a->s[i] != b->s[i]) return a->s[i] < b->s[i] ? -1 : 1;
    return a->len - b->len;
}

/* ---------------- builders ---------------- */

k3_gnode *k3_g_lit(k3_gram *g, const uint16_t *s, int len) {
    k3_gnode *n = node(g, K3_G_LIT);
    n->lit = syms_copy(g, s, len);
    n->minlen = len;
    if (len) set_first(n, s[0]);
    return n;
}

k3_gnode *k3_g_lit_str(k3_gram *g, const char *text) {
    k3_gnode *n = node(g, K3_G_LIT);
    n->lit = syms_bytes(g, text, strlen(text));
    n->minlen = n->lit.len;
    if (n->lit.len) set_first(n, n->lit.s[0]);
    return n;
}

k3_gnode *k3_g_lit_ctl(k3_gram *g, const char *spec) {
    size_t n = strlen(spec), k = 0;
    uint16_t *s = k3_xmalloc(sizeof *s * (n + 1));
    for (size_t i = 0; i < n; i++) {
        if (spec[i] == '{' && i + 2 < n && spec[i + 2] == '}' && strchr("OCSE", spec[i + 1])) {
            s[k++] = (uint16_t)(K3_SYM_OPEN + (int)(strchr("OCSE", spec[i + 1]) - "OCSE"));
            i += 2;
        } else {
            s[k++] = (unsigned char)spec[i];
        }
    }
    k3_gnode *r = k3_g_lit(g, s, (int)k);
    free(s);
    return r;
}

k3_gnode *k3_g_seq(k3_gram *g, k3_gnode *const *kids, int n) {
    k3_gnode *r = node(g, K3_G_SEQ);
    r->kids = galloc(g, sizeof *r->kids * (size_t)n);
    memcpy(r->kids, kids, sizeof *r->kids * (size_t)n);
    r->n_kids = n;
    int first_open = 1;
    for (int i = 0; i < n; i++) {
        r->minlen += kids[i]->minlen;
        if (first_open) or_first(r, kids[i]);
        if (kids[i]->minlen > 0) first_open = 0;
    }
    return r;
}

k3_gnode *k3_g_keyed(k3_gram *g, const k3_gsyms *lits, k3_gnode *const *kids, int n) {
    k3_gnode *r = node(g, K3_G_KEYED);
    r->lits = galloc(g, sizeof *r->lits * (size_t)n);
    r->kids = galloc(g, sizeof *r->kids * (size_t)n);
    /* sorted by literal (insertion sort: n is small) so a prefix range is contiguous */
    for (int i = 0; i < n; i++) {
        int j = i;
        while (j > 0 && syms_cmp(&r->lits[j - 1], &lits[i]) > 0) {
            r->lits[j] = r->lits[j - 1];
            r->kids[j] = r->kids[j - 1];
            j--;
        }
        r->lits[j] = syms_copy(g, lits[i].s, lits[i].len);
        r->kids[j] = kids[i];
    }
    r->n_kids = n;
    r->minlen = BIG;
    for (int i = 0; i < n; i++) {
        int m = r->lits[i].len + (r->kids[i] ? r->kids[i]->minlen : 0);
        if (m < r->minlen) r->minlen = m;
        if (r->lits[i].len) set_first(r, r->lits[i].s[0]);
    }
    return r;
}

k3_gnode *k3_g_repeat(k3_gram *g, k3_gnode *child, int min, int max) {
    k3_gnode *r = node(g, K3_G_REPEAT);
    r->item = child;
    r->min = min;
    r->max = max;
    r->minlen = min * child->minlen;
    or_first(r, child);
    return r;
}

k3_gnode *k3_g_text(k3_gram *g) {
    k3_gnode *r = node(g, K3_G_TEXT);
    r->first[0] = r->first[1] = r->first[2] = r->first[3] = ~0ull;
    return r;
}

k3_gnode *k3_g_string(k3_gram *g, int min_len, int max_len, const char *format) {
    k3_gnode *r = node(g, K3_G_STRING);
    r->min = min_len;
    r->max = max_len;
    r->format = format;
    r->minlen = 2 + (format ? (int)strlen(format) : min_len);
    set_first(r, '"');
    return r;
}

k3_gnode *k3_g_number(k3_gram *g, int integer) {
    k3_gnode *r = node(g, K3_G_NUMBER);
    r->integer = integer;
    r->minlen = 1;
    set_first(r, '-');
    for (int c = '0'; c <= '9'; c++) set_first(r, c);
    return r;
}

k3_gnode *k3_g_enum(k3_gram *g, const char *const *texts, int n) {
    k3_gnode *r = node(g, K3_G_ENUM);
    r->lits = galloc(g, sizeof *r->lits * (size_t)(n ? n : 1));
    int k = 0;
    for (int i = 0; i < n; i++) {
        k3_gsyms s = syms_bytes(g, texts[i], strlen(texts[i]));
        int j = k;
        while (j > 0 && syms_cmp(&r->lits[j - 1], &s) > 0) j--;
        if (j > 0 && syms_cmp(&r->lits[j - 1], &s) == 0) continue; /* duplicate */
        memmove(r->lits + j + 1, r->lits + j, sizeof *r->lits * (size_t)(k - j));
        r->lits[j] = s;
        k++;
    }
    r->n_kids = k;
    r->minlen = BIG;
    for (int i = 0; i < k; i++) {
        if (r->lits[i].len < r->minlen) r->minlen = r->lits[i].len;
        if (r->lits[i].len) set_first(r, r->lits[i].s[0]);
    }
    return r;
}

k3_gnode *k3_g_object(k3_gram *g, const char *const *keys, k3_gnode *const *vals,
                      const unsigned char *required, int n) {
    k3_gnode *r = node(g, K3_G_OBJECT);
    r->n_kids = n;
    r->kids = galloc(g, sizeof *r->kids * (size_t)(n ? n : 1));
    r->lits = galloc(g, sizeof *r->lits * (size_t)(n ? n : 1));
    r->required = galloc(g, (size_t)(n ? n : 1));
    r->req_after = galloc(g, sizeof(int) * (size_t)(n + 1));
    r->opt_min = galloc(g, sizeof(int) * (size_t)(n + 1));
    r->n_req = galloc(g, sizeof(int) * (size_t)(n + 1));
    for (int i = 0; i < n; i++) {
        r->kids[i] = vals[i];
        r->required[i] = required[i];
        r->lits[i] = syms_bytes(g, keys[i], strlen(keys[i])); /* the quoted JSON key */
    }
    r->req_after[n] = 1;
    r->opt_min[n] = BIG;
    r->n_req[n] = 0;
    for (int i = n - 1; i >= 0; i--) {
        int cost = r->lits[i].len + 1 + vals[i]->minlen;
        r->req_after[i] = r->req_after[i + 1] + (required[i] ? cost + 1 : 0);
        r->opt_min[i] = cost < r->opt_min[i + 1] ? cost : r->opt_min[i + 1];
        r->n_req[i] = r->n_req[i + 1] + (required[i] != 0);
    }
    r->minlen = 1 + r->req_after[0] - (r->n_req[0] > 0);
    set_first(r, '{');
    return r;
}

k3_gnode *k3_g_freeobj(k3_gram *g, k3_gnode *value) {
    k3_gnode *r = node(g, K3_G_FREEOBJ);
    r->item = value;
    if (!g->key_str) g->key_str = k3_g_string(g, 0, -1, NULL);
    r->kids = galloc(g, sizeof *r->kids);
    r->kids[0] = g->key_str;
    r->minlen = 2;
    set_first(r, '{');
    return r;
}

k3_gnode *k3_g_array(k3_gram *g, k3_gnode *item, int min, int max) {
    k3_gnode *r = node(g, K3_G_ARRAY);
    r->item = item;
    r->min = min;
    r->max = max;
    r->minlen = 2 + min * item->minlen + (min > 0 ? min - 1 : 0);
    set_first(r, '[');
    return r;
}

k3_gnode *k3_g_any(k3_gram *g) {
    if (g->any) return g->any;
    k3_gnode *r = node(g, K3_G_ANY);
    g->any = r;
    r->minlen = 1;
    const char *firsts = "{[\"-0123456789tfn";
    for (const char *p = firsts; *p; p++) set_first(r, (unsigned char)*p);
    g->any_obj = k3_g_freeobj(g, r);
    g->any_arr = k3_g_array(g, r, 0, -1);
    g->any_str = k3_g_string(g, 0, -1, NULL);
    g->any_num = k3_g_number(g, 0);
    static const char *const tf[] = {"true", "false"}, *const nul[] = {"null"};
    g->any_bool = k3_g_enum(g, tf, 2);
    g->any_null = k3_g_enum(g, nul, 1);
    /* step_any picks one of these by the first symbol */
    r->kids = galloc(g, sizeof *r->kids * 6);
    r->kids[0] = g->any_obj, r->kids[1] = g->any_arr, r->kids[2] = g->any_str;
    r->kids[3] = g->any_num, r->kids[4] = g->any_bool, r->kids[5] = g->any_null;
    r->n_kids = 6;
    return r;
}

k3_gnode *k3_g_union(k3_gram *g, k3_gnode *const *alts, int n) {
    for (int i = 0; i < n; i++)
        for (int j = 0; j < i; j++)
            for (int w = 0; w < 5; w++)
                if (alts[i]->first[w] & alts[j]->first[w]) {
                    k3_seterr("alternatives %d and %d can start with the same character (only "
                              "alternatives of different JSON types are supported)",
                              j, i);
                    return NULL;
                }
    k3_gnode *r = node(g, K3_G_UNION);
    r->kids = galloc(g, sizeof *r->kids * (size_t)n);
    memcpy(r->kids, alts, sizeof *r->kids * (size_t)n);
    r->n_kids = n;
    r->minlen = BIG;
    for (int i = 0; i < n; i++) {
        if (alts[i]->minlen < r->minlen) r->minlen = alts[i]->minlen;
        or_first(r, alts[i]);
    }
    return r;
}

/* Templates: 'd' digit, 'h' lower-case hex, 'M' month tens [01], 'm' month
 * units (1-9 after 0, 0-2 after 1), 'D' day tens [0-2], 'e' day units (1-9
 * after 0): every date is valid in every month; 'H' hour tens [01], 'S'
 * minute/second tens [0-5]; anything else is literal. */
const char *k3_g_format_template(const char *f) {
    if (!strcmp(f, "date")) return "dddd-Mm-De";
    if (!strcmp(f, "time")) return "Hd:Sd:SdZ";
    if (!strcmp(f, "date-time")) return "dddd-Mm-DeTHd:Sd:SdZ";
    if (!strcmp(f, "uuid")) return "hhhhhhhh-hhhh-hhhh-hhhh-hhhhhhhhhhhh";
    return NULL;
}

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

/* ---------------- matcher ---------------- */

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
        if (sym >= K3_SYM_COUNT || !has_first(n->item, sym)) return R_REJECT;
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
        if ((n->max < 0 || f->a < n->max) && sym < K3_SYM_COUNT && has_first(n->item, sym)) {
            f->b = 1;
            return push(st, n->item) ? R_AGAIN : R_REJECT;
        }
        return f->a >= n->min ? R_PASS : R_REJECT;
    case K3_G_TEXT:
        return sym < 256 ? R_ACCEPT : R_PASS;
    case K3_G_STRING:
        return step_string(f, sym);
    case K3_G_NUMBER:
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
            if (sym < K3_SYM_COUNT && has_first(n->kids[i], sym)) {
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

static int rem_frame(const k3_gframe *f) {
    const k3_gnode *n = f->node;
    int r = 0;
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
            int m = n->lits[i].len - f->a +
                    (n->kind == K3_G_KEYED && n->kids[i] ? n->kids[i]->minlen : 0);
            if (m < r) r = m;
        }
        return r;
    }
    case K3_G_REPEAT: {
        int left = n->min - f->a - (f->b ? 1 : 0);
        return left > 0 ? left * n->item->minlen : 0;
    }
    case K3_G_TEXT:
        return 0;
    case K3_G_STRING:
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
        return f->a == 2 || f->a == 3 || f->a == 5 || f->a == 8 ? 0 : 1;
    case K3_G_OBJECT:
        switch (f->a) {
        case 0:
            return n->minlen;
        case 1:
            if (f->c) return n->req_after[f->b] - (n->n_req[f->b] > 0);
            return n->n_req[f->b] > 0 ? n->req_after[f->b] - 1 : n->opt_min[f->b] + 1;
        case 2:
            r = BIG;
            for (int j = 0; j < n->n_kids; j++) {
                if (!((f->mask >> j) & 1)) continue;
                int m = n->lits[j].len - f->d + 1 + n->kids[j]->minlen + n->req_after[j + 1];
                if (m < r) r = m;
            }
            return r;
        case 3:
            return 1 + n->kids[f->c]->minlen + n->req_after[f->c + 1];
        case 4:
            return n->kids[f->c]->minlen + n->req_after[f->c + 1];
        default:
            return n->req_after[f->c + 1];
        }
    case K3_G_FREEOBJ:
        switch (f->a) {
        case 0:
            return 2;
        case 1:
            return f->c ? 1 : 3 + n->item->minlen + 1;
        case 2:
            return 1 + n->item->minlen + 1;
        case 3:
            return n->item->minlen + 1;
        default:
            return 1;
        }
    case K3_G_ARRAY: {
        int ml = n->item->minlen;
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
    if (n->kind == K3_G_STRING && f->a == 1 && !n->format && n->max < 0 && f->c == 0 &&
        f->b >= n->min)
        return *ascii_only = 1, 1;
    return 0;
}
