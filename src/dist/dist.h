/* dist.h — k3's process group over MPI (tensor / pipeline parallelism).
 *
 * MPI is initialised only when the process was started by an MPI launcher
 * (mpirun sets OMPI_COMM_WORLD_SIZE, PMI/PMIx launchers set PMI_SIZE or
 * PMIX_RANK), so a plain `k3 ...` never touches MPI and behaves as a group of
 * one. Every function works in both cases.
 *
 * The communication the model needs is exposed as a k3_comm
 * (src/model/comm.h) that counts every byte it moves, so the traffic per
 * decoded token can be measured (k3_dist_counters; K3_DIST_STATS=1 prints
 * them per rank at k3_dist_finalize). */
#ifndef K3_DIST_DIST_H
#define K3_DIST_DIST_H

#include <stddef.h>
#include <stdint.h>

#include "model/comm.h"

/* 1 if the environment says an MPI launcher started this process. */
int k3_dist_launched(void);
/* Initialise MPI when launched by mpirun (idempotent; no-op otherwise).
 * 0, or -1 + k3_seterr. */
int k3_dist_init(void);
/* Finalise MPI if k3_dist_init started it (prints counters if K3_DIST_STATS). */
void k3_dist_finalize(void);

int k3_dist_rank(void); /* 0 when not launched by MPI */
int k3_dist_size(void); /* 1 when not launched by MPI */

/* The world group as a k3_comm (counting wrapper over MPI_COMM_WORLD). */
const k3_comm *k3_dist_comm(void);

/* In-place sum over all ranks (identical result everywhere). 0 or -1. */
int k3_dist_allreduce_sum(float *buf, size_t n);
int k3_dist_send(int peer, const float *buf, size_t n);
int k3_dist_recv(int peer, float *buf, size_t n);
/* TP x PP grid: world rank r is tensor-parallel rank r % tp of pipeline stage
 * r / tp. *tp_comm is this rank's TP group (the tp ranks of its stage),
 * *pp_comm its pipeline chain (the same TP rank in every stage, rank = stage).
 * Valid until k3_dist_finalize; the world size must be a multiple of tp. */
int k3_dist_grid(int tp, const k3_comm **tp_comm, const k3_comm **pp_comm);
/* Copy `bytes` bytes from rank `root` to every rank. 0 or -1. */
int k3_dist_bcast(void *buf, size_t bytes, int root);
void k3_dist_barrier(void);

/* Collective agreement after a step that can fail on some ranks only (e.g.
 * loading a slice). Every rank passes ok=1/0 and, when it failed, its own
 * k3_errmsg() is the reason. Returns 0 if every rank succeeded; otherwise -1
 * on every rank with k3_errmsg() = "rank R: <R's message>" for the lowest
 * failing rank R. Must be reached by all ranks. */
int k3_dist_all_ok(int ok);

/* Bytes moved through this rank's k3_comm / wrapper calls since the last reset. */
typedef struct k3_dist_counters {
    uint64_t allreduce_calls;
    uint64_t allreduce_bytes; /* payload bytes summed (n * 4 per call) */
    uint64_t p2p_calls;       /* sends + receives */
    uint64_t p2p_bytes;       /* bytes sent + bytes received */
    uint64_t sent_bytes;      /* bytes sent point to point */
} k3_dist_counters;
k3_dist_counters k3_dist_stats(void);
void k3_dist_reset_stats(void);

/* Per-rank prefix for messages: "[rank 1/4] " under MPI, "" otherwise. */
const char *k3_dist_tag(void);

#endif
