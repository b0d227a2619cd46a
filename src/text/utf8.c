/* utf8.c — UTF-8 scanning and repair (see utf8.h). */
#include "text/utf8.h"

#include <string.h>

#include "base/mem.h"

/* Allowed range of the second byte for a lead byte (Unicode Table 3-7);
 * the remaining continuation bytes are always 80..BF. */
static int second_byte_ok(uint8_t lead, uint8_t b) {
    if (lead == 0xE0) return b >= 0xA0 && b <= 0xBF;
    if (lead == 0xED) return b >= 0x80 && b <= 0x9F;
    if (lead == 0xF0) return b >= 0x90 && b <= 0xBF;
    if (lead == 0xF4) return b >= 0x80 && b <= 0x8F;
    return b >= 0x80 && b <= 0xBF;
}

static size_t sequence_length(uint8_t lead) {
    if (lead < 0x80) return 1;
    if (lead >= 0xC2 && lead <= 0xDF) return 2;
    if (lead >= 0xE0 && lead <= 0xEF) return 3;
    if (lead >= 0xF0 && lead <= 0xF4) return 4;
    return 0; /* 80..C1, F5..FF can never start a sequence */
}

size_t k3_utf8_scan(const uint8_t *s, size_t n, uint32_t *cp, int *status) {
    uint8_t lead = s[0];
    size_t need = sequence_length(lead);
    if (need == 1) {
        *cp = lead;
        *status = K3_UTF8_OK;
        return 1;
    }
    if (need == 0) {
        *status = K3_UTF8_INVALID;
        return 1;
    }
    uint32_t v = lead & (0x7F >> need);
    for (size_t i = 1; i < need; i++) {
        if (i >= n) {
            *status = K3_UTF8_INCOMPLETE;
            return n;
        }
        uint8_t b = s[i];
        int ok = i == 1 ? second_byte_ok(lead, b) : (b >= 0x80 && b <= 0xBF);
        if (!ok) {
            *status = K3_UTF8_INVALID;
            return i;
        }
        v = (v << 6) | (b & 0x3F);
    }
    *cp = v;
    *status = K3_UTF8_OK;
    return need;
}

int k3_cp_is_py_space(uint32_t c) {
    if (c < 0x80) return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20);
    return c == 0x85 || c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 ||
           c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

static const char REPLACEMENT[3] = {(char)0xEF, (char)0xBF, (char)0xBD}; /* U+FFFD */

size_t k3_utf8_repair(char *out, const uint8_t *s, size_t n, int keep_tail, size_t *held) {
    size_t w = 0, i = 0;
    *held = 0;
    while (i < n) {
        uint32_t cp;
        int st;
        size_t span = k3_utf8_scan(s + i, n - i, &cp, &st);
        if (st == K3_UTF8_OK) {
            memcpy(out + w, s + i, span);
            w += span;
        } else if (st == K3_UTF8_INCOMPLETE && keep_tail) {
            *held = span;
            break;
        } else {
            memcpy(out + w, REPLACEMENT, 3);
            w += 3;
        }
        i += span;
    }
    return w;
}

/* Worst case: every byte becomes a 3-byte U+FFFD. */
size_t k3_utf8_repair_cap(size_t n) {
    return 3 * n + 1;
}

char *k3_utf8_sanitize(const char *s, size_t len, size_t *out_len) {
    char *out = k3_xmalloc(k3_utf8_repair_cap(len));
    size_t held;
    size_t w = k3_utf8_repair(out, (const uint8_t *)s, len, 0, &held);
    out[w] = 0;
    if (out_len) *out_len = w;
    return out;
}
