/* attnres.c — Block Attention Residuals mixing (spec §2.3), all in fp32/double:
 * per token, softmax over candidates of (c_j . w) / rms(c_j), then the
 * weighted sum of the raw (un-normalized) candidates. */
#include "model/model.h"

#include <math.h>
#include <string.h>

#define ATTNRES_MAX 4096

void k3_attnres_mix(float *const *R, int n, const float *p, const float *w, int64_t T, int64_t D,
                    double eps, float *out) {
    if (n == 0) {
        memcpy(out, p, sizeof(float) * (size_t)(T * D));
        return;
    }
#pragma omp parallel for schedule(static)
    for (int64_t t = 0; t < T; t++) {
        double logit[ATTNRES_MAX + 1], mx = -INFINITY, sum = 0;
        for (int j = 0; j <= n; j++) {
            const float *v = (j < n ? R[j] : p) + t * D;
            double dot = 0, ss = 0;
            for (int64_t d = 0; d < D; d++) {
                dot += (double)v[d] * w[d];
                ss += (double)v[d] * v[d];
            }
            logit[j] = dot / sqrt(ss / (double)D + eps);
            mx = logit[j] > mx ? logit[j] : mx;
        }
        for (int j = 0; j <= n; j++) sum += (logit[j] = exp(logit[j] - mx));
        float *o = out + t * D;
        for (int64_t d = 0; d < D; d++) {
            double a = 0;
            for (int j = 0; j <= n; j++) a += logit[j] * (double)(j < n ? R[j] : p)[t * D + d];
            o[d] = (float)(a / sum);
        }
    }
}
