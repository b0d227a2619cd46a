/* regex.h — a safe regular-expression dialect compiled to a DFA over
 * printable ASCII, for JSON Schema `pattern` and `format` (jsonschema.c).
 *
 * Dialect (ECMAScript syntax, the regular subset): literals, `.`, classes
 * `[a-z0-9_]` / `[^...]`, escapes `\d \w \s \D \W \S` and escaped
 * punctuation, groups `(...)` `(?:...)` `(?<name>...)`, `|`, quantifiers
 * `* + ? {n} {n,} {n,m}` (lazy forms too: same language), `^` only at the
 * start and `$` only at the end, and a positive lookahead `(?=...)` only
 * right after a leading `^` (it is intersected with the rest). No
 * backreferences, no other lookaround, no `\b`. Patterns are unanchored as
 * JSON Schema says: without `^`/`$` the match may start/end anywhere.
 *
 * The DFA only writes printable ASCII (0x20..0x7E): a string it accepts
 * always matches the pattern; characters outside that set are never
 * produced. Sizes are bounded (K3_RE_MAX_NFA, K3_RE_MAX_STATES). */
#ifndef K3_TEXT_REGEX_H
#define K3_TEXT_REGEX_H

#include <stddef.h>
#include <stdint.h>

#include "text/grammar.h"

#define K3_RE_SIGMA 95 /* 0x20..0x7E */
#define K3_RE_MAX_NFA 20000
#define K3_RE_MAX_PRODUCT 16000 /* states of an intersection (below 32768 / 2) */
#define K3_RE_MAX_STATES 2000   /* below half of the 4096 hash slots in regex.c */

struct k3_redfa {
    int n;              /* states; 0 is the start */
    int16_t *next;      /* [n][K3_RE_SIGMA]: next state or -1 (dead ends removed) */
    unsigned char *acc; /* [n] accepting */
    int *dist;          /* [n] fewest characters to an accepting state */
};

/* Compile pattern (NUL-terminated), intersected with within (a DFA, or
 * NULL). NULL + message in err; *too_big set when a size bound was passed
 * rather than a syntax refused. With within, it is intersected with the
 * lookahead first and the result minimized before the body joins: a length
 * lookahead that within already implies (zod's hostname `^(?=.{1,253}\.?$)`
 * beside a shorter format) then costs no states. */
k3_redfa *k3_re_compile(k3_gram *g, const char *pattern, k3_redfa *within, char *err, size_t cap,
                        int *too_big);
/* Strings both accept (minimized when acyclic). NULL + message as above. */
k3_redfa *k3_re_intersect(k3_gram *g, const k3_redfa *a, const k3_redfa *b, char *err, size_t cap,
                          int *too_big);

/* A copy of d in g, with equivalent states merged when d has no cycle
 * (regex_min.c). */
k3_redfa *k3_re_minimize(k3_gram *g, const k3_redfa *d);

/* The shortest and longest accepted lengths (longest -1: unbounded). */
void k3_re_lengths(const k3_redfa *d, int *shortest, int *longest);

#endif
