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

/* In-place tree sum of n arrays into parts[0]: ((p0+p1)+(p2+p3))+... for n a
 * power of two; for other n the order a binary counter of subtrees gives (the
 * canonical order; src/dist finishes the same tree across ranks). */
void k3_tree_reduce(float *const *parts, int n, int64_t len);
/* The same sums written to out[0..len), the parts left untouched; bitwise
 * equal to k3_tree_reduce. Called inside a parallel region (by every thread
 * of it: an orphaned `omp for`) the elements are split over its threads, as
 * the region's last work: the loop has no barrier of its own (each barrier
 * costs a futex call in libgomp), the region's end is the one that makes out
 * complete. Otherwise it runs on the calling thread. No allocation. */
void k3_tree_reduce_into(float *const *parts, int n, int64_t len, float *out);

/* Per-thread grow-only buffers of the split products and the MoE (moe.c):
 * at least `bytes` in slot `slot` for the calling thread (contents
 * undefined), reallocated only to grow (counted by k3_workspace_grows) and
 * freed when the thread exits. */
enum {
    K3_TB_RP_LEAVES = 0, /* rowpar.c: the blocks' partials */
    K3_TB_RP_XB,         /* rowpar.c: X split into blocks */
    K3_TB_RP_TMP,        /* rowpar.c: one item's output */
    K3_TB_MOE_ROUTE,     /* moe.c: router logits, selections, sorted routing */
    K3_TB_MOE_XG,        /* moe.c: gathered expert inputs */
    K3_TB_MOE_LEAVES,    /* moe.c: the blocks' sums */
    K3_TB_MOE_SEL,       /* moe.c: k3_moe_select's scores */
    K3_TB_MOE_LAT,       /* moe.c: latent input/output and shared-expert partial */
    K3_TB_MLP,           /* moe.c: MLP gate and up */
    K3_TB_EXPERT_Y,      /* moe.c, any thread: a block's double accumulator */
    K3_TB_EXPERT_GUD,    /* moe.c, any thread: one expert's gate, up and down outputs */
    K3_TB_N
};
void *k3_thread_buf(int slot, size_t bytes);

#endif
