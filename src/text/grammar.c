/* grammar.c — grammar nodes and their builders (grammar.h). The
 * symbol-at-a-time matcher that walks them is grammar_match.c. */
#include "text/grammar.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "base/mem.h"
#include "text/grammar_num.h"
#include "text/regex.h"

#define BIG (INT_MAX / 4)

struct k3_gram {
    void **allocs; /* everything to free */
    size_t n, cap;
    size_t nodes, bytes; /* what the builders made: checked against the budget */
    k3_gnode *any, *any_obj, *any_arr, *any_str, *any_num, *any_bool, *any_null, *key_str;
};

static void *galloc(k3_gram *g, size_t n) {
    void *p = k3_xcalloc(1, n ? n : 1);
    g->bytes += n;
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

void *k3_gram_alloc(k3_gram *g, size_t n) {
    return galloc(g, n);
}

size_t k3_gram_nodes(const k3_gram *g) {
    return g->nodes;
}

size_t k3_gram_bytes(const k3_gram *g) {
    return g->bytes;
}

const char *k3_gram_over(const k3_gram *g) {
    if (g->nodes > K3_G_MAX_NODES) return "grammar nodes";
    if (g->bytes > K3_G_MAX_BYTES) return "grammar bytes";
    return NULL;
}

/* Minimal lengths saturate at BIG: with shared nodes, the smallest document
 * of a small grammar can be exponentially long (and never fits a budget). */
static int sat(long long v) {
    return v > BIG ? BIG : (int)v;
}

static void set_first(k3_gnode *n, int sym) {
    n->first[sym >> 6] |= 1ull << (sym & 63);
}
static void or_first(k3_gnode *n, const k3_gnode *k) {
    for (int i = 0; i < 5; i++) n->first[i] |= k->first[i];
}

static k3_gnode *node(k3_gram *g, k3_gkind kind) {
    k3_gnode *n = galloc(g, sizeof *n);
    g->nodes++;
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
        r->minlen = sat((long long)r->minlen + kids[i]->minlen);
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
        int m = sat((long long)r->lits[i].len + (r->kids[i] ? r->kids[i]->minlen : 0));
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
    r->minlen = sat((long long)min * child->minlen);
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

k3_gnode *k3_g_string_re(k3_gram *g, const k3_redfa *re) {
    k3_gnode *r = node(g, K3_G_STRING);
    r->re = re;
    r->minlen = sat(2LL + re->dist[0]);
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

k3_gnode *k3_g_number_range(k3_gram *g, int integer, const k3_numrange *rg) {
    k3_gnode *r = node(g, K3_G_NUMBER);
    r->integer = integer;
    r->ranged = 1;
    r->range = *rg;
    k3_gframe f = {.node = r};
    long long m = k3_gnum_rem(&f);
    if (m >= BIG) {
        k3_seterr("no %s the grammar can write lies in the range", integer ? "integer" : "number");
        return NULL;
    }
    r->minlen = (int)m;
    f.a = 1, f.c = 1; /* after a '-' */
    if (k3_gnum_rem(&f) < BIG) set_first(r, '-');
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
        int cost = sat((long long)r->lits[i].len + 1 + vals[i]->minlen);
        r->req_after[i] = sat((long long)r->req_after[i + 1] + (required[i] ? cost + 1 : 0));
        r->opt_min[i] = cost < r->opt_min[i + 1] ? cost : r->opt_min[i + 1];
        r->n_req[i] = r->n_req[i + 1] + (required[i] != 0);
    }
    r->minlen = sat(1LL + r->req_after[0] - (r->n_req[0] > 0));
    set_first(r, '{');
    return r;
}

k3_gnode *k3_g_object_tail(k3_gram *g, const char *const *keys, k3_gnode *const *vals,
                           const unsigned char *required, int n, int lead) {
    k3_gnode *r = k3_g_object(g, keys, vals, required, n);
    if (n == 0 || (lead != 1 && lead != 2)) return r;
    r->lead = lead;
    memset(r->first, 0, sizeof r->first);
    if (lead == 1) {
        r->minlen = sat((long long)vals[0]->minlen + r->req_after[1]);
        or_first(r, vals[0]);
        set_first(r, ' ');
    } else {
        r->minlen = r->req_after[1];
        if (n > 1) set_first(r, ',');
        if (r->n_req[1] == 0) set_first(r, '}');
    }
    return r;
}

k3_gnode *k3_g_freeobj(k3_gram *g, k3_gnode *value) {
    if (!g->key_str) g->key_str = k3_g_string(g, 0, -1, NULL);
    return k3_g_freeobj_keys(g, value, g->key_str);
}

k3_gnode *k3_g_freeobj_keys(k3_gram *g, k3_gnode *value, k3_gnode *key) {
    k3_gnode *r = node(g, K3_G_FREEOBJ);
    r->item = value;
    r->kids = galloc(g, sizeof *r->kids);
    r->kids[0] = key;
    r->minlen = 2;
    set_first(r, '{');
    return r;
}

k3_gnode *k3_g_array(k3_gram *g, k3_gnode *item, int min, int max) {
    k3_gnode *r = node(g, K3_G_ARRAY);
    r->item = item;
    r->min = min;
    r->max = max;
    r->minlen = sat(2 + (long long)min * item->minlen + (min > 0 ? min - 1 : 0));
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
