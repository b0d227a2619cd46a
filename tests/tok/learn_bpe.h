/* learn_bpe.h — test helper: learns a byte-level BPE vocabulary from a text
 * corpus and writes it in the tiktoken.model format (base64 + rank per
 * line), so tests exercise the real loader with real merges.
 *
 * Ranks 0..255 are the single bytes (in an order that is not byte order,
 * so no code can assume rank == byte); then, nmerges times, the most
 * frequent adjacent pair inside the corpus' pre-token pieces is merged into
 * a new rank (ties: the smallest pair of ranks). Pieces come from the real
 * K3 pre-tokenizer. Include once per program (static functions). */
#ifndef K3_TESTS_LEARN_BPE_H
#define K3_TESTS_LEARN_BPE_H

#include "base/mem.h"
#include "text/pretok.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    int ntok;
    uint8_t *bytes[1024];
    size_t len[1024];
} lb_vocab;

typedef struct {
    int32_t *ids; /* all pieces' tokens, pieces separated by -1 */
    size_t n, cap;
} lb_stream;

static void lb_push(lb_stream *s, int32_t v) {
    if (s->n == s->cap)
        s->ids = k3_xrealloc(s->ids, sizeof(int32_t) * (s->cap = s->cap ? 2 * s->cap : 4096));
    s->ids[s->n++] = v;
}

typedef struct {
    lb_stream *s;
    const int *rank_of_byte;
} lb_piece_ctx;

static int lb_piece(void *vctx, const char *p, size_t n) {
    lb_piece_ctx *c = vctx;
    for (size_t i = 0; i < n; i++) lb_push(c->s, c->rank_of_byte[(uint8_t)p[i]]);
    lb_push(c->s, -1);
    return 0;
}

/* Most frequent adjacent pair; 0 if none occurs twice. */
static int lb_best_pair(const lb_stream *s, int ntok, int *a, int *b) {
    uint32_t *count = k3_xcalloc((size_t)ntok * ntok, sizeof(uint32_t));
    for (size_t i = 0; i + 1 < s->n; i++)
        if (s->ids[i] >= 0 && s->ids[i + 1] >= 0) count[(size_t)s->ids[i] * ntok + s->ids[i + 1]]++;
    uint32_t best = 1;
    for (int x = 0; x < ntok; x++)
        for (int y = 0; y < ntok; y++)
            if (count[(size_t)x * ntok + y] > best)
                best = count[(size_t)x * ntok + y], *a = x, *b = y;
    free(count);
    return best > 1;
}

static void lb_replace(lb_stream *s, int a, int b, int merged) {
    size_t w = 0;
    for (size_t i = 0; i < s->n; i++) {
        if (i + 1 < s->n && s->ids[i] == a && s->ids[i + 1] == b) {
            s->ids[w++] = merged;
            i++;
        } else {
            s->ids[w++] = s->ids[i];
        }
    }
    s->n = w;
}

static int lb_find(const lb_vocab *v, const uint8_t *b, size_t n) {
    for (int i = 0; i < v->ntok; i++)
        if (v->len[i] == n && !memcmp(v->bytes[i], b, n)) return i;
    return -1;
}

/* Learn up to nmerges merges (nmerges <= 700) from corpus. */
static void lb_learn(lb_vocab *v, const char *corpus, size_t len, int nmerges) {
    int rank_of_byte[256];
    v->ntok = 256;
    for (int r = 0; r < 256; r++) { /* byte (r * 167 + 13) mod 256: a permutation */
        int byte = (r * 167 + 13) & 255;
        v->bytes[r] = k3_xmalloc(1);
        v->bytes[r][0] = (uint8_t)byte;
        v->len[r] = 1;
        rank_of_byte[byte] = r;
    }
    lb_stream s = {0};
    k3_pretok *pre = k3_pretok_new();
    lb_piece_ctx c = {&s, rank_of_byte};
    k3_pretok_split(pre, corpus, len, lb_piece, &c);
    k3_pretok_free(pre);
    for (int m = 0; m < nmerges; m++) {
        int a = 0, b = 0;
        if (!lb_best_pair(&s, v->ntok, &a, &b)) break;
        size_t n = v->len[a] + v->len[b];
        uint8_t *cat = k3_xmalloc(n);
        memcpy(cat, v->bytes[a], v->len[a]);
        memcpy(cat + v->len[a], v->bytes[b], v->len[b]);
        int merged = lb_find(v, cat, n);
        if (merged < 0) {
            merged = v->ntok++;
            v->bytes[merged] = cat;
            v->len[merged] = n;
        } else {
            free(cat);
        }
        lb_replace(&s, a, b, merged);
    }
    free(s.ids);
}

static void lb_free(lb_vocab *v) {
    for (int i = 0; i < v->ntok; i++) free(v->bytes[i]);
    v->ntok = 0;
}

static void lb_base64(const uint8_t *b, size_t n, char *out) {
    static const char a[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    size_t w = 0;
    for (size_t i = 0; i < n; i += 3) {
        uint32_t x = (uint32_t)b[i] << 16 | (i + 1 < n ? (uint32_t)b[i + 1] << 8 : 0) |
                     (i + 2 < n ? b[i + 2] : 0);
        out[w++] = a[x >> 18 & 63];
        out[w++] = a[x >> 12 & 63];
        out[w++] = i + 1 < n ? a[x >> 6 & 63] : '=';
        out[w++] = i + 2 < n ? a[x & 63] : '=';
    }
    out[w] = 0;
}

/* The vocabulary as tiktoken.model text (malloc'd, NUL-terminated). */
static char *lb_ranks_text(const lb_vocab *v, size_t *len) {
    size_t cap = 64, n = 0;
    for (int i = 0; i < v->ntok; i++) cap += v->len[i] * 2 + 24;
    char *out = k3_xmalloc(cap);
    for (int i = 0; i < v->ntok; i++) {
        char b64[2100];
        lb_base64(v->bytes[i], v->len[i], b64);
        n += (size_t)snprintf(out + n, cap - n, "%s %d\n", b64, i);
    }
    *len = n;
    return out;
}

#endif
