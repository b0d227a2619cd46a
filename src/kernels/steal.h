/* steal.h — contiguous per-thread shares of a list of work items, with
 * stealing from the back when a thread runs out (decode products).
 *
 * A decode product is a stream of weight rows. Cut statically, each thread
 * streams one contiguous share, which the prefetchers like; but the region
 * lasts as long as the slowest share, and on a machine shared with other
 * jobs a thread that loses its core for a time slice leaves the other
 * waiting. Here each thread owns a contiguous share of the items and takes
 * them from its front, a few at a time; a thread whose share is done takes
 * items from the BACK of the others' shares until every share is empty. So
 * without disturbance it is the static split, and with one it finishes when
 * the work is done. Nobody waits inside: a thread that finds every share
 * empty returns (the region's closing barrier follows the wait policy).
 *
 * Which thread computes an item never changes what the item computes, so
 * the results are those of any other split (callers keep each output
 * element's arithmetic independent of the split). */
#ifndef K3_KERNELS_STEAL_H
#define K3_KERNELS_STEAL_H

#include <stdatomic.h>
#include <stdint.h>

/* Most shares one schedule holds (more threads: callers use a static split). */
#define K3_STEAL_MAX 64

/* One thread's share: items [front, back) not yet taken, packed in one word
 * (front in the low 32 bits) so a claim is one compare-and-swap. */
typedef struct {
    _Alignas(64) _Atomic uint64_t span;
} k3_steal_share;

typedef struct {
    k3_steal_share share[K3_STEAL_MAX];
    int n; /* shares in use */
} k3_steal;

/* n shares (1 <= n <= K3_STEAL_MAX) of items [0, items) (items < 2^32):
 * share t is [items*t/n, items*(t+1)/n), or [bound[t], bound[t+1]) when
 * bound (n + 1 non-decreasing entries from 0 to items) is given. */
void k3_steal_init(k3_steal *s, int n, int64_t items, const int64_t *bound);

/* The next run of items for thread `tid`: up to `max` items from the front
 * of its own share, or else up to `max` from the back of another share (the
 * next non-empty one after tid). Returns the first item and sets *got (>= 1),
 * or returns -1 when every share is empty. Any number of threads may call
 * it at once, with any tid (a tid >= n owns nothing and only steals). */
int64_t k3_steal_next(k3_steal *s, int tid, int64_t max, int64_t *got);

#endif
