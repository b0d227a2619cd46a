/* kda_rec.c — what a KDA layer writes into its record during a speculative
 * verify pass (model.h: k3_kda_rec): the pre-conv rows and the conv history
 * before the conv, the recurrence's inputs after the heads ran. kda.c calls
 * these; spec.c owns the records and replays them at the commit. A leaf, so
 * that the block and the verify pass do not call each other. */
#include "model/model.h"

#include <string.h>

void k3_kda_rec_begin(k3_layer_cache *lc, float *const zb[3], int64_t t0, int64_t n, int64_t P,
                      int K) {
    k3_kda_rec *r = lc->rec;
    size_t row = sizeof(float) * (size_t)P;
    memcpy(r->zq, zb[0] + t0 * P, row * (size_t)n);
    memcpy(r->zk, zb[1] + t0 * P, row * (size_t)n);
    memcpy(r->zv, zb[2] + t0 * P, row * (size_t)n);
    memcpy(r->conv, lc->conv, 3 * row * (size_t)(K - 1));
    r->n = n;
}

void k3_kda_rec_end(k3_layer_cache *lc, const float *const qkva[4], const float *beta, int64_t t0,
                    int64_t n, int64_t P, int H) {
    k3_kda_rec *r = lc->rec;
    size_t rows = sizeof(float) * (size_t)(P * n);
    memcpy(r->q, qkva[0] + t0 * P, rows);
    memcpy(r->k, qkva[1] + t0 * P, rows);
    memcpy(r->v, qkva[2] + t0 * P, rows);
    memcpy(r->a, qkva[3] + t0 * P, rows);
    memcpy(r->beta, beta + t0 * H, sizeof(float) * (size_t)(H * n));
}
