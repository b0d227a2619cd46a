/* depth.c — the context a benchmark reads before what it measures, filled on
 * a thread count of its own (see depth.h). */
#include "gen/depth.h"

#include "base/err.h"
#include "base/mem.h"

#include <omp.h>
#include <stdlib.h>

int32_t k3_depth_token(int64_t i, int vocab) {
    int64_t span = vocab > 256 ? vocab - 256 : vocab;
    return (int32_t)((i * 104729 + 7) % span);
}

k3_seq *k3_depth_fill(k3_model *m, int64_t D, int threads, k3_depth_progress_fn progress,
                      void *ctx) {
    if (D < 0) return k3_seterr("depth: %lld tokens", (long long)D), NULL;
    int V = k3_model_vocab(m), before = omp_get_max_threads();
    if (threads > 0) omp_set_num_threads(threads);
    k3_seq *s = k3_seq_new(m);
    int32_t *tok = k3_xmalloc(sizeof(int32_t) * K3_DEPTH_CHUNK);
    double t0 = k3_now();
    for (int64_t i = 0; s && i < D; i += K3_DEPTH_CHUNK) {
        int64_t k = D - i < K3_DEPTH_CHUNK ? D - i : K3_DEPTH_CHUNK;
        for (int64_t j = 0; j < k; j++) tok[j] = k3_depth_token(i + j, V);
        if (k3_forward(s, tok, k, NULL, 0) < 0) {
            k3_seq_free(s);
            s = NULL;
        } else if (progress) {
            progress(ctx, i + k, D, k3_now() - t0);
        }
    }
    free(tok);
    omp_set_num_threads(before);
    return s;
}
