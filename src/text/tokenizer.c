/* tokenizer.c — encoding and decoding with a built tokenizer (chat.md
 * §1.5–1.7). Construction lives in tok_load.c.
 *
 * encode = 400 000-code-point windows -> 25 000-run whitespace split ->
 * control-token matching (if allowed) -> K3 pattern pieces -> rank lookup,
 * else rank BPE (cached per piece). */
#include "base/err.h"
#include "base/mem.h"
#include "text/tok_internal.h"
#include "text/utf8.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WINDOW_CODE_POINTS 400000
#define MAX_RUN_CODE_POINTS 25000

int k3_tok_vocab_size(const k3_tokenizer *t) {
    return t->block + t->block_len;
}
int k3_tok_num_base(const k3_tokenizer *t) {
    return t->num_base;
}
int k3_tok_block_start(const k3_tokenizer *t) {
    return t->block;
}
int k3_tok_is_loaded(const k3_tokenizer *t) {
    return t->loaded;
}

/* ---- pieces ------------------------------------------------------------ */

static uint64_t cache_hash(const uint8_t *p, size_t n) {
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 1099511628211ull;
    return h;
}

/* Look the piece up in the cache; 1 and ids appended on a hit. A busy lock
 * is a miss (never wait: the cache only saves time). */
static int cache_get(k3_tokenizer *t, uint64_t h, const uint8_t *p, size_t n, k3_ids *out) {
    if (pthread_mutex_trylock(&t->cache_lock)) return 0;
    piece_cache_ent *e = &t->cache[h % PIECE_CACHE_SLOTS];
    int hit = e->key && e->hash == h && e->key_len == n && !memcmp(e->key, p, n);
    if (hit)
        for (uint32_t i = 0; i < e->n; i++) k3_ids_push(out, e->ids[i]);
    pthread_mutex_unlock(&t->cache_lock);
    return hit;
}

static void cache_put(k3_tokenizer *t, uint64_t h, const uint8_t *p, size_t n, const int32_t *ids,
                      size_t nids) {
    if (pthread_mutex_trylock(&t->cache_lock)) return;
    piece_cache_ent *e = &t->cache[h % PIECE_CACHE_SLOTS];
    free(e->key);
    free(e->ids);
    e->hash = h;
    e->key = k3_xmalloc(n);
    memcpy(e->key, p, n);
    e->key_len = (uint32_t)n;
    e->ids = k3_xmalloc(sizeof(int32_t) * nids);
    memcpy(e->ids, ids, sizeof(int32_t) * nids);
    e->n = (uint32_t)nids;
    pthread_mutex_unlock(&t->cache_lock);
}

/* One pre-token piece: a rank as a whole, else BPE. */
static int encode_piece(k3_tokenizer *t, const uint8_t *p, size_t n, k3_ids *out) {
    int32_t r = k3_ranks_find(&t->ranks, p, n);
    if (r >= 0) {
        k3_ids_push(out, r);
        return 0;
    }
    if (n > PIECE_CACHE_MAX_KEY) return k3_bpe_merge(&t->ranks, p, n, out);
    uint64_t h = cache_hash(p, n);
    if (cache_get(t, h, p, n, out)) return 0;
    size_t before = out->n;
    if (k3_bpe_merge(&t->ranks, p, n, out)) return -1;
    cache_put(t, h, p, n, out->ids + before, out->n - before);
    return 0;
}

typedef struct {
    k3_tokenizer *t;
    k3_ids *out;
} piece_ctx;

static int piece_cb(void *vctx, const char *piece, size_t len) {
    piece_ctx *c = vctx;
    return encode_piece(c->t, (const uint8_t *)piece, len, c->out);
}

/* Ordinary text (no control tokens). Valid UTF-8 runs go through the
 * pattern; each maximal ill-formed subsequence is a piece of its own. */
static int encode_ordinary(k3_tokenizer *t, const uint8_t *s, size_t n, k3_ids *out) {
    if (!t->loaded) { /* byte-level: no merges exist, so the pieces do not matter */
        for (size_t i = 0; i < n; i++) k3_ids_push(out, s[i]);
        return 0;
    }
    piece_ctx c = {t, out};
    size_t run = 0, i = 0;
    while (i < n) {
        if (s[i] < 0x80) {
            i++;
            continue;
        }
        uint32_t cp;
        int st;
        size_t span = k3_utf8_scan(s + i, n - i, &cp, &st);
        if (st == K3_UTF8_OK) {
            i += span;
            continue;
        }
        if (k3_pretok_split(t->pre, (const char *)s + run, i - run, piece_cb, &c)) return -1;
        if (encode_piece(t, s + i, span, out)) return -1;
        i += span;
        run = i;
    }
    return k3_pretok_split(t->pre, (const char *)s + run, n - run, piece_cb, &c);
}

