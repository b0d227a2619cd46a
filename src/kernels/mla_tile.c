/* mla_tile.c — the tiled MLA attention's plan, threads and merge, and its
 * scalar double reference (mla_tile.h). The block step itself is per ISA
 * (mla_tile_impl.h).
 *
 * Plan: the cache splits into splits of K3_TILE_SPLIT tokens (whole blocks),
 * the rows into groups of K3_TILE_GROUP rows whose queries are transposed
 * once per call, the groups into chunks of CHUNK_GROUPS (or one, where that
 * gives the threads too few tasks); each (split, chunk) task walks its split
 * block by block and folds each block into every group of its chunk while
 * the block is hot. Rows that would leave more partials than
 * k3_mla_tile_part_cap run in batches of whole chunks. None of these choices
 * changes a row's bits: its splits and blocks are fixed by K3_TILE_SPLIT and
 * K3_TILE_TOK, and within a block its lane's arithmetic is the same wherever
 * it sits (mla_tile_impl.h); so the output does not depend on the row count,
 * on n past a row's causal length, or on the threads. */
#include "kernels/mla_tile.h"

#include "base/par.h"
#include "kernels/runtime.h"
#include "quant/dtype.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define CHUNK_GROUPS 2 /* groups of a row chunk: 96 rows, a decode's heads */
#define FEW_TASKS 8    /* fewer (split, chunk) tasks than this: chunks of one group */

_Static_assert(K3_TILE_SPLIT % K3_TILE_TOK == 0, "a split is whole blocks");

int64_t k3_mla_tile_part_cap = (int64_t)1 << 25; /* 128 MiB */

/* The rows go in batches of whole chunks, one batch after the other, so that
 * a batch's partials (every split of every row) fit k3_mla_tile_part_cap; the splits, the
 * groups and the blocks are the same in every batch and every call. */
typedef struct {
    int64_t nrows, nsplit, ld;
    int64_t ngroup, qld; /* groups of K3_TILE_GROUP rows; floats of a group's transposed queries */
    int64_t cg, crows;   /* groups and rows of a chunk */
    int64_t brows;       /* rows of a batch (a multiple of crows, or all the rows) */
} tile_plan;

static int64_t cdiv(int64_t a, int64_t b) {
    return (a + b - 1) / b;
}

static int64_t min64(int64_t a, int64_t b) {
    return a < b ? a : b;
}

/* Only memory and the task count shape the plan; a row's splits and blocks
 * are fixed by K3_TILE_SPLIT and K3_TILE_TOK alone. */
static tile_plan make_plan(const k3_mla_tile_args *a) {
    tile_plan p;
    p.nrows = a->nh * a->nt;
    p.ld = cdiv(a->dv + 2, 16) * 16; /* a row's partial: sum [dv], max, weight sum */
    p.nsplit = a->n > K3_TILE_SPLIT ? cdiv(a->n, K3_TILE_SPLIT) : 1;
    p.ngroup = cdiv(p.nrows, K3_TILE_GROUP);
    p.qld = (int64_t)(a->dk + a->dp) * K3_TILE_GROUP;
    int64_t fit = k3_mla_tile_part_cap / (p.nsplit * p.ld); /* rows whose partials fit the cap */
    p.cg = CHUNK_GROUPS;
    if (p.nsplit * cdiv(p.ngroup, CHUNK_GROUPS) < FEW_TASKS || fit < CHUNK_GROUPS * K3_TILE_GROUP)
        p.cg = 1; /* more tasks for the threads, or a smaller batch (1M tokens) */
    p.crows = p.cg * K3_TILE_GROUP;
    p.brows = min64(p.nrows, fit / p.crows > 1 ? fit / p.crows * p.crows : p.crows);
    return p;
}

/* Scratch: a batch's partials, then every group's transposed queries. */
size_t k3_mla_tile_scratch(const k3_mla_tile_args *a) {
    tile_plan p = make_plan(a);
    return (size_t)(p.nsplit * p.brows * p.ld + p.ngroup * p.qld);
}

/* Cached rows row i = (h, t) attends. */
static int64_t row_len(const k3_mla_tile_args *a, int64_t i) {
    int64_t len = a->off + i % a->nt + 1;
    return len < a->n ? len : a->n;
}

static const float *row_q(const k3_mla_tile_args *a, int64_t i) {
    return a->q + (i / a->nt) * a->q_h + (i % a->nt) * a->q_t;
}

static const float *row_qp(const k3_mla_tile_args *a, int64_t i) {
    return a->dp ? a->qp + (i / a->nt) * a->qp_h + (i % a->nt) * a->qp_t : a->q;
}

static float *row_out(const k3_mla_tile_args *a, int64_t i) {
    return a->out + (i / a->nt) * a->o_h + (i % a->nt) * a->o_t;
}

static int group_rows(const tile_plan *p, int64_t gi) {
    int64_t left = p->nrows - gi * K3_TILE_GROUP;
    return (int)(left < K3_TILE_GROUP ? left : K3_TILE_GROUP);
}

