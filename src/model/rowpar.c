/* rowpar.c — canonical blocked order of sharded-to-all products (see rowpar.h).
 *
 * k3_rowpar_matmul computes the nb column-block partials of W X and their
 * tree sum in ONE parallel region: the work items are (block, row chunk)
 * pairs, each a serial product (k3_matmul_serial) on the view
 * rows(cols(W, b*bc, bc), r0, nr) — bitwise the rows of k3_matmul on the
 * block view, since every kernel computes a row independently of the others
 * — written into that block's leaf; then the threads split the elementwise
 * tree sum of the leaves. Buffers are per-thread and grow-only. */
#include "model/rowpar.h"

#include <omp.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "base/mem.h"
#include "base/par.h"
#include "kernels/kernels.h"

/* Tokens per pass: bounds the per-block buffers of a long prefill. */
#define TCHUNK 256
/* Below this many multiply-adds a parallel region costs more than it saves. */
#define PAR_MIN_MACS 65536

static int blocks_for(int64_t cols_full, const k3_wmat *W) {
    int64_t g = (W->fmt == K3_W_MXFP4 || W->fmt == K3_W_AFFINE) && W->group > 0 ? W->group : 1;
    int nb = K3_ROWPAR_BLOCKS;
    while (nb > 1 && (cols_full % nb || (cols_full / nb) % g)) nb /= 2;
    return nb;
}

int k3_rowpar_local_blocks(const k3_model *m, const k3_wmat *W) {
    int N = m->tp_size > 1 ? m->tp_size : 1;
    int nb = blocks_for(W->cols * N, W);
    return nb % N == 0 ? nb / N : 1;
}

void k3_tree_reduce(float *const *parts, int n, int64_t len) {
    for (int s = 1; s < n; s *= 2)
        for (int i = 0; i + s < n; i += 2 * s)
            for (int64_t j = 0; j < len; j++) parts[i][j] = parts[i][j] + parts[i + s][j];
}

/* Elements per chunk of k3_tree_reduce_into: the chunk's copies of the n
 * parts (n*CHUNK floats) live on the stack. */
#define TREE_CHUNK_FLOATS 4096

/* The tree over elements [j0, j0+cl) of the parts, into out[j0..). */
static void tree_chunk(float *const *parts, int n, int64_t j0, int64_t cl, float *out) {
    float tmp[TREE_CHUNK_FLOATS];
    float *p[TREE_CHUNK_FLOATS / 8];
    for (int i = 0; i < n; i++) {
        p[i] = tmp + (int64_t)i * cl;
        memcpy(p[i], parts[i] + j0, sizeof(float) * (size_t)cl);
    }
    k3_tree_reduce(p, n, cl);
    memcpy(out + j0, p[0], sizeof(float) * (size_t)cl);
}

void k3_tree_reduce_into(float *const *parts, int n, int64_t len, float *out) {
    if (n <= 1) {
        if (n == 1 && len > 0 && out != parts[0])
            memcpy(out, parts[0], sizeof(float) * (size_t)len);
        return;
    }
    if (n > TREE_CHUNK_FLOATS / 8) { /* not a K3 case: the plain in-place form */
#pragma omp single
        {
            k3_tree_reduce(parts, n, len);
            memcpy(out, parts[0], sizeof(float) * (size_t)len);
        }
        return;
    }
    const int64_t cl = TREE_CHUNK_FLOATS / n, nch = (len + cl - 1) / cl;
#pragma omp for schedule(static) nowait /* the region's end is the barrier (rowpar.h) */
    for (int64_t c = 0; c < nch; c++)
        tree_chunk(parts, n, c * cl, c * cl + cl <= len ? cl : len - c * cl, out);
}

/* The per-thread buffer sets, freed by the key's destructor at thread exit
 * (OpenMP pool threads come and go with the thread count). */
static pthread_key_t tb_key;
static pthread_once_t tb_once = PTHREAD_ONCE_INIT;

static void tb_free(void *v) {
    k3_grow_buf *b = v;
    for (int i = 0; i < K3_TB_N; i++) free(b[i].p);
    free(b);
}

