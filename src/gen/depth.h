/* depth.h — a context of D tokens read before what a benchmark measures
 * (k3 bench --depth D, as llama-bench -d D).
 *
 * The fill is not what is measured, so it may run on more threads than the
 * measurement: its state does not depend on the thread count, because every
 * kernel gives threaded results equal to single-threaded ones bit for bit
 * (docs/performance.md, "Threads and determinism"), and the chunks it feeds
 * are the same whatever the threads. */
#ifndef K3_GEN_DEPTH_H
#define K3_GEN_DEPTH_H

#include "k3.h"

#include <stdint.h>

enum { K3_DEPTH_CHUNK = 4096 }; /* tokens fed per k3_forward call */

/* Called after each chunk: tokens read so far, of total, seconds since the start. */
typedef void (*k3_depth_progress_fn)(void *ctx, int64_t done, int64_t total, double s);

/* The i-th token of the context (ids spread over the vocabulary, avoiding its
 * last 256, where models keep their special tokens). */
int32_t k3_depth_token(int64_t i, int vocab);

/* A new sequence of m that has read the D-token context, fed in chunks of
 * K3_DEPTH_CHUNK on `threads` OpenMP threads (0: the caller's), after which
 * the caller's thread count is back. progress may be NULL. NULL + k3_errmsg. */
k3_seq *k3_depth_fill(k3_model *m, int64_t D, int threads, k3_depth_progress_fn progress,
                      void *ctx);

#endif
