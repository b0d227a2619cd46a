/* draft.h — drafts for speculative decoding from the sequence's own tokens
 * (prompt lookup / n-gram matching).
 *
 * Every token of the sequence (prompt and generated) is appended once; an
 * index maps the hash of the last n tokens (n = 6, 4, 3) to the most recent
 * position that followed them, and each position links to the one that
 * followed the same n-gram before it. A proposal copies what followed the
 * earlier occurrence whose match with the end of the sequence is longest:
 * the copy that the previous drafts followed, while the text keeps agreeing
 * with it (an edited file copied back, a quoted argument), or else the best
 * of the last K3_DRAFT_CHAIN occurrences of the longest n-gram that has one,
 * so that a line repeated across a file is copied from the place whose
 * context agrees. A long copy that breaks off resumes a few tokens later,
 * and a substitution it made twice (a newline quoted as \n) is applied to
 * later drafts from the copy. A repeat that runs into the present continues with its
 * own period. Appending and proposing cost a bounded number of probes
 * whatever the context (each lookup probes at most K3_DRAFT_PROBES slots; a
 * full neighbourhood overwrites, which loses a draft, never time; at most
 * K3_DRAFT_CHAIN x K3_DRAFT_MATCH_MAX tokens compared), and memory is linear
 * in the tokens appended.
 *
 * The number of drafts adapts per sequence: it grows while drafts are
 * accepted and falls to 0 (plain decoding) after a step that kept nothing or
 * while less than half the drafts are kept, with a probe of one draft after
 * a backoff that doubles while probes keep missing. */
#ifndef K3_GEN_DRAFT_H
#define K3_GEN_DRAFT_H

#include <stddef.h>
#include <stdint.h>

#define K3_DRAFT_PROBES 8
#define K3_DRAFT_MAX 16
/* Earlier occurrences of an n-gram weighed per proposal, and the longest
 * match measured (tokens compared back from each): bounded work per step. */
#define K3_DRAFT_CHAIN 8
#define K3_DRAFT_MATCH_MAX 64

typedef struct k3_drafter k3_drafter;

/* A drafter proposing at most kmax (1..K3_DRAFT_MAX) tokens per step. */
k3_drafter *k3_drafter_new(int kmax);
void k3_drafter_free(k3_drafter *d);
/* Append a token of the sequence. */
void k3_drafter_push(k3_drafter *d, int32_t id);
/* Up to the current budget of drafts continuing the tokens pushed so far,
 * into out[0..); returns how many (0: decode plainly this step). */
int k3_drafter_propose(k3_drafter *d, int32_t *out);
/* How a proposal of `drafted` tokens fared: `accepted` of them were kept. */
void k3_drafter_result(k3_drafter *d, int drafted, int accepted);

/* Counters for tests: tokens pushed, index entries, slots probed in all. */
typedef struct {
    int64_t tokens, entries, probes;
    size_t bytes; /* memory held */
} k3_drafter_counts;
k3_drafter_counts k3_drafter_count(const k3_drafter *d);

#endif
