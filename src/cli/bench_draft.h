/* bench_draft.h — `k3 bench --replay FILE --draft-only`: the drafter's
 * acceptance on each line and the n-gram bound, no model (bench_draft.c). */
#ifndef K3_CLI_BENCH_DRAFT_H
#define K3_CLI_BENCH_DRAFT_H

#include "gen/draft_study.h"
#include "gen/replay_file.h"

/* At most this many --cost tables. */
#define K3_STUDY_COSTS 4
/* Print the study of n lines at spec-max kmax (the drafter weighing
 * spec_cost, NULL: its default), projected through costs. */
int k3_bench_draft_study(const k3_replay_text *L, int n, int kmax, const double *spec_cost,
                         const k3_study_cost *costs, int ncost);

#endif
