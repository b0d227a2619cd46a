/* utf8safe.h — UTF-8-safe formatting and truncation for messages.
 *
 * Every message that can reach a client (a JSON error body) or a log line is
 * built with these: bytes that are not well-formed UTF-8 are written as the
 * ASCII escape \xHH, a message that does not fit is cut on a character
 * boundary (never inside a multi-byte character or an escape) and ends with
 * "...", and the result is always NUL-terminated valid UTF-8. With
 * K3_UTF8_CTRL, control characters (C0, DEL, C1) are escaped too, so a client
 * cannot forge log lines with %0A or drive a terminal with ESC.
 *
 *   char msg[512];
 *   k3_utf8_snprintf(msg, sizeof msg, 0, "Unknown model '%s'.", client_bytes);
 *   char line[160];
 *   k3_utf8_escape(line, sizeof line, url, strlen(url), K3_UTF8_CTRL); */
#ifndef K3_BASE_UTF8SAFE_H
#define K3_BASE_UTF8SAFE_H

#include <stdarg.h>
#include <stddef.h>

#define K3_UTF8_CTRL 1 /* also escape control characters (for log lines) */

/* 1 if s[0..len) is well-formed UTF-8 (no overlongs, surrogates, > U+10FFFF). */
int k3_utf8_valid(const char *s, size_t len);

/* Length of the well-formed UTF-8 character at s[0..len), or 0 if the bytes
 * there are not one (invalid or cut). len must be > 0. */
size_t k3_utf8_char_len(const char *s, size_t len);

/* Copy src[0..len) into dst[0..cap) as described above. cap must be >= 1.
 * Returns strlen(dst). */
size_t k3_utf8_escape(char *dst, size_t cap, const char *src, size_t len, int flags);

/* printf, then k3_utf8_escape of the result into dst (cap >= 1): arguments
 * may hold any bytes. Returns strlen(dst). */
size_t k3_utf8_snprintf(char *dst, size_t cap, int flags, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
size_t k3_utf8_vsnprintf(char *dst, size_t cap, int flags, const char *fmt, va_list ap)
    __attribute__((format(printf, 4, 0)));

#endif
