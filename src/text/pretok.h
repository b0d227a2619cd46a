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
 * the callback's non-zero value, or -1. Thread-safe: the match data and the
 * PCRE2 JIT stack (up to 64 MiB) are per thread, created on the thread's
 * first call and reused by all later ones, freed at thread exit. */
int k3_pretok_split(const k3_pretok *p, const char *s, size_t n, k3_piece_fn fn, void *ctx);

/* Process-wide counts of PCRE2 JIT stacks and match-data sets created so
 * far: at most one of each per thread that ever split text, whatever the
 * number of calls (tests/test_text_tok_linear.c asserts this). */
size_t k3_pretok_jit_stacks_created(void);
size_t k3_pretok_match_sets_created(void);

#endif
