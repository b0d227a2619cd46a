/* comm.h — how a split model talks to the other parts of itself.
 *
 * The forward pass never includes MPI (model sits below dist in the layer
 * order). A model loaded as one slice of a tensor- or pipeline-parallel group
 * is given a k3_comm: a small table of functions that the dist layer
 * implements over MPI (src/dist/dist.c) and the tests implement with threads
 * inside one process (src/dist/local.c). A model with tp_size = pp_size = 1
 * never calls it. */
#ifndef K3_MODEL_COMM_H
#define K3_MODEL_COMM_H

#include <stddef.h>

typedef struct k3_comm {
    void *ctx;
    int rank, size; /* this process's place in the group */
    /* In-place element-wise sum of buf[0..n) over every rank; every rank must
     * get bit-identical results (MoE routing depends on them). 0, or -1 +
     * k3_seterr. */
    int (*allreduce_sum)(void *ctx, float *buf, size_t n);
    /* Blocking point-to-point transfer of n floats to/from rank `peer`. */
    int (*send)(void *ctx, int peer, const float *buf, size_t n);
    int (*recv)(void *ctx, int peer, float *buf, size_t n);
    /* Copy `bytes` bytes from rank `root` to every rank (driver -> followers). */
    int (*bcast)(void *ctx, void *buf, size_t bytes, int root);
} k3_comm;

#endif