/* ---- control tokens ---------------------------------------------------- */

/* The control token spelled at s[0..n), longest first; -1 if none. */
static int match_special(const k3_tokenizer *t, const uint8_t *s, size_t n) {
    /* by_first is sorted by first byte: binary search the group */
    int lo = 0, hi = t->block_len;
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if ((uint8_t)t->specials[t->by_first[mid]].text[0] < s[0])
            lo = mid + 1;
        else
            hi = mid;
    }
    for (int i = lo; i < t->block_len; i++) {
        const k3_special_token *sp = &t->specials[t->by_first[i]];
        if ((uint8_t)sp->text[0] != s[0]) break;
        if (sp->len <= n && !memcmp(sp->text, s, sp->len)) return t->by_first[i];
    }
    return -1;
}

static int encode_slice(k3_tokenizer *t, const uint8_t *s, size_t n, int allow_special,
                        k3_ids *out) {
    if (!allow_special) return encode_ordinary(t, s, n, out);
    size_t start = 0;
    for (size_t i = 0; i < n; i++) {
        if (!t->starts_special[s[i]]) continue;
        int k = match_special(t, s + i, n - i);
        if (k < 0) continue;
        if (encode_ordinary(t, s + start, i - start, out)) return -1;
        k3_ids_push(out, t->specials[k].id);
        i += t->specials[k].len - 1;
        start = i + 1;
    }
    return encode_ordinary(t, s + start, n - start, out);
}

/* ---- windows and long runs (tokenization_kimi.py) ---------------------- */

/* Python str.isspace for ASCII (the hot case of the slicing walk). */
static const uint8_t ascii_space[128] = {
    ['\t'] = 1, ['\n'] = 1, ['\v'] = 1, ['\f'] = 1, ['\r'] = 1,
    [0x1C] = 1, [0x1D] = 1, [0x1E] = 1, [0x1F] = 1, [' '] = 1,
};

/* Slice boundaries bounds[0..n] (bounds[0] = 0, bounds[n] = len). Walks
 * code points; an ill-formed subsequence counts as one (as its U+FFFD
 * would in Python). Cuts before the code point that starts a new
 * 400 000-code-point window or makes a run of same-class (space /
 * non-space) code points longer than 25 000. */
static size_t *slice_bounds(const uint8_t *s, size_t len, size_t *nslices) {
    size_t cap = 8, n = 0;
    size_t *b = k3_xmalloc(sizeof(size_t) * cap);
    b[n++] = 0;
    size_t i = 0, window_cps = 0, run_len = 0;
    int run_space = 0;
    while (i < len) {
        int space;
        size_t span = 1;
        if (s[i] < 0x80) {
            space = ascii_space[s[i]];
        } else {
            uint32_t cp = 0xFFFD;
            int st;
            span = k3_utf8_scan(s + i, len - i, &cp, &st);
            space = st == K3_UTF8_OK && k3_cp_is_py_space(cp);
        }
        int cut = 0;
        if (window_cps == WINDOW_CODE_POINTS) {
            cut = 1;
            window_cps = 0;
        }
        if (window_cps == 0) { /* a window starts: the run class is its first cp's */
            run_space = space;
            run_len = 0;
        }
        if (space != run_space) {
            run_space = space;
            run_len = 1;
        } else if (++run_len > MAX_RUN_CODE_POINTS) {
            cut = 1;
            run_len = 1;
        }
        if (cut && i > 0) {
            if (n + 1 >= cap) b = k3_xrealloc(b, sizeof(size_t) * (cap *= 2));
            b[n++] = i;
        }
        window_cps++;
        i += span;
    }
    b[n] = len;
    *nslices = n;
    return b;
}

/* Inputs this large with several slices encode their slices in parallel:
 * slices are independent by the reference's definition. */
#define PARALLEL_MIN_BYTES (1u << 20)