static void tb_make_key(void) {
    pthread_key_create(&tb_key, tb_free);
}

void *k3_thread_buf(int slot, size_t bytes) {
    pthread_once(&tb_once, tb_make_key);
    k3_grow_buf *b = pthread_getspecific(tb_key);
    if (!b) {
        b = k3_xcalloc(K3_TB_N, sizeof *b);
        pthread_setspecific(tb_key, b);
    }
    return k3_grow(&b[slot], bytes ? bytes : 1);
}

typedef struct {
    const k3_wmat *W;
    const float *const *xb; /* [nb] blocks of X, each [n, bc] */
    float *const *leaf;     /* [nb] partials, each [n, R] */
    int64_t n, bc, rows_per_item;
    int nb, nchunks;
} rowpar_job;

/* Item it = (block b, row chunk): rows [r0, r0+nr) of block b's partial. */
static void rowpar_item(const rowpar_job *j, int64_t it) {
    const int b = (int)(it / j->nchunks);
    const int64_t R = j->W->rows, r0 = (it % j->nchunks) * j->rows_per_item;
    const int64_t nr = R - r0 < j->rows_per_item ? R - r0 : j->rows_per_item;
    if (nr <= 0) return;
    k3_wmat Wb = k3_wmat_cols(j->W, b * j->bc, j->bc);
    k3_wmat Wv = k3_wmat_rows(&Wb, r0, nr);
    if (j->n == 1) {
        k3_matvec_serial(&Wv, j->xb[b], j->leaf[b] + r0);
        return;
    }
    float *y = k3_thread_buf(K3_TB_RP_TMP, sizeof(float) * (size_t)(j->n * nr));
    k3_matmul_serial(&Wv, j->xb[b], j->n, y);
    for (int64_t t = 0; t < j->n; t++)
        memcpy(j->leaf[b] + t * R + r0, y + t * nr, sizeof(float) * (size_t)nr);
}

/* Row chunks per block so that there are a few items per thread. */
static int chunks_per_block(int nb, int64_t R) {
    int nth = omp_get_max_threads(), want = (4 * nth + nb - 1) / nb;
    int64_t max_chunks = (R + 15) / 16;
    if (nth <= 1) return 1;
    return want < max_chunks ? want : (int)max_chunks;
}

/* The calling thread's part of one_token_stealing: its claims, then its
 * share of the tree sum (all of both when called outside a region). */
static void one_token_claims(const k3_wmat *W, int nb, const float *const *xb, float *const *leaf,
                             float *Y, k3_steal *st, int64_t per) {
    const int64_t R = W->rows;
    const int tid = omp_get_thread_num();
    int64_t i, got;
    k3_prep_open(); /* xb stays put: its blocks are prepared once a thread (scratch.h) */
    while ((i = k3_steal_next(st, tid, per, &got)) >= 0) {
        const int64_t r0 = i * 16, r1 = (i + got) * 16 < R ? (i + got) * 16 : R;
        float *y[K3_ROWPAR_BLOCKS];
        for (int b = 0; b < nb; b++) y[b] = leaf[b] + r0;
        k3_wmat Wv = k3_wmat_rows(W, r0, r1 - r0);
        k3_matvec_colblocks_serial(&Wv, nb, xb, y);
    }
    k3_prep_close();
#pragma omp barrier
    k3_tree_reduce_into(leaf, nb, R, Y);
}

/* One token: 16-row groups of W in contiguous per-thread shares taken from
 * the front and stolen from the back once a thread is done
 * (kernels/steal.h), ~64 KiB of weights a claim. A claimed run of rows is
 * computed block after block (k3_matvec_colblocks_serial: each row as in the
 * block's whole product; the float formats walk each row once), so the run's
 * full-width rows are read once, in address order, while they are in cache: in block-major order
 * every row was a new stream of bc columns, and the prefetch ahead in it fetched the next blocks'
 * columns, evicted before their turn (15-17 GB/s at 2 threads on the real slice against 41-50 for
 * the products around them). Then the threads split the tree sum. */
