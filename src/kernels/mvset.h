/* mvset.h — several matrix-vector products run as one unit of work (decode).
 *
 * A decode step is a chain of products; many of them read inputs that are all
 * ready at the same time (the q/k/v/gate projections of one x, the router,
 * latent down and shared-expert gate/up of one h, the per-head W_UK / W_UV of
 * MLA). Run one by one, each opens its own OpenMP region: a fork, a join, a
 * new weight stream per product, and a thread that finishes early waits.
 * A set runs them in ONE region instead: the rows of the products, taken in
 * order as one sequence, are cut into one contiguous range per thread with
 * about equal weight bytes (k3_mvset_split), so each thread streams one run
 * of weights from the first product it touches to the last, with no barrier
 * between products.
 *
 * Every row is computed by the kernel k3_matvec uses, on a row view of its
 * matrix (the kernels compute each row independently of the others and
 * prepare x per call from x alone), so the results are bitwise those of n
 * separate k3_matvec calls, for any thread count and any cut. */
#ifndef K3_KERNELS_MVSET_H
#define K3_KERNELS_MVSET_H

#include "quant/wmat.h"

/* One product of a set: y[r] = sum_c W[r,c] x[c], r in [0, W->rows). */
typedef struct {
    const k3_wmat *W;
    const float *x;
    float *y;
} k3_mv;

/* Cuts fall on multiples of this many rows of a product (64-byte lines of y
 * are never written by two threads), or at a product's end. */
#define K3_MVSET_ROW_ALIGN 16

/* A position in a set's row sequence: row `row` of product `prod`
 * (prod == n, row == 0 is the end). */
typedef struct {
    int prod;
    int64_t row;
} k3_mvpos;

/* Cut the rows of mv[0..n) into nt ranges of about equal weight bytes:
 * range t is [cut[t], cut[t+1]); cut[0] is the start, cut[nt] the end, the
 * cuts never decrease. A range may be empty. Deterministic: it depends on
 * the shapes, formats and nt only. */
void k3_mvset_split(const k3_mv *mv, int n, int nt, k3_mvpos *cut);

/* Rows [from, to) of the set on the calling thread, with serial kernels. */
void k3_mvset_range(const k3_mv *mv, int n, k3_mvpos from, k3_mvpos to);

/* All products of the set: one parallel region over the current OpenMP
 * threads, each thread its range of k3_mvset_split; on the calling thread
 * alone inside a parallel region, under the serial kernel entries, or when
 * the set is too small to be worth a region. */
void k3_mvset_run(const k3_mv *mv, int n);

/* Called by EVERY thread of the current parallel region (an orphaned
 * construct, like `omp for nowait`): each thread computes its range; there
 * is no barrier at the end (the caller puts one where the results are read).
 * Outside a region it is k3_mvset_run. */
void k3_mvset_team(const k3_mv *mv, int n);

#endif
