/* tp.h — tensor-parallel slicing of a loaded model (spec §5.1).
 *
 * A rank of an N-way tensor-parallel group first builds the usual views of
 * the checkpoint (k3_layer_load maps, it does not read), then keeps only its
 * slice: heads [r*H/N, (r+1)*H/N) of KDA and MLA, 1/N of the dense-MLP,
 * shared-expert and routed-expert intermediate dims. Output-sliced
 * ("all-to-sharded") matrices keep a row range, input-sliced
 * ("sharded-to-all") ones a column range whose partial products are summed
 * by the model's reduce hook. Small fp32 vectors (conv taps, A, dt_bias) are
 * copied to their local slice. Replicated: f_a_proj, o_norm, q_a/kv_a and
 * their norms, router, correction bias, routed_expert_down/up/norm, all
 * norms and AttnRes vectors.
 *
 * After slicing, the forward pass runs unchanged on a local config whose head
 * counts and intermediate sizes are the per-rank ones (k3_tp_local_config). */
#ifndef K3_MODEL_TP_H
#define K3_MODEL_TP_H

#include "io/config.h"
#include "model/model.h"

/* Refuse an N that does not divide the head counts and intermediate sizes. 0 or -1 + message. */
int k3_tp_check_config(const k3_config *c, int N);
/* Replace layer i's weights (loaded whole, with config c) by rank r's slice of N.
 * Fails (message naming the layer and matrix) if a quantized group would
 * straddle the slice boundary. */
int k3_tp_slice_layer(const k3_config *c, int i, k3_layer *l, int r, int N);
/* The config the sliced forward pass runs with: heads and intermediate sizes / N. */
void k3_tp_local_config(const k3_config *full, int N, k3_config *local);
/* "KDA heads 1..1 of 4, MLA heads 1..1 of 4, MLP cols 24..47 of 96, ..." for rank r. */
void k3_tp_describe(const k3_config *full, int r, int N, char *buf, size_t len);

#endif
