/* spec_cost.h — verify-cost tables given on the command line: how many
 * plain decode steps a verify step of k drafts costs (`--spec-cost` of
 * generate, chat, serve and bench, `--cost` of the draft-only study). The
 * drafter weighs such a table (gen/draft.h k3_drafter_set_cost); without
 * one it takes the model's estimate (gen/spec.h k3_spec_cost_default). */
#ifndef K3_GEN_SPEC_COST_H
#define K3_GEN_SPEC_COST_H

#include "gen/draft.h"

/* Costs a table may hold: beyond this range projections overflow or mean
 * nothing. */
#define K3_SPEC_COST_MIN 1e-6
#define K3_SPEC_COST_MAX 1e6
/* Parse "c1,c2,...,cn" (list: any bytes; plain decimal numbers in the range
 * above, no spaces, no empty item, n <= K3_DRAFT_MAX) into cost[1..n] with
 * cost[0] = 1 and *n set; cost past n is untouched. flag names the option in
 * the error. 0, or -1 + k3_errmsg quoting the part that is wrong. */
int k3_spec_cost_list(const char *flag, const char *list, double *cost, int *n);
/* --spec-cost c1,...,cn of generate, chat and serve: the table the drafter
 * weighs (cost[0..K3_DRAFT_MAX]); drafts beyond n are never sent (their cost
 * is infinite). 0, or -1 + k3_errmsg. */
int k3_spec_cost_parse(const char *list, double *cost);

#endif
