/* ops.c — norms, SiTU and softmax (see ops.h).
 * The sums of squares and SiTU run on kernels/vmath.h (AVX2, or libm under
 * K3_KERNELS=ref). */
#include "model/ops.h"
#include "base/par.h"
#include "kernels/kernels.h"

#include <omp.h>

/* Arrays shorter than this run on the calling thread (a parallel region costs
 * more than the work); the split is bitwise safe because every vmath result
 * depends on its own input only. */
#define OPS_PAR_MIN 16384

void k3_situ_vec(float *u, const float *g, int64_t n, float beta, float lbeta) {
    if (!k3_par_worth(n >= OPS_PAR_MIN)) {
        k3_vsitu(u, g, n, beta, lbeta);
        return;
    }
#pragma omp parallel
    {
        int tid = omp_get_thread_num(), nt = omp_get_num_threads();
        int64_t i0 = n * tid / nt / 8 * 8, i1 = tid == nt - 1 ? n : n * (tid + 1) / nt / 8 * 8;
        if (i1 > i0) k3_vsitu(u + i0, g + i0, i1 - i0, beta, lbeta);
    }
}

void k3_rmsnorm(const float *x, int64_t n, const float *w, double eps, float *out) {
    double ss = k3_vsumsq(x, n);
    float inv = (float)(1.0 / sqrt(ss / (double)n + eps));
    if (w)
        for (int64_t i = 0; i < n; i++) out[i] = x[i] * inv * w[i];
    else
        for (int64_t i = 0; i < n; i++) out[i] = x[i] * inv;
}

/* Rows split over threads when there are several and enough work; each row is
 * computed the same way whatever the split. */
void k3_rmsnorm_rows(const float *x, int64_t T, int64_t n, const float *w, double eps, float *out) {
    if (!k3_par_worth(T > 1 && T * n >= OPS_PAR_MIN)) { /* no region of one thread */
        for (int64_t t = 0; t < T; t++) k3_rmsnorm(x + t * n, n, w, eps, out + t * n);
        return;
    }
#pragma omp parallel for schedule(static)
    for (int64_t t = 0; t < T; t++) k3_rmsnorm(x + t * n, n, w, eps, out + t * n);
}

void k3_l2norm_scaled(float *x, int64_t n, double eps, float scale) {
    double ss = k3_vsumsq(x, n);
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
