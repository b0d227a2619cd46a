/* buf.h — a growable byte buffer, NUL-terminated after every append.
 *
 * Used for rendered prompts, JSON dumps and HTTP response bodies. Start from
 * a zeroed k3_buf; `s` stays NULL until the first append. */
#ifndef K3_BASE_BUF_H
#define K3_BASE_BUF_H

#include <stddef.h>

typedef struct {
    char *s; /* NUL-terminated after every append; NULL while empty */
    size_t n, cap;
} k3_buf;

void k3_buf_put(k3_buf *b, const char *s, size_t n);
void k3_buf_puts(k3_buf *b, const char *s);
void k3_buf_putc(k3_buf *b, char c);
/* Append a malloc'd string and free it (NULL appends nothing). */
void k3_buf_puts_free(k3_buf *b, char *s);
void k3_buf_free(k3_buf *b);

#endif
