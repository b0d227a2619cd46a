/* buf.c — growable byte buffer (see buf.h). */
#include "base/buf.h"
#include "base/mem.h"

#include <stdlib.h>
#include <string.h>

void k3_buf_put(k3_buf *b, const char *s, size_t n) {
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 64;
        while (cap < b->n + n + 1) cap *= 2;
        b->s = k3_xrealloc(b->s, cap);
        b->cap = cap;
    }
    if (n) memcpy(b->s + b->n, s, n);
    b->n += n;
    b->s[b->n] = 0;
}

void k3_buf_puts(k3_buf *b, const char *s) {
    k3_buf_put(b, s, strlen(s));
}

void k3_buf_putc(k3_buf *b, char c) {
    k3_buf_put(b, &c, 1);
}

void k3_buf_puts_free(k3_buf *b, char *s) {
    if (!s) return;
    k3_buf_put(b, s, strlen(s));
    free(s);
}

void k3_buf_free(k3_buf *b) {
    free(b->s);
    b->s = NULL;
    b->n = b->cap = 0;
}
