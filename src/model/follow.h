/* follow.h — "rank 0 drives, the other ranks follow" for every subcommand.
 *
 * Under mpirun, a subcommand such as generate, chat, bench or serve runs only
 * on rank 0 (the driver), which does all the I/O. The other ranks (followers)
 * run k3_par_follow(): each call the driver makes to the public model API —
 * k3_model_load, k3_model_free, k3_seq_new/free/clone/reset, k3_forward — is
 * first broadcast to them (a small command header plus the model directory
 * or the token ids) and then executed everywhere, so the tensor-parallel
 * all-reduces and pipeline hand-offs inside it meet. Followers never produce
 * logits (rank 0 is the last pipeline stage and every TP rank computes the
 * same head). The driver must not call the model API from two threads at once
 * (k3 serve runs the model on one scheduler thread).
 *
 * The hooks below are called by model.c; with no group set (a plain process,
 * or `k3 logits`, which runs the same program on every rank) they do nothing. */
#ifndef K3_MODEL_FOLLOW_H
#define K3_MODEL_FOLLOW_H

#include "model/comm.h"
#include "model/model.h"

/* Install the process group for driver/follower mode (pipeline: layer ranges
 * instead of tensor slices). Call on every rank before any model is loaded. */
void k3_par_set_group(const k3_comm *comm, int pipeline);
/* The same for a TP x PP grid: commands go over `world`, each rank's slice is
 * TP rank tp->rank of tp->size inside pipeline stage pp->rank of pp->size. */
void k3_par_set_grid(const k3_comm *world, const k3_comm *tp, const k3_comm *pp);
/* Follower main loop: executes the driver's calls until it says goodbye or
 * exits. Returns 0, or 1 if a command failed here. */
int k3_par_follow(void);
/* Driver: tell the followers to leave their loop (at exit). */
void k3_par_release_followers(void);

/* ---- hooks in model.c ---- */
/* Before loading: under a group, announce the load (driver) and return the
 * opts with this rank's slice in *tmp. */
const k3_load_opts *k3_par_hook_load(const char *dir, const k3_load_opts *opts, k3_load_opts *tmp);
/* After loading: every rank agrees (a rank that failed makes all return NULL)
 * and the group is attached. */
k3_model *k3_par_hook_loaded(k3_model *m);
void k3_par_hook_free(k3_model *m);
void k3_par_hook_seq_new(k3_seq *s);
void k3_par_hook_seq_free(k3_seq *s);
void k3_par_hook_seq_clone(const k3_seq *src, k3_seq *dst);
void k3_par_hook_seq_reset(k3_seq *s);
void k3_par_hook_forward(k3_seq *s, const int32_t *tokens, int64_t n, int path);
void k3_par_hook_forward_batch(const k3_batch_item *items, int n, int path);
/* k3_seq_spec_commit: the followers keep the same rows of their verify pass. */
void k3_par_hook_spec_commit(k3_seq *s, int64_t keep);

#endif