/* Group gi's queries transposed, [dk + dp][gp] (lanes past its rows zero). */
static void transpose_group(const k3_mla_tile_args *a, const tile_plan *p, float *qt, int64_t gi) {
    int g = group_rows(p, gi), gp = (int)cdiv(g, 16) * 16, d = a->dk + a->dp;
    float *o = qt + gi * p->qld;
    memset(o, 0, sizeof(float) * (size_t)(d * gp));
    for (int r = 0; r < g; r++) {
        const float *q = row_q(a, gi * K3_TILE_GROUP + r), *qp = row_qp(a, gi * K3_TILE_GROUP + r);
        for (int k = 0; k < a->dk; k++) o[(int64_t)k * gp + r] = q[k];
        for (int k = 0; k < a->dp; k++) o[(int64_t)(a->dk + k) * gp + r] = qp[k];
    }
}

typedef void (*block_fn)(const k3_mla_tile_args *, k3_tile_group *, int64_t, int64_t);

/* One batch of rows: rows [b0, b0 + nb), its partials part (split s of row i
 * at (s * p->brows + i - b0) * p->ld) and every group's transposed queries qt. */
typedef struct {
    const k3_mla_tile_args *a;
    const tile_plan *p;
    float *part;
    const float *qt;
    int64_t b0, nb, nchunk;
    block_fn fn;
} tile_batch;

static float *partial(const tile_batch *b, int64_t s, int64_t i) {
    return b->part + (s * b->p->brows + i - b->b0) * b->p->ld;
}

/* The groups of row chunk c for split s: queries, lengths, fresh partials;
 * the longest row of each group in gmax. 0 groups when no row of the chunk
 * reaches split s (its partials are then never read). */
static int chunk_groups(const tile_batch *b, int64_t s, int64_t c, k3_tile_group *gs,
                        int64_t *gmax) {
    const tile_plan *p = b->p;
    int64_t g0 = (b->b0 + c * p->crows) / K3_TILE_GROUP, longest = 0;
    int ng = 0;
    for (int64_t gi = g0; gi < g0 + p->cg && gi < p->ngroup; gi++, ng++) {
        k3_tile_group *gr = &gs[ng];
        gr->g = group_rows(p, gi), gr->gp = (int)cdiv(gr->g, 16) * 16;
        gr->qt = b->qt + gi * p->qld;
        gmax[ng] = 0;
        for (int r = 0; r < gr->g; r++) {
            gr->len[r] = row_len(b->a, gi * K3_TILE_GROUP + r);
            gmax[ng] = gr->len[r] > gmax[ng] ? gr->len[r] : gmax[ng];
        }
        longest = gmax[ng] > longest ? gmax[ng] : longest;
    }
    if (longest <= s * K3_TILE_SPLIT) return 0;
    for (int q = 0; q < ng; q++) {
        k3_tile_group *gr = &gs[q];
        for (int r = 0; r < K3_TILE_GROUP; r++) gr->mx[r] = -INFINITY, gr->sum[r] = 0;
        for (int r = 0; r < gr->g; r++) {
            gr->acc[r] = partial(b, s, (g0 + q) * K3_TILE_GROUP + r);
            memset(gr->acc[r], 0, sizeof(float) * (size_t)b->a->dv);
        }
    }
    return ng;
}

/* Task k: split k / nchunk, row chunk k % nchunk of the batch. Each block of
 * the split is folded into every group of the chunk while it is hot (a group
 * none of whose rows reaches the block skips it; a row that does not reach a
 * block its group takes gets weight 0 for each of its tokens, which leaves
 * its sums bitwise as they were); each row's max and weight sum go beside its
 * partial sum at the end. */
static void run_task(const tile_batch *b, int64_t k) {
    const k3_mla_tile_args *a = b->a;
    int64_t s = k / b->nchunk, c = k % b->nchunk;
    int64_t j0s = s * K3_TILE_SPLIT, j1s = min64(j0s + K3_TILE_SPLIT, a->n);
    k3_tile_group g[CHUNK_GROUPS];
    int64_t gmax[CHUNK_GROUPS];
    int ng = chunk_groups(b, s, c, g, gmax);
    for (int64_t j0 = j0s; j0 < j1s; j0 += K3_TILE_TOK) {
        int64_t j1 = min64(j0 + K3_TILE_TOK, j1s);
        for (int q = 0; q < ng; q++)
            if (gmax[q] > j0) b->fn(a, &g[q], j0, j1);
    }
    for (int q = 0; q < ng; q++)
        for (int r = 0; r < g[q].g; r++)
            g[q].acc[r][a->dv] = g[q].mx[r], g[q].acc[r][a->dv + 1] = g[q].sum[r];
}

