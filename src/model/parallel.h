/* parallel.h — a model loaded as one slice of a tensor- or pipeline-parallel group.
 *
 * k3_load_opts says which slice this process holds (tp_rank/tp_size or
 * pp_rank/pp_size); these functions, called by the loader and the forward
 * pass (api.c, forward.c), turn that into the model's state:
 *   tensor parallel: every layer sliced by src/model/tp.c, the forward pass
 *     run on the per-rank config, partial sums added up by the comm's
 *     all-reduce through model->reduce.
 *   pipeline parallel (spec §5.2): contiguous layer ranges, rank N-1 runs the
 *     first layers and rank 0 the last ones plus the output mix, final norm
 *     and lm_head; the hidden state and the AttnRes block list travel from
 *     stage to stage as one [blocks + 1, T, D] float tensor.
 *   both (TP groups inside pipeline stages): each stage's layers are sliced
 *     over its TP group; every TP rank of a stage hands its (identical) copy
 *     of the residual stream to the same TP rank of the next stage.
 * The comm (src/model/comm.h) is attached after loading with
 * k3_model_set_comm (k3_model_set_comms for TP x PP); without one a split
 * model refuses to run. */
#ifndef K3_MODEL_PARALLEL_H
#define K3_MODEL_PARALLEL_H

#include "model/comm.h"
#include "model/model.h"

/* Validate the parallel fields of opts against the config and set m's slice
 * (tp/pp rank and size, layer range). 0 or -1 + message. */
int k3_par_init(k3_model *m, const k3_load_opts *opts);
/* After k3_layer_load of layer i: keep this rank's tensor-parallel slice. */
int k3_par_slice_layer(k3_model *m, int i);
/* Before the unused-tensor check: mark the tensors of layers another pipeline
 * stage owns as accounted for. */
void k3_par_skip_foreign_layers(k3_model *m);
/* After loading: switch the model to the per-rank config. */
void k3_par_finish(k3_model *m);

/* Attach the group (NULL detaches). Must be a group of tp_size or pp_size ranks
 * with this process at tp_rank / pp_rank. 0 or -1 + message. */
int k3_model_set_comm(k3_model *m, const k3_comm *comm);
/* Both groups of a TP x PP slice: tp = the tp_size ranks of this stage (rank
 * tp_rank), pp = the pipeline chain of this TP rank (rank pp_rank of pp_size). */
int k3_model_set_comms(k3_model *m, const k3_comm *tp, const k3_comm *pp);
/* 1 if k3_forward on this process produces logits (every TP rank; the last
 * pipeline stage, pp_rank 0). */
int k3_model_makes_logits(const k3_model *m);
/* One line saying which slice this process holds (for the launch log). */
void k3_model_describe_slice(const k3_model *m, char *buf, size_t len);

/* Pipeline hand-off of the residual stream x [T, D] and the block list R[0..nR). */
int k3_pp_recv(const k3_model *m, int64_t T, float *x, float **R, int *nR);
int k3_pp_send(const k3_model *m, int64_t T, const float *x, float *const *R, int nR);

/* Pipeline stage boundaries (spec §5.2): layers [*start, *end) of stage `rank` of N. */
void k3_pp_range(int n_layers, int N, int rank, int *start, int *end);

#endif
