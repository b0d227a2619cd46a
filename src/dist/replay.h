/* replay.h — "rank 0 drives, the other ranks follow" for every subcommand.
 *
 * Under mpirun, a subcommand such as generate, chat, bench or serve runs only
 * on rank 0 (the driver), which does all the I/O. The other ranks (followers)
 * run k3_dist_replay_follow(): each call the driver makes to the public model API —
 * k3_model_load, k3_model_free, k3_seq_new/free/clone/reset, k3_forward — is
 * first broadcast to them (a small command header plus the model directory
 * or the token ids) and then executed everywhere, so the tensor-parallel
 * all-reduces and pipeline hand-offs inside it meet. Followers never produce
 * logits (rank 0 is the last pipeline stage and every TP rank computes the
 * same head). The driver must not call the model API from two threads at once
 * (k3 serve runs the model on one scheduler thread).
 *
 * The model tells the driver's calls through its hooks table (model/hooks.h),
 * which k3_dist_replay_new installs; without a replay (a plain process, or
 * `k3 logits`, which runs the same program on every rank) nothing is sent. */
#ifndef K3_DIST_REPLAY_H
#define K3_DIST_REPLAY_H

#include "model/comm.h"

typedef struct k3_dist_replay k3_dist_replay;

/* Driver/follower mode over comm (pipeline: layer ranges instead of tensor
 * slices), installed as the model's hooks. Call on every rank before any
 * model is loaded. NULL when comm has one rank (nothing to replay). */
k3_dist_replay *k3_dist_replay_new(const k3_comm *comm, int pipeline);
/* The same for a TP x PP grid: commands go over `world`, each rank's slice is
 * TP rank tp->rank of tp->size inside pipeline stage pp->rank of pp->size. */
k3_dist_replay *k3_dist_replay_grid(const k3_comm *world, const k3_comm *tp, const k3_comm *pp);
/* Follower main loop: executes the driver's calls until it says goodbye or
 * exits. Returns 0, or 1 if a command failed here. */
int k3_dist_replay_follow(k3_dist_replay *r);
/* Driver: tell the followers to leave their loop (at exit); r stays valid. */
void k3_dist_replay_release(k3_dist_replay *r);
/* Uninstall and free r (a follower, after its loop; no model of r open). */
void k3_dist_replay_free(k3_dist_replay *r);

#endif
