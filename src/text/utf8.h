/* utf8.h — UTF-8 scanning and repair for the tokenizer and the streaming
 * detokenizer.
 *
 * Invalid input is described the way Python's errors="replace" sees it: each
 * "maximal subpart of an ill-formed subsequence" (Unicode §3.9, the longest
 * prefix of a would-be valid sequence, at least one byte) is one error. */
#ifndef K3_TEXT_UTF8_H
#define K3_TEXT_UTF8_H

#include <stddef.h>
#include <stdint.h>

enum { K3_UTF8_OK, K3_UTF8_INVALID, K3_UTF8_INCOMPLETE };

/* Look at the sequence starting at s[0] (n >= 1). Returns the number of
 * bytes it spans and sets *status: OK (*cp = the code point), INVALID (the
 * span is one maximal ill-formed subpart), INCOMPLETE (a valid prefix cut
 * off by the end of the buffer; the span is all n bytes). */
size_t k3_utf8_scan(const uint8_t *s, size_t n, uint32_t *cp, int *status);

/* Write the repaired form of s[0..n) to out (room for k3_utf8_repair_cap(n)):
 * each error becomes U+FFFD. Returns bytes written; with keep_tail, an
 * incomplete trailing sequence is not written and *held is its length. */
size_t k3_utf8_repair(char *out, const uint8_t *s, size_t n, int keep_tail, size_t *held);
size_t k3_utf8_repair_cap(size_t n);

/* Replace invalid UTF-8 like Python's errors="replace". Returns malloc'd,
 * NUL-terminated text; *out_len its length. */
char *k3_utf8_sanitize(const char *s, size_t len, size_t *out_len);

/* Python str.isspace() for one code point. */
int k3_cp_is_py_space(uint32_t cp);

#endif
