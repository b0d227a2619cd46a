/* ops.c — norms, softmax and the transposed weight product (see ops.h). */
#include "model/ops.h"
#include "base/mem.h"

#include <stdlib.h>

void k3_situ_vec(float *u, const float *g, int64_t n, float beta, float lbeta) {
    for (int64_t i = 0; i < n; i++) u[i] = k3_situ(u[i], g[i], beta, lbeta);
}

void k3_rmsnorm(const float *x, int64_t n, const float *w, double eps, float *out) {
    double ss = 0;
    for (int64_t i = 0; i < n; i++) ss += (double)x[i] * x[i];
    float inv = (float)(1.0 / sqrt(ss / (double)n + eps));
    for (int64_t i = 0; i < n; i++) out[i] = x[i] * inv * (w ? w[i] : 1.0f);
}

void k3_rmsnorm_rows(const float *x, int64_t T, int64_t n, const float *w, double eps, float *out) {
    for (int64_t t = 0; t < T; t++) k3_rmsnorm(x + t * n, n, w, eps, out + t * n);
}

void k3_l2norm_scaled(float *x, int64_t n, double eps, float scale) {
    double ss = 0;
    for (int64_t i = 0; i < n; i++) ss += (double)x[i] * x[i];
    float f = (float)((double)scale / sqrt(ss + eps));
    for (int64_t i = 0; i < n; i++) x[i] *= f;
}

void k3_softmax(float *x, int64_t n) {
    float mx = -INFINITY;
    for (int64_t i = 0; i < n; i++) mx = x[i] > mx ? x[i] : mx;
    double sum = 0;
    for (int64_t i = 0; i < n; i++) {
        x[i] = x[i] == -INFINITY ? 0.0f : expf(x[i] - mx);
        sum += x[i];
    }
    float inv = (float)(1.0 / sum);
    for (int64_t i = 0; i < n; i++) x[i] *= inv;
}

/* Reads each row of W once and scatters it into every output row (axpy form),
 * accumulating in double. */
void k3_wmat_tmatmul(const k3_wmat *W, const float *X, int64_t T, float *Y) {
    int64_t R = W->rows, C = W->cols;
    double *acc = k3_xcalloc((size_t)(T * C > 0 ? T * C : 1), sizeof *acc);
    float *row = k3_xmalloc(sizeof(float) * (size_t)(C ? C : 1));
    for (int64_t r = 0; r < R; r++) {
        k3_wmat_row(W, r, 0, C, row);
        for (int64_t t = 0; t < T; t++) {
            double xv = X[t * R + r];
            double *a = acc + t * C;
            for (int64_t c = 0; c < C; c++) a[c] += xv * row[c];
        }
    }
    for (int64_t i = 0; i < T * C; i++) Y[i] = (float)acc[i];
    free(row);
    free(acc);
}
