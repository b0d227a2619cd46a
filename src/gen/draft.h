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
 * How many of the candidates to send is a choice of cost (issue 39): a
 * verify step of k drafts costs cost[k] plain steps, and sending k is worth
 * (1 + E[drafts kept of k]) / cost[k] tokens per plain step's cost. The
 * drafter sends the k with the most, and none (a plain step) when no k
 * beats a plain step's 1. The chance that the first i drafts are all kept
 * is the product of each one's chance, estimated per sequence from how
 * often drafts behind a match of the same length, whose other earlier
 * places agreed alike (all, some, or there were none), were kept lately. Every
 * proposal's candidates are scored against the tokens that follow, sent or
 * not, so the estimate keeps learning while the drafter decodes plainly,
 * and a copy that starts to agree is drafted again without probes. */
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
/* The cost table of a drafter nobody gave one: a verify step of k drafts
 * costs K3_DRAFT_STEP_COST + K3_DRAFT_ROW_COST x k plain steps (the bench
 * preset at 1 thread, `k3 bench --verify-cost`, bench/RESULTS.md: 2.09 2.22
 * 2.73 ... 4.73 for k = 1..8). A model's own table: k3_spec_cost_default
 * (gen/spec.h). */
#define K3_DRAFT_STEP_COST 1.5
#define K3_DRAFT_ROW_COST 0.4

typedef struct k3_drafter k3_drafter;

/* A drafter proposing at most kmax (1..K3_DRAFT_MAX) tokens per step. */
k3_drafter *k3_drafter_new(int kmax);
void k3_drafter_free(k3_drafter *d);
/* Append a token of the sequence. */
void k3_drafter_push(k3_drafter *d, int32_t id);
/* The drafts chosen to send this step, a prefix of the candidates, into
 * out[0..K3_DRAFT_MAX); returns how many (0: decode plainly this step). */
int k3_drafter_propose(k3_drafter *d, int32_t *out);
/* Every candidate the match gives (up to kmax), without the choice of how
 * many to send: what k3_drafter_propose chooses a prefix of (for tests and
 * studies of the matching; it changes the drafter as propose does). */
int k3_drafter_candidates(k3_drafter *d, int32_t *out);
/* cost[k] for k = 0..K3_DRAFT_MAX (cost[0] is taken as 1), copied; NULL:
 * the default, K3_DRAFT_STEP_COST + K3_DRAFT_ROW_COST x k. */
void k3_drafter_set_cost(k3_drafter *d, const double *cost);
/* The choice rule: with keep[j] the chance that draft j is kept when the
 * drafts before it were (j < n) and cost[0..n], the k in 0..n that
 * maximizes (1 + sum over i <= k of keep[0] x .. x keep[i-1]) / cost[k],
 * the smallest on a tie; 0 when no k beats a plain step's 1 / 1. */
int k3_draft_choose(const double *keep, int n, const double *cost);

/* Counters for tests: tokens pushed, index entries, slots probed in all. */
typedef struct {
    int64_t tokens, entries, probes;
    size_t bytes; /* memory held */
} k3_drafter_counts;
k3_drafter_counts k3_drafter_count(const k3_drafter *d);

#endif
