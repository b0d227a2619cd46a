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

#endif
