/* pretok.h — the K3 pre-tokenizer: splits text into the pieces that BPE
 * sees, with the PCRE2 form of K3's pat_str (chat.md §1.4: UTF + UCP, JIT,
 * \p{sc=Han}, explicit White_Space set). */
#ifndef K3_TEXT_PRETOK_H
#define K3_TEXT_PRETOK_H

#include <stddef.h>

typedef struct k3_pretok k3_pretok;

/* The pattern exactly as passed to PCRE2 (for docs and tests). */
extern const char k3_pretok_pattern[];

/* Compile the K3 pattern. NULL + k3_errmsg on failure. */
k3_pretok *k3_pretok_new(void);
void k3_pretok_free(k3_pretok *p);

/* Called once per piece, in order; return non-zero to stop. */
typedef int (*k3_piece_fn)(void *ctx, const char *piece, size_t len);

/* Split s[0..n) (must be valid UTF-8) into pieces. The pieces tile the
 * input; if the pattern ever failed to (a bug), -1 + k3_errmsg. Returns 0,
 * the callback's non-zero value, or -1. */
int k3_pretok_split(const k3_pretok *p, const char *s, size_t n, k3_piece_fn fn, void *ctx);

#endif