static void one_token_stealing(const k3_wmat *W, int nb, const float *const *xb, float *const *leaf,
                               float *Y) {
    const int64_t R = W->rows, g = (R + 15) / 16;
    k3_wmat one = *W;
    one.rows = 1;
    const uint64_t gb = 16 * k3_wmat_bytes(&one);
    const int64_t per = gb && gb < 65536 ? (int64_t)(65536 / gb) : 1;
    k3_steal st;
    k3_steal_init(&st, omp_get_max_threads(), g, NULL);
    if (k3_par_direct(1)) { /* no region of one thread (base/par.h) */
        one_token_claims(W, nb, xb, leaf, Y, &st, per);
        return;
    }
#pragma omp parallel
    one_token_claims(W, nb, xb, leaf, Y, &st, per);
}

/* Every item of j on the calling thread, then the tree sum into Y. */
static void rowpar_serial(const rowpar_job *j, int64_t items, float *const *leaf, int64_t len,
                          float *Y) {
    for (int64_t it = 0; it < items; it++) rowpar_item(j, it);
    k3_tree_reduce_into(leaf, j->nb, len, Y);
}

/* n tokens (n <= TCHUNK) of the blocked product into Y [n, R]. */
static void rowpar_pass(const k3_wmat *W, int nb, const float *X, int64_t n, float *Y) {
    const int64_t bc = W->cols / nb, R = W->rows;
    float *leaves = k3_thread_buf(K3_TB_RP_LEAVES, sizeof(float) * (size_t)(nb * n * R));
    float *leaf[K3_ROWPAR_BLOCKS];
    const float *xb[K3_ROWPAR_BLOCKS];
    float *xs = n > 1 ? k3_thread_buf(K3_TB_RP_XB, sizeof(float) * (size_t)(n * W->cols)) : NULL;
    for (int b = 0; b < nb; b++) {
        leaf[b] = leaves + (int64_t)b * n * R;
        if (n == 1) { /* one token: block b of x is contiguous already */
            xb[b] = X + b * bc;
            continue;
        }
        float *d = xs + (int64_t)b * n * bc;
        for (int64_t t = 0; t < n; t++)
            memcpy(d + t * bc, X + t * W->cols + b * bc, sizeof(float) * (size_t)bc);
        xb[b] = d;
    }
    int nch = chunks_per_block(nb, R);
    rowpar_job j = {W, xb, leaf, n, bc, (((R + nch - 1) / nch) + 15) / 16 * 16, nb, nch};
    j.nchunks = (int)((R + j.rows_per_item - 1) / j.rows_per_item);
    const int64_t items = (int64_t)nb * j.nchunks;
    if (R * W->cols * n < PAR_MIN_MACS || omp_in_parallel()) {
        rowpar_serial(&j, items, leaf, n * R, Y);
        return;
    }
    if (n == 1 && omp_get_max_threads() <= K3_STEAL_MAX && (R + 15) / 16 < ((int64_t)1 << 32)) {
        one_token_stealing(W, nb, xb, leaf, Y); /* at one thread, its order without a region */
        return;
    }
    if (!k3_par_worth(1)) {
        rowpar_serial(&j, items, leaf, n * R, Y);
        return;
    }
#pragma omp parallel
    {
        k3_prep_open();              /* xb stays put (scratch.h) */
#pragma omp for schedule(dynamic, 1) /* items are independent: same bits */
        for (int64_t it = 0; it < items; it++) rowpar_item(&j, it);
        k3_prep_close();
        k3_tree_reduce_into(leaf, nb, n * R, Y);
    }
}

void k3_rowpar_matmul(const k3_model *m, const k3_wmat *W, const float *X, int64_t T, float *Y) {
    int nb = k3_rowpar_local_blocks(m, W);
    if (nb == 1) {
        k3_matmul(W, X, T, Y);
        return;
    }
    for (int64_t t0 = 0; t0 < T; t0 += TCHUNK) {
        int64_t n = T - t0 < TCHUNK ? T - t0 : TCHUNK;
        rowpar_pass(W, nb, X + t0 * W->cols, n, Y + t0 * W->rows);
    }
}
