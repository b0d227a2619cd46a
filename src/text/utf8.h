/* utf8.h — UTF-8 scanning for the tokenizer and the streaming detokenizer.
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

/* Python str.isspace() for one code point. */
int k3_cp_is_py_space(uint32_t cp);

#endif