static int encode_slices_parallel(k3_tokenizer *t, const uint8_t *s, const size_t *b, size_t n,
                                  int allow_special, k3_ids *out) {
    k3_ids *parts = k3_xcalloc(n, sizeof *parts);
    int failed = 0;
    char msg[1024] = "";
#pragma omp parallel for schedule(dynamic, 1)
    for (long k = 0; k < (long)n; k++) {
        if (encode_slice(t, s + b[k], b[k + 1] - b[k], allow_special, &parts[k])) {
#pragma omp critical(k3_tok_encode_error)
            if (!failed) { /* error messages are thread-local: carry the first one out */
                failed = 1;
                snprintf(msg, sizeof msg, "%s", k3_errmsg());
            }
        }
    }
    for (size_t k = 0; k < n; k++) {
        for (size_t j = 0; j < parts[k].n && !failed; j++) k3_ids_push(out, parts[k].ids[j]);
        k3_ids_free(&parts[k]);
    }
    free(parts);
    return failed ? k3_seterr("%s", msg) : 0;
}

int k3_tok_encode_append(const k3_tokenizer *ct, const char *text, size_t len, int allow_special,
                         k3_ids *out) {
    k3_tokenizer *t = (k3_tokenizer *)ct; /* only the locked cache is written */
    const uint8_t *s = (const uint8_t *)text;
    size_t n;
    size_t *b = slice_bounds(s, len, &n);
    int rc = 0;
    if (n > 1 && len >= PARALLEL_MIN_BYTES)
        rc = encode_slices_parallel(t, s, b, n, allow_special, out);
    else
        for (size_t k = 0; k < n && !rc; k++)
            rc = encode_slice(t, s + b[k], b[k + 1] - b[k], allow_special, out);
    free(b);
    return rc;
}

int k3_tok_encode(const k3_tokenizer *t, const char *text, size_t len, int allow_special,
                  int32_t **ids, size_t *n) {
    k3_ids v = {0};
    if (k3_tok_encode_append(t, text, len, allow_special, &v)) {
        k3_ids_free(&v);
        *ids = NULL;
        *n = 0;
        return -1;
    }
    *ids = v.ids;
    *n = v.n;
    return 0;
}

/* ---- decoding and lookups ---------------------------------------------- */

const char *k3_tok_token_bytes(const k3_tokenizer *t, int32_t id, size_t *len) {
    if (id >= 0 && id < t->num_base) {
        *len = t->ranks.off[id + 1] - t->ranks.off[id];
        return (const char *)t->ranks.bytes + t->ranks.off[id];
    }
    if (k3_tok_is_special(t, id)) {
        *len = t->specials[id - t->block].len;
        return t->specials[id - t->block].text;
    }
    *len = 0;
    return NULL;
}

int k3_tok_is_special(const k3_tokenizer *t, int32_t id) {
    return id >= t->block && id < t->block + t->block_len;
}

int k3_tok_special_flag(const k3_tokenizer *t, int32_t id) {
    return k3_tok_is_special(t, id) && t->specials[id - t->block].special_flag;
}

int32_t k3_tok_special_id(const k3_tokenizer *t, const char *spelling) {
    size_t n = strlen(spelling);
    if (n == 0) return -1;
    int k = match_special(t, (const uint8_t *)spelling, n);
    return k >= 0 && t->specials[k].len == n ? t->specials[k].id : -1;
}

const k3_special_token *k3_tok_specials(const k3_tokenizer *t, size_t *n) {
    *n = (size_t)t->block_len;
    return t->specials;
}

char *k3_tok_decode_bytes(const k3_tokenizer *t, const int32_t *ids, size_t n, int skip_special,
                          size_t *len) {
    size_t total = 0, bl;
    for (size_t i = 0; i < n; i++) {
        if (skip_special && k3_tok_special_flag(t, ids[i])) continue;
        if (k3_tok_token_bytes(t, ids[i], &bl)) total += bl;
    }
    char *out = k3_xmalloc(total + 1);
    size_t w = 0;
    for (size_t i = 0; i < n; i++) {
        if (skip_special && k3_tok_special_flag(t, ids[i])) continue;
        const char *b = k3_tok_token_bytes(t, ids[i], &bl);
        if (b) memcpy(out + w, b, bl), w += bl;
    }
    out[w] = 0;
    if (len) *len = w;
    return out;
}

char *k3_tok_decode(const k3_tokenizer *t, const int32_t *ids, size_t n, int skip_special,
                    size_t *len) {
    size_t rn;
    char *raw = k3_tok_decode_bytes(t, ids, n, skip_special, &rn);
    char *clean = k3_utf8_sanitize(raw, rn, len);
    free(raw);
    return clean;
}
