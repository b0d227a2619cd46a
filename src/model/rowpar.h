/* rowpar.h — sharded-to-all ("row-parallel") products with a canonical summation order.
 *
 * Under tensor parallelism a product whose input columns are split across
 * ranks (o_proj, MLP/shared down_proj, expert down_proj) is a sum of per-rank
 * partials. To make TP-N reproduce the single-process logits bit for bit,
 * every such product is computed — on one process too — as a pairwise tree
 * sum over a fixed set of column blocks: K3_ROWPAR_BLOCKS (8) blocks, fewer
 * when the column count or a quantization group forces it. A rank of N holds
 * nb/N consecutive blocks, sums them with the same tree, and the all-reduce
 * (src/dist) finishes the same tree across ranks. For N dividing nb (1, 2, 4,
 * 8 on K3) the result is identical to TP1; for other N each rank's slice is
 * one block and the result agrees to rounding. */
#ifndef K3_MODEL_ROWPAR_H
#define K3_MODEL_ROWPAR_H

#include "model/model.h"

#define K3_ROWPAR_BLOCKS 8

/* Column blocks this rank's slice of W is split into (>= 1). */
int k3_rowpar_local_blocks(const k3_model *m, const k3_wmat *W);
/* Y[T, rows] = this rank's partial of W X (X [T, W.cols]) in the canonical order. */
void k3_rowpar_matmul(const k3_model *m, const k3_wmat *W, const float *X, int64_t T, float *Y);

/* Streaming pairwise tree sum of leaves of `len` floats: ((l0+l1)+(l2+l3))+... */
typedef struct {
    float *slot[32];
    int64_t len;
} k3_tree_sum;
void k3_tree_init(k3_tree_sum *t, int64_t len);
void k3_tree_add(k3_tree_sum *t, const float *leaf);
/* Writes the sum to out and frees the slots (out = 0 if no leaf was added). */
void k3_tree_finish(k3_tree_sum *t, float *out);
/* In-place tree sum of n arrays into parts[0] (the order k3_tree_sum uses). */
void k3_tree_reduce(float *const *parts, int n, int64_t len);

#endif
