/* kbench.c — kernel micro-benchmarks (see kbench.h). */
#include "kernels/kbench.h"
#include "base/err.h"
#include "base/mem.h"
#include "kernels/matmul.h"
#include "quant/dtype.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Random bytes where every 16-bit half-word is a normal (not subnormal: those are
 * slow on x86 and would time the wrong thing) bf16/f16 and every 32-bit word
 * a normal f32: one generator serves every format. */
static void fill_weights(uint8_t *p, size_t n, uint64_t seed) {
    uint64_t s = seed | 1;
    for (size_t i = 0; i + 8 <= n; i += 8) {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        /* high byte of each half-word 0x3c or 0xbc: normal bf16 ~2^-7, f16 ~1, f32 ~2^-7 */
        uint64_t v = (s & 0x80ff80ff80ff80ffull) | 0x3c003c003c003c00ull;
        memcpy(p + i, &v, 8);
    }
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

typedef struct {
    k3_wmat w;
    uint8_t *buf;
} bench_mat;

/* A rows x cols matrix of format fmt over freshly filled memory. */
static int make_mat(k3_wfmt fmt, int bits, int group, int64_t rows, int64_t cols, bench_mat *m) {
    memset(m, 0, sizeof *m);
    k3_wmat *w = &m->w;
    w->fmt = fmt;
    w->rows = rows;
    w->cols = cols;
    w->bits = fmt == K3_W_AFFINE ? bits : 4;
    w->group = fmt == K3_W_AFFINE ? group : 32;
    w->scale_fmt = K3_W_BF16;
    size_t es = fmt == K3_W_F32 ? 4 : 2;
    w->row_stride = fmt == K3_W_MXFP4    ? (size_t)cols / 2
                    : fmt == K3_W_AFFINE ? (size_t)cols * (size_t)bits / 8
                                         : (size_t)cols * es;
    size_t ng = (size_t)cols / (size_t)w->group;
    w->scale_stride = w->bias_stride = fmt == K3_W_MXFP4 ? ng : 2 * ng;
    size_t data = w->row_stride * (size_t)rows, sb = w->scale_stride * (size_t)rows;
    m->buf = k3_alloc(data + 2 * sb + 64);
    if (!m->buf) return -1;
    fill_weights(m->buf, data + 2 * sb, 12345);
    w->data = m->buf;
    if (fmt == K3_W_MXFP4 || fmt == K3_W_AFFINE) {
        w->scales = m->buf + data;
        if (fmt == K3_W_MXFP4)
            for (size_t i = 0; i < sb; i++) m->buf[data + i] = (uint8_t)(120 + i % 8);
    }
    if (fmt == K3_W_AFFINE) w->biases = m->buf + data + sb;
    return 0;
}

/* CPU seconds of every thread of the process. */
static double cpu_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Best (minimum) seconds of `reps` calls after one warm-up: the machines are
 * shared, and the minimum is the least disturbed estimate of the kernel.
 * *cpu (if not NULL): the least CPU seconds (all threads) of one call. */
static double time_product(const k3_wmat *W, const float *X, int64_t T, float *Y, int reps,
                           double *cpu) {
    double *t = malloc(sizeof(double) * (size_t)reps);
    k3_matmul(W, X, T, Y);
    for (int i = 0; i < reps; i++) {
        double c0 = cpu_now(), t0 = k3_now();
        k3_matmul(W, X, T, Y);
        t[i] = k3_now() - t0;
        double c = cpu_now() - c0;
        if (cpu && (i == 0 || c < *cpu)) *cpu = c;
    }
    qsort(t, (size_t)reps, sizeof(double), cmp_double);
    double best = t[0];
    free(t);
    return best;
}

int k3_kbench_format(k3_wfmt fmt, int bits, int group, uint64_t mv_bytes, int64_t mm_rows,
                     int64_t mm_cols, int64_t T, int reps, k3_kbench_row *out) {
    memset(out, 0, sizeof *out);
    if (fmt == K3_W_AFFINE)
        snprintf(out->name, sizeof out->name, "affine%d/%d", bits, group);
    else
        snprintf(out->name, sizeof out->name, "%s", k3_wfmt_name(fmt));
    const int64_t K = 4096;
    bench_mat m;
    if (make_mat(fmt, bits, group, 1, K, &m) < 0) return -1;
    int64_t rows = (int64_t)(mv_bytes / (k3_wmat_bytes(&m.w) ? k3_wmat_bytes(&m.w) : 1));
    k3_free(m.buf);
    if (rows < 1) rows = 1;
    int64_t xn = (K > mm_cols ? K : mm_cols) * T;
    float *X = k3_alloc(sizeof(float) * (size_t)xn);
    float *Y = k3_alloc(sizeof(float) * (size_t)((rows > mm_rows ? rows : mm_rows) * T));
    if (!X || !Y) goto fail;
    for (int64_t i = 0; i < xn; i++) X[i] = (float)((i * 7919) % 2001 - 1000) * 1e-3f;
    if (make_mat(fmt, bits, group, rows, K, &m) < 0) goto fail;
    out->mv_bytes = k3_wmat_bytes(&m.w);
    double cpu = 0;
    double t = time_product(&m.w, X, 1, Y, reps, &cpu);
    out->mv_gbs = (double)out->mv_bytes / t / 1e9;
    out->mv_cpu_gbs = cpu > 0 ? (double)out->mv_bytes / cpu / 1e9 : 0;
    out->mv_gflops = 2.0 * (double)rows * (double)K / t / 1e9;
    k3_free(m.buf);
    if (make_mat(fmt, bits, group, mm_rows, mm_cols, &m) < 0) goto fail;
    t = time_product(&m.w, X, T, Y, reps, NULL);
    out->mm_gflops = 2.0 * (double)mm_rows * (double)mm_cols * (double)T / t / 1e9;
    k3_free(m.buf);
    k3_free(X);
    k3_free(Y);
    return 0;
fail:
    k3_free(X);
    k3_free(Y);
    return k3_preferr("kernel benchmark %s", out->name);
}
