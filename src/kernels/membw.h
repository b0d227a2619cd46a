/* membw.h — measured memory read bandwidth, the denominator of the decode roofline.
 *
 * k3 bench compares decode tokens/s with bandwidth / bytes-per-token, so the
 * bandwidth must be measured on the same machine, in the same run, with the
 * same threads: a streaming read (AVX2 loads summed, so nothing is optimised
 * away) over a buffer much larger than the last-level cache. */
#ifndef K3_KERNELS_MEMBW_H
#define K3_KERNELS_MEMBW_H

#include <stddef.h>

/* Read a `bytes` buffer `passes` times with the current OpenMP thread count;
 * returns the median bytes/second over the passes (first touch excluded), or
 * 0 with k3_seterr on allocation failure. */
double k3_membw_read(size_t bytes, int passes);

/* The same over memory the caller already has (e.g. the mapped weight files of
 * a model, so the working set is as large as what decode reads and is the same
 * kind of memory): n spans, each read whole (rounded down to 64 bytes), after
 * one untimed pass that pages them in. Integer loads, so random bytes cannot
 * hit floating-point assists. Median bytes/second over the passes, 0 if
 * there is nothing to read. */
typedef struct k3_span {
    const void *p;
    size_t bytes;
} k3_span;
double k3_membw_read_spans(const k3_span *s, int n, int passes);

#endif
