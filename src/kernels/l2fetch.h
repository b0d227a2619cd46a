/* l2fetch.h — a cursor that fetches a product's next weights into L2 while it
 * computes (internal to src/kernels; used by matmul_tok_avx512.c and
 * matmul_few_avx512.c).
 *
 * A kernel whose FMAs run from L1/L2 can hide the memory read of the rows it
 * will take next: it calls k3_l2fetch_step once per step of its loop, and the
 * cursor issues one 64-byte prefetch every `every` steps, row by row, so the
 * lines spread evenly over the work they overlap. Prefetches change no
 * result; an address past the rows' data (the last line rounded up) cannot
 * fault. */
#ifndef K3_KERNELS_L2FETCH_H
#define K3_KERNELS_L2FETCH_H

#include <immintrin.h>
#include <stddef.h>
#include <stdint.h>

typedef struct {
    const char *p;       /* the current row's first byte */
    size_t stride, line; /* bytes between rows; bytes fetched of each (whole lines) */
    size_t off;          /* next line's offset in the current row */
    int64_t left, every, wait;
} k3_l2fetch;

/* `rows` rows of `bytes` each from p, `stride` bytes apart, spread over
 * `steps` calls of k3_l2fetch_step (the first call fetches). */
static inline k3_l2fetch k3_l2fetch_rows(const void *p, size_t stride, size_t bytes, int64_t rows,
                                         int64_t steps) {
    k3_l2fetch f = {0};
    if (rows <= 0 || bytes == 0) return f;
    f.p = (const char *)p;
    f.stride = stride;
    f.line = (bytes + 63) / 64 * 64;
    f.left = rows * (int64_t)(f.line / 64);
    f.every = steps / f.left > 1 ? steps / f.left : 1;
    f.wait = 1;
    return f;
}

static inline void k3_l2fetch_step(k3_l2fetch *f) {
    if (f->left <= 0 || --f->wait > 0) return;
    _mm_prefetch(f->p + f->off, _MM_HINT_T1);
    f->wait = f->every;
    f->left--;
    f->off += 64;
    if (f->off >= f->line) f->off = 0, f->p += f->stride;
}

#endif