/* Row i's output from the partials of the splits it reaches, in split order. */
static void merge_row(const tile_batch *b, int64_t i) {
    const k3_mla_tile_args *a = b->a;
    int dv = a->dv;
    int64_t ns = cdiv(row_len(a, i), K3_TILE_SPLIT);
    float *o = row_out(a, i);
    double M = -INFINITY, L = 0;
    for (int64_t s = 0; s < ns; s++) {
        const float *ps = partial(b, s, i);
        M = ps[dv] > M ? ps[dv] : M;
    }
    for (int64_t s = 0; s < ns; s++) {
        const float *ps = partial(b, s, i);
        if (ps[dv + 1] > 0) L += ps[dv + 1] * exp(ps[dv] - M);
    }
    memset(o, 0, sizeof(float) * (size_t)dv);
    for (int64_t s = 0; s < ns; s++) {
        const float *ps = partial(b, s, i);
        if (!(ps[dv + 1] > 0)) continue;
        float w = (float)(exp(ps[dv] - M) / L);
        for (int k = 0; k < dv; k++) o[k] += w * ps[k]; /* not contracted (ISO C), vectorized */
    }
}

/* Element k of cached row j: of the f32 cache f, or (f NULL) widened
 * exactly from the bf16 cache h (K16, V16, P16). */
static double cached(const float *f, const uint16_t *h, int64_t ld, int64_t j, int k) {
    return f ? (double)f[j * ld + k] : (double)k3_bf16_to_f32(h[j * ld + k]);
}

/* The scalar double reference of one row, over an f32 or a bf16 cache:
 * scores, softmax and sum in double. */
static void row_ref(const k3_mla_tile_args *a, int64_t i, double *acc) {
    int64_t len = row_len(a, i);
    const float *q = row_q(a, i), *qp = row_qp(a, i);
    const float *K = a->K16 ? NULL : a->K, *P = a->K16 ? NULL : a->P, *V = a->K16 ? NULL : a->V;
    double mx = -INFINITY, sum = 0;
    for (int pass = 0; pass < 2; pass++) {
        for (int64_t j = 0; j < len; j++) {
            double d = 0;
            for (int k = 0; k < a->dk; k++) d += (double)q[k] * cached(K, a->K16, a->ldk, j, k);
            for (int k = 0; k < a->dp; k++) d += (double)qp[k] * cached(P, a->P16, a->ldp, j, k);
            d *= a->scale;
            if (pass == 0) {
                mx = d > mx ? d : mx;
                continue;
            }
            double w = exp(d - mx);
            sum += w;
            for (int k = 0; k < a->dv; k++) acc[k] += w * cached(V, a->V16, a->ldv, j, k);
        }
    }
    float *o = row_out(a, i);
    for (int k = 0; k < a->dv; k++) o[k] = (float)(acc[k] / sum);
}

static void tile_ref(const k3_mla_tile_args *a) {
    double *acc = malloc(sizeof(double) * (size_t)(a->dv > 0 ? a->dv : 1));
    if (!acc) abort();
    for (int64_t i = 0; i < a->nh * a->nt; i++) {
        memset(acc, 0, sizeof(double) * (size_t)a->dv);
        row_ref(a, i, acc);
    }
    free(acc);
}

/* One batch of rows: its tasks, then its rows' merges, on the threads or
 * (par = 0) on this one. */
static void run_batch(const tile_batch *b, int par) {
    int64_t ntask = b->p->nsplit * b->nchunk;
#pragma omp parallel if (par)
    {
#pragma omp for schedule(dynamic, 1)
        for (int64_t k = 0; k < ntask; k++) run_task(b, k);
#pragma omp for schedule(static)
        for (int64_t i = b->b0; i < b->b0 + b->nb; i++) merge_row(b, i);
    }
}

void k3_mla_tile(const k3_mla_tile_args *a, float *scratch, int ref) {
    k3_kernels_mode mode = k3_kernels_active();
    if (ref || mode == K3_KERNELS_REF || !k3_cpu_has_avx2()) {
        tile_ref(a);
        return;
    }
    block_fn fn = mode == K3_KERNELS_AVX512 ? k3_mla_tile_block_avx512 : k3_mla_tile_block_avx2;
    if (a->K16)
        fn =
            mode == K3_KERNELS_AVX512 ? k3_mla_tile_block_bf16_avx512 : k3_mla_tile_block_bf16_avx2;
    tile_plan p = make_plan(a);
    float *qt = scratch + p.nsplit * p.brows * p.ld;
    int par = k3_par_worth(p.nsplit * cdiv(p.nrows, p.crows) > 1 && p.nrows * a->n >= 8192);
#pragma omp parallel for schedule(static) if (par)
    for (int64_t gi = 0; gi < p.ngroup; gi++) transpose_group(a, &p, qt, gi);
    for (int64_t b0 = 0; b0 < p.nrows; b0 += p.brows) {
        tile_batch b = {.a = a, .p = &p, .part = scratch, .qt = qt, .b0 = b0, .fn = fn};
        b.nb = min64(p.brows, p.nrows - b0);
        b.nchunk = cdiv(b.nb, p.crows);
        run_batch(&b, par);
    }
}
