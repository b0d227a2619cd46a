/* stop.c — stop-string matching over streamed text (see stop.h). */
#include "gen/stop.h"

#include "base/mem.h"

#include <stdlib.h>
#include <string.h>

struct k3_stopper {
    char **stop;
    size_t *len;
    int n;
    char *pend; /* held text + what is being returned */
    size_t pend_len, cap;
    size_t emit_from; /* pend[0..emit_from) was returned by the last call */
};

k3_stopper *k3_stopper_new(const char *const *stops, int n) {
    k3_stopper *s = k3_xcalloc(1, sizeof *s);
    s->stop = k3_xcalloc(n > 0 ? (size_t)n : 1, sizeof *s->stop);
    s->len = k3_xcalloc(n > 0 ? (size_t)n : 1, sizeof *s->len);
    for (int i = 0; i < n; i++)
        if (stops[i] && *stops[i]) {
            s->stop[s->n] = k3_xstrdup(stops[i]);
            s->len[s->n++] = strlen(stops[i]);
        }
    s->cap = 64;
    s->pend = k3_xmalloc(s->cap); /* never NULL: memmove/memcpy below need a buffer */
    return s;
}

void k3_stopper_free(k3_stopper *s) {
    if (!s) return;
    for (int i = 0; i < s->n; i++) free(s->stop[i]);
    free(s->stop);
    free(s->len);
    free(s->pend);
    free(s);
}

/* Drop what the previous call returned, keep the held tail at the front. */
static void consume_emitted(k3_stopper *s) {
    memmove(s->pend, s->pend + s->emit_from, s->pend_len - s->emit_from);
    s->pend_len -= s->emit_from;
    s->emit_from = 0;
}

void k3_stopper_reset(k3_stopper *s) {
    s->pend_len = s->emit_from = 0;
}

/* Earliest position of a complete stop string in pend, or -1. */
static long find_stop(const k3_stopper *s) {
    long best = -1;
    for (int i = 0; i < s->n; i++) {
        if (s->len[i] > s->pend_len) continue;
        const char *p = memmem(s->pend, s->pend_len, s->stop[i], s->len[i]);
        if (p && (best < 0 || p - s->pend < best)) best = p - s->pend;
    }
    return best;
}

/* Length of the longest suffix of pend that is a proper prefix of a stop string. */
static size_t held_tail(const k3_stopper *s) {
    size_t best = 0;
    for (int i = 0; i < s->n; i++) {
        size_t max = s->len[i] - 1 < s->pend_len ? s->len[i] - 1 : s->pend_len;
        for (size_t h = max; h > best; h--)
            if (!memcmp(s->pend + s->pend_len - h, s->stop[i], h)) {
                best = h;
                break;
            }
    }
    return best;
}

const char *k3_stopper_push(k3_stopper *s, const char *text, size_t len, size_t *out_len,
                            int *hit) {
    consume_emitted(s);
    if (s->pend_len + len + 1 > s->cap) {
        s->cap = (s->pend_len + len + 1) * 2;
        s->pend = k3_xrealloc(s->pend, s->cap);
    }
    if (len) memcpy(s->pend + s->pend_len, text, len);
    s->pend_len += len;
    long at = find_stop(s);
    *hit = at >= 0;
    if (*hit) {
        *out_len = (size_t)at;
        s->pend_len = (size_t)at; /* the stop string and what follows are dropped */
    } else {
        *out_len = s->pend_len - held_tail(s);
    }
    s->emit_from = *out_len;
    return s->pend;
}

const char *k3_stopper_flush(k3_stopper *s, size_t *out_len) {
    consume_emitted(s);
    *out_len = s->pend_len;
    s->emit_from = s->pend_len;
    return s->pend;
}
