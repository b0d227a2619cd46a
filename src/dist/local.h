/* local.h — a k3_comm group whose ranks are threads of one process.
 *
 * Lets the tests (and anyone without mpirun) run N slices of a model side by
 * side, one thread per rank, with the same k3_comm interface the MPI group
 * offers. Sums are taken in the canonical tree order of model/rowpar.h by
 * every rank, so all ranks get bit-identical results (equal to one process). Bytes are counted per
 * rank like the MPI wrapper does. */
#ifndef K3_DIST_LOCAL_H
#define K3_DIST_LOCAL_H

#include "dist/dist.h"

typedef struct k3_local_group k3_local_group;

/* A group of n ranks (n >= 1). NULL + k3_seterr on error. */
k3_local_group *k3_local_group_new(int n);
void k3_local_group_free(k3_local_group *g);
/* The k3_comm for `rank`; valid until the group is freed. */
const k3_comm *k3_local_comm(k3_local_group *g, int rank);
/* Counters of one rank. */
k3_dist_counters k3_local_stats(k3_local_group *g, int rank);

/* Run fn(rank, arg) on n threads (one per rank) and wait; returns the number
 * of ranks whose fn returned non-zero. */
int k3_local_run(k3_local_group *g, int (*fn)(int rank, void *arg), void *arg);

#endif
