/* bench_draft.h — `k3 bench --replay FILE --draft-only`: the drafter's
 * acceptance on each line and the n-gram bound, no model (bench_draft.c). */
#ifndef K3_CLI_BENCH_DRAFT_H
#define K3_CLI_BENCH_DRAFT_H

#include "cli/bench_replay.h"
#include "gen/draft.h"

#define K3_STUDY_COSTS 4

/* A verify-cost table: c[k] plain steps for a verify step of k drafts. */
typedef struct {
    char name[24];
    double c[K3_DRAFT_MAX + 1];
    int n; /* c[1..n] given */
} k3_study_cost;

/* "NAME=c1,c2,...,cn" (n >= 1, each > 0). 0, or -1 with a message. */
int k3_study_cost_parse(const char *arg, k3_study_cost *out);
/* Print the study of n lines at spec-max kmax (the drafter weighing
 * spec_cost, NULL: its default), projected through costs. */
int k3_bench_draft_study(const k3_replay_text *L, int n, int kmax, const double *spec_cost,
                         const k3_study_cost *costs, int ncost);

#endif
