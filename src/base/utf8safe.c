/* utf8safe.c — UTF-8-safe escaping, formatting and truncation (utf8safe.h). */
#include "base/utf8safe.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

size_t k3_utf8_char_len(const char *s, size_t len) {
    const unsigned char *p = (const unsigned char *)s;
    unsigned c = p[0];
    size_t n;
    unsigned min;
    if (c < 0x80) return 1;
    if ((c & 0xE0) == 0xC0)
        n = 1, min = 0x80, c &= 0x1F;
    else if ((c & 0xF0) == 0xE0)
        n = 2, min = 0x800, c &= 0x0F;
    else if ((c & 0xF8) == 0xF0)
        n = 3, min = 0x10000, c &= 0x07;
    else
        return 0;
    if (n >= len) return 0; /* cut */
    for (size_t k = 1; k <= n; k++) {
        if ((p[k] & 0xC0) != 0x80) return 0;
        c = (c << 6) | (p[k] & 0x3F);
    }
    if (c < min || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF)) return 0;
    return n + 1;
}

int k3_utf8_valid(const char *s, size_t len) {
    size_t i = 0;
    while (i < len) {
        size_t n = k3_utf8_char_len(s + i, len - i);
        if (!n) return 0;
        i += n;
    }
    return 1;
}

/* A control character that a log line must not carry raw: C0, DEL, C1. */
static int is_ctrl(const unsigned char *p, size_t n) {
    if (n == 1) return p[0] < 0x20 || p[0] == 0x7F;
    return n == 2 && p[0] == 0xC2 && p[1] < 0xA0; /* U+0080..U+009F */
}

size_t k3_utf8_escape(char *dst, size_t cap, const char *src, size_t len, int flags) {
    static const char hex[] = "0123456789abcdef";
    if (cap == 0) return 0;
    size_t room = cap - 1;    /* bytes available before the NUL */
    size_t pos = 0, mark = 0; /* mark: last unit boundary that leaves room for "..." */
    int cut = 0;
    if (!src) len = 0;
    for (size_t i = 0; i < len;) {
        const unsigned char *p = (const unsigned char *)src + i;
        size_t n = k3_utf8_char_len(src + i, len - i);
        int esc = n == 0 || ((flags & K3_UTF8_CTRL) && is_ctrl(p, n));
        size_t unit = esc ? 4 * (n ? n : 1) : n;
        if (pos + unit > room) {
            cut = 1;
            break;
        }
        if (esc) {
            size_t k = n ? n : 1; /* escape the whole control character, or one bad byte */
            for (size_t b = 0; b < k; b++) {
                dst[pos++] = '\\';
                dst[pos++] = 'x';
                dst[pos++] = hex[p[b] >> 4];
                dst[pos++] = hex[p[b] & 15];
            }
            i += k;
        } else {
            memcpy(dst + pos, p, n);
            pos += n;
            i += n;
        }
        if (pos + 3 <= room) mark = pos;
    }
    if (cut && room >= 3) {
        pos = mark;
        memcpy(dst + pos, "...", 3);
        pos += 3;
    }
    dst[pos] = 0;
    return pos;
}

size_t k3_utf8_vsnprintf(char *dst, size_t cap, int flags, const char *fmt, va_list ap) {
    if (cap == 0) return 0;
    char *tmp = NULL;
    int n = vasprintf(&tmp, fmt, ap);
    if (n < 0) {
        /* out of memory: still a valid, NUL-terminated message */
        return k3_utf8_escape(dst, cap, "(message unavailable)", 21, 0);
    }
    size_t r = k3_utf8_escape(dst, cap, tmp, (size_t)n, flags);
    free(tmp);
    return r;
}

size_t k3_utf8_snprintf(char *dst, size_t cap, int flags, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    size_t r = k3_utf8_vsnprintf(dst, cap, flags, fmt, ap);
    va_end(ap);
    return r;
}
