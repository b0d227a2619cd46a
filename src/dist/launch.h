/* launch.h — loading the model slice of this process in an mpirun group.
 *
 * Every subcommand that runs the model calls k3_dist_model_load instead of
 * k3_model_load. Launched by mpirun with N > 1 processes, rank r loads its
 * 1/N tensor-parallel slice (default) or pipeline stage r (pipeline = 1),
 * attaches the MPI group, prints one line saying which slice it holds, and
 * all ranks agree on success: if any rank fails, every rank gets NULL with
 * k3_errmsg() = "rank R: <why>" (so all of them exit with the message
 * instead of waiting forever for the missing one). Outside mpirun it is
 * exactly k3_model_load. */
#ifndef K3_DIST_LAUNCH_H
#define K3_DIST_LAUNCH_H

#include "k3.h"

/* opts may be NULL; its tp_* / pp_* fields are overwritten. Calls k3_dist_init(). */
k3_model *k3_dist_model_load(const char *dir, const k3_load_opts *opts, int pipeline);
/* The same with `stages` pipeline stages: 1 = tensor parallel over all ranks,
 * N = pipeline over all ranks, in between TP groups of N / stages ranks inside
 * each stage (world rank r: stage r / (N/stages), TP rank r % (N/stages); see
 * k3_dist_grid). A stage count that does not divide N fails on every rank. */
k3_model *k3_dist_model_load_stages(const char *dir, const k3_load_opts *opts, int stages);
/* 1 if this process does the I/O (rank 0; always 1 outside mpirun). */
int k3_dist_is_root(void);

#endif
