/* moe.c — dense SiTU MLP and the latent MoE (spec §2.6, §2.7): sigmoid router
 * with selection-only correction bias and optional grouped top-k, routed
 * experts in the latent space (tokens gathered per expert so each expert's
 * weights are read once per call), routed_expert_norm, up-projection, and the
 * shared experts on the full hidden.
 *
 * The routed experts run in ONE parallel region over the rank's column blocks
 * (rowpar.h): each thread computes whole blocks (every selected expert's
 * slice, serial kernels, its own double accumulator), then the threads split
 * the tree sum of the blocks; one token takes a schedule over whole rows
 * instead (run_routed_one_token). The arithmetic is that of the straightforward
 * loop (k3_routed_experts_ref), so the bits do not depend on the threads.
 * Temporaries are per-thread grow-only buffers: no allocation per token. */
#include "model/moe.h"
#include "model/prefetch.h"
#include "base/mem.h"
#include "base/par.h"
#include "kernels/kernels.h"
#include "model/model.h"
#include "model/ops.h"
#include "model/rowpar.h"

#include <omp.h>
#include <stdlib.h>
#include <string.h>

/* Temporaries: per-thread grow-only buffers (rowpar.h, k3_thread_buf). */
#define FLOATS(slot, n) ((float *)k3_thread_buf(slot, sizeof(float) * (size_t)((n) > 0 ? (n) : 1)))

/* Bytes rounded up to 64 so arrays carved from one buffer stay aligned. */
static size_t al64(size_t b) {
    return (b + 63) & ~(size_t)63;
}

static int few_max = 8;

void k3_moe_set_few_tokens(int n) {
    few_max = n;
}

/* Y = W X for the n tokens of one expert. The kernel depends on n alone, so
 * every block split, thread count and TP rank picks the same one. Inside a
 * parallel region k3_matmul runs serially (kernels/avx2.h). */
static void expert_product(const k3_wmat *W, const float *X, int64_t n, float *Y) {
    if (n > 1 && n <= few_max)
        k3_matmul_few(W, X, n, Y);
    else
        k3_matmul(W, X, n, Y);
}

void k3_mlp_forward(const k3_model *m, const k3_mlp_w *w, const float *x, int64_t T, float *out) {
    k3_mlp_partial(m, w, x, T, out);
    k3_model_reduce(m, out, T * w->down.rows);
}

/* The MLP after its gate g and up u [T, I]: SiTU, then the blocked down product. */
static void mlp_tail(const k3_model *m, const k3_mlp_w *w, float *g, float *u, int64_t T,
                     float *out) {
    const int64_t I = w->gate.rows;
    float beta = (float)m->c->situ_beta, lbeta = (float)m->c->situ_linear_beta;
    k3_situ_vec(u, g, T * I, beta, lbeta);
    k3_rowpar_matmul(m, &w->down, u, T, out); /* canonical block order (rowpar.h) */
}

void k3_mlp_partial(const k3_model *m, const k3_mlp_w *w, const float *x, int64_t T, float *out) {
    int64_t I = w->gate.rows;
    float *g = FLOATS(K3_TB_MLP, 2 * T * I), *u = g + T * I;
    if (T == 1) { /* one token: gate and up in one region, rows cut by bytes (mvset.h) */
        k3_mv p[2] = {{&w->gate, x, g}, {&w->up, x, u}};
        k3_mvset_run(p, 2);
    } else {
        k3_matmul(&w->gate, x, T, g);
        k3_matmul(&w->up, x, T, u);
    }
    mlp_tail(m, w, g, u, T, out);
}

/* Index of the largest v[i] among i with !taken[i]; ties go to the lower index. */
static int argmax_free(const float *v, const uint8_t *taken, int n) {
    int best = -1;
    for (int i = 0; i < n; i++)
        if (!taken[i] && (best < 0 || v[i] > v[best])) best = i;
    return best;
}

/* MLX group limiting: score each group by the sum of its top-2 biased scores and
 * set the scores of the n_group - topk_group weakest groups to 0.0 (not -inf).
 * Groups with equal scores: the lower-numbered one is dropped first (stable sort). */
static void limit_groups(const k3_config *c, float *s) {
    int G = c->num_expert_group, per = c->num_experts / G;
    float gs[1024];
    uint8_t dropped[1024] = {0};
    for (int g = 0; g < G; g++) {
        float a = -INFINITY, b = -INFINITY; /* top-2 */
        for (int i = 0; i < per; i++) {
            float v = s[g * per + i];
            if (v > a) {
                b = a;
                a = v;
            } else if (v > b) {
                b = v;
            }
        }
        gs[g] = a + b;
    }
    for (int k = 0; k < G - c->topk_group; k++) {
        int worst = -1;
        for (int g = 0; g < G; g++)
            if (!dropped[g] && (worst < 0 || gs[g] < gs[worst])) worst = g;
        dropped[worst] = 1;
        for (int i = 0; i < per; i++) s[worst * per + i] = 0.0f;
    }
}

void k3_moe_select(const k3_config *c, const float *logits, const float *bias, int *idx,
                   float *wts) {
    int E = c->num_experts, K = c->num_experts_per_token;
    float *score = k3_thread_buf(K3_TB_MOE_SEL, (sizeof(float) * 2 + 1) * (size_t)E + 64);
    float *sel = score + E;
    uint8_t *taken = (uint8_t *)(sel + E);
    memset(taken, 0, (size_t)E);
    for (int e = 0; e < E; e++) {
        score[e] = k3_sigmoid(logits[e]);
        sel[e] = score[e] + bias[e];
    }
    if (c->num_expert_group > 1) limit_groups(c, sel);
    double sum = 0;
    for (int k = 0; k < K; k++) {
        idx[k] = argmax_free(sel, taken, E);
        taken[idx[k]] = 1;
        wts[k] = score[idx[k]];
        sum += wts[k];
    }
    for (int k = 0; k < K; k++) {
        if (K > 1 && c->moe_renormalize) wts[k] = (float)(wts[k] / (sum + 1e-20));
        wts[k] *= (float)c->routed_scaling_factor;
    }
}

/* The routing of T tokens: the selections sorted by expert (tokens in order
 * within an expert): expert e has entries [start[e], start[e+1]) of tok/wt,
 * and xg holds the gathered inputs (row i = xin[tok[i]]). */
typedef struct {
    const k3_model *m;
    const k3_moe_w *w;
    const int64_t *start, *tok;
    const float *wt, *xg;
    int64_t T, X, ml;
} moe_job;

/* One MoE call's router decision: each token's K experts (idx) and weights
 * (wts), and start[e] = the selections of experts below e (E + 1 entries).
 * Lives in the calling thread's K3_TB_MOE_ROUTE buffer until gather_tokens. */
typedef struct {
    int *idx;
    float *wts, *wt;
    int64_t *start, *tok;
    int64_t T;
} moe_route;

/* Router on x [T, D], top-k per token, selections counted by expert; then the
 * chosen experts' bytes are handed to the read-ahead pool (prefetch.h), so
 * their reads run while the caller computes what does not need them. */
static void route_tokens(const k3_model *m, const k3_moe_w *w, const float *x, int64_t T,
                         moe_route *r) {
    const k3_config *c = m->c;
    int E = c->num_experts, K = c->num_experts_per_token;
    const size_t nl = al64(sizeof(float) * (size_t)(T * E)),
                 ns = al64(sizeof(int) * (size_t)(T * K)),
                 nst = al64(sizeof(int64_t) * (size_t)(2 * (E + 1))),
                 nt = al64(sizeof(int64_t) * (size_t)(T * K));
    char *buf = k3_thread_buf(K3_TB_MOE_ROUTE, nl + 3 * ns + nst + nt);
    float *logits = (float *)buf;
    r->idx = (int *)(buf + nl);
    r->wts = (float *)(buf + nl + ns), r->wt = (float *)(buf + nl + 2 * ns);
    r->start = (int64_t *)(buf + nl + 3 * ns), r->tok = (int64_t *)(buf + nl + 3 * ns + nst);
    r->T = T;
    k3_matmul(&w->router, x, T, logits);
    for (int64_t t = 0; t < T; t++)
        k3_moe_select(c, logits + t * E, w->bias, r->idx + t * K, r->wts + t * K);
    /* counting sort of the T*K selections by expert */
    int64_t *start = r->start;
    memset(start, 0, sizeof(int64_t) * (size_t)(E + 1));
    for (int64_t i = 0; i < T * K; i++) start[r->idx[i] + 1]++;
    for (int e = 0; e < E; e++) start[e + 1] += start[e];
    k3_prefetch_route(m, w, start); /* read the chosen experts ahead (prefetch.h) */
}

/* The selections in expert order, with their inputs xin [T, X] gathered. */
static void gather_tokens(const k3_model *m, const k3_moe_w *w, const moe_route *r,
                          const float *xin, int64_t X, moe_job *j) {
    const int E = m->c->num_experts, K = m->c->num_experts_per_token;
    const int64_t T = r->T;
    int64_t *fill = r->start + E + 1;
    memcpy(fill, r->start, sizeof(int64_t) * (size_t)(E + 1));
    float *xg = FLOATS(K3_TB_MOE_XG, T * K * X);
    for (int64_t t = 0; t < T; t++)
        for (int k = 0; k < K; k++) {
            int64_t at = fill[r->idx[t * K + k]]++;
            r->tok[at] = t;
            r->wt[at] = r->wts[t * K + k];
            memcpy(xg + at * X, xin + t * X, sizeof(float) * (size_t)X);
        }
    int nb = k3_rowpar_local_blocks(m, &w->ed[0]);
    *j = (moe_job){m, w, r->start, r->tok, r->wt, xg, T, X, w->eg[0].rows / nb};
}

/* Block b of expert e (spec §5.1 / rowpar.h) on its n tokens: y[tok] += wt *
 * down_b(SiTU(up_b x, gate_b x)), where up_b / gate_b are rows [b*ml, (b+1)*ml)
 * and down_b the same columns. The blocks of an expert sum to it. */
static void expert_block(const moe_job *j, int e, int b, double *y) {
    const int64_t s0 = j->start[e], n = j->start[e + 1] - s0, ml = j->ml, X = j->X;
    const k3_moe_w *w = j->w;
    k3_wmat eg = k3_wmat_rows(&w->eg[e], b * ml, ml), eu = k3_wmat_rows(&w->eu[e], b * ml, ml);
    k3_wmat ed = k3_wmat_cols(&w->ed[e], b * ml, ml);
    float *g = FLOATS(K3_TB_EXPERT_GUD, 2 * n * ml + n * X), *u = g + n * ml, *d = u + n * ml;
    const float *xe = j->xg + s0 * X;
    expert_product(&eg, xe, n, g);
    expert_product(&eu, xe, n, u);
    float beta = (float)j->m->c->situ_beta, lbeta = (float)j->m->c->situ_linear_beta;
    k3_situ_vec(u, g, n * ml, beta, lbeta);
    expert_product(&ed, u, n, d);
    for (int64_t i = 0; i < n; i++) {
        double *yt = y + j->tok[s0 + i] * X;
        k3_vaxpy_d(yt, (double)j->wt[s0 + i], d + i * X, X); /* yt[c] += wt * d[c] */
    }
}

/* leaf [T, X] = block b summed over the selected experts in ascending order. */
static void run_block(const moe_job *j, int b, float *leaf) {
    const int E = j->m->c->num_experts;
    double *y = k3_thread_buf(K3_TB_EXPERT_Y, sizeof(double) * (size_t)(j->T * j->X));
    memset(y, 0, sizeof(double) * (size_t)(j->T * j->X));
    for (int e = 0; e < E; e++)
        if (j->start[e + 1] > j->start[e]) expert_block(j, e, b, y);
    for (int64_t i = 0; i < j->T * j->X; i++) leaf[i] = (float)y[i];
}

/* Rows of a down product per claim of the one-token schedule below: 16-row
 * groups (lines of the outputs never shared by two threads). */
#define DOWN_GROUP 16
/* Most experts the one-token schedule takes (K3 selects 16); more: run_block. */
#define K3_MOE_MAX_ACTIVE 32

/* Steps 2 and 3 of run_routed_one_token for the calling thread of a region,
 * or for all of it when called outside one (its worksharing constructs then
 * run on the calling thread). */
static void one_token_down(const moe_job *j, int nb, const int *sel, int k, const float *gu,
                           float *d, k3_steal *st, int64_t per, float *const *leaf, float *ylat) {
    const k3_moe_w *w = j->w;
    const int64_t X = j->X, ml = j->ml, I = ml * nb;
    const int64_t groups = (X + DOWN_GROUP - 1) / DOWN_GROUP;
    const int tid = omp_get_thread_num();
    int64_t it, got;
    k3_prep_open(); /* gu stays put: each expert's input is prepared once a thread */
    while ((it = k3_steal_next(st, tid, per, &got)) >= 0)
        for (int64_t e_it = it + got; it < e_it;) { /* the run's piece in one expert */
            const int i = (int)(it / groups);
            const int64_t stop = (int64_t)(i + 1) * groups < e_it ? (i + 1) * groups : e_it;
            const int64_t r0 = (it % groups) * DOWN_GROUP;
            const int64_t r1 = (stop - (int64_t)i * groups) * DOWN_GROUP < X
                                   ? (stop - (int64_t)i * groups) * DOWN_GROUP
                                   : X;
            const float *u = gu + (2 * i + 1) * I, *ub[K3_ROWPAR_BLOCKS];
            float *y[K3_ROWPAR_BLOCKS];
            for (int b = 0; b < nb; b++) {
                ub[b] = u + b * ml;
                y[b] = d + ((int64_t)i * nb + b) * X + r0;
            }
            k3_wmat Wv = k3_wmat_rows(&w->ed[sel[i]], r0, r1 - r0);
            k3_matvec_colblocks_serial(&Wv, nb, ub, y);
            it = stop;
        }
    k3_prep_close();
#pragma omp barrier
    double *y = k3_thread_buf(K3_TB_EXPERT_Y, sizeof(double) * DOWN_GROUP * 16);
    const int64_t chunk = DOWN_GROUP * 16, nch = (X + chunk - 1) / chunk;
#pragma omp for schedule(static) collapse(2)
    for (int b = 0; b < nb; b++)
        for (int64_t c = 0; c < nch; c++) {
            const int64_t c0 = c * chunk, len = X - c0 < chunk ? X - c0 : chunk;
            memset(y, 0, sizeof(double) * (size_t)len);
            for (int i = 0; i < k; i++)
                k3_vaxpy_d(y, (double)j->wt[j->start[sel[i]]], d + ((int64_t)i * nb + b) * X + c0,
                           len);
            for (int64_t r = 0; r < len; r++) leaf[b][c0 + r] = (float)y[r];
        }
    k3_tree_reduce_into(leaf, nb, X, ylat);
}

/* One token, nb > 1 blocks: the same sums as run_block for every block, in a
 * different order of work. Per block, an expert's gate and up are a row slice
 * and its down a column slice; run block by block (run_block), every down
 * row was a short strided piece (384 columns of MXFP4 on K3) and the
 * prefetch ahead in it fetched other blocks' columns: 10 GB/s at 2 threads on
 * the real slice. Here
 *   1. every selected expert's gate and up run as one set of products over
 *      whole rows (mvset.h), then SiTU: the rows of every block at once, each
 *      row computed as in its block's product;
 *   2. one region streams the down products row group by row group, each
 *      group's full-width rows computed block after block (the column views
 *      of run_block) into d[expert][block];
 *   3. each block's double sum over the experts in ascending order, k3_vaxpy_d
 *      as run_block does it, is rounded to its leaf, then the tree sum.
 * Every output element sees the arithmetic of run_block, so the bits are the
 * same (tests/test_model_*: TP and thread-count equality). */
static void run_routed_one_token(const moe_job *j, int nb, float *const *leaf, float *ylat) {
    const k3_moe_w *w = j->w;
    const int E = j->m->c->num_experts;
    const int64_t X = j->X, ml = j->ml, I = ml * nb;
    int sel[K3_MOE_MAX_ACTIVE], k = 0;
    for (int e = 0; e < E && k < K3_MOE_MAX_ACTIVE; e++)
        if (j->start[e + 1] > j->start[e]) sel[k++] = e;
    float *gu = FLOATS(K3_TB_EXPERT_GUD, 2 * k * I + (int64_t)k * nb * X);
    float *d = gu + 2 * k * I;
    k3_mv p[2 * K3_MOE_MAX_ACTIVE];
    for (int i = 0; i < k; i++) {
        const float *xe = j->xg + j->start[sel[i]] * X;
        p[2 * i] = (k3_mv){&w->eg[sel[i]], xe, gu + 2 * i * I};
        p[2 * i + 1] = (k3_mv){&w->eu[sel[i]], xe, gu + (2 * i + 1) * I};
    }
    k3_mvset_run(p, 2 * k);
    const float beta = (float)j->m->c->situ_beta, lbeta = (float)j->m->c->situ_linear_beta;
    for (int i = 0; i < k; i++) k3_situ_vec(gu + (2 * i + 1) * I, gu + 2 * i * I, I, beta, lbeta);
    const int64_t groups = (X + DOWN_GROUP - 1) / DOWN_GROUP;
    /* ~64 KiB of down rows a claim: each claim is nb kernel calls, whose
     * fixed cost outweighed 64 rows of a small expert's 32-column blocks */
    k3_wmat one = w->ed[sel[0]];
    one.rows = DOWN_GROUP;
    const uint64_t gb = k3_wmat_bytes(&one);
    const int64_t per = gb && gb < 65536 ? (int64_t)(65536 / gb) : 1;
    k3_steal st;
    k3_steal_init(&st, omp_get_max_threads(), k * groups, NULL);
    if (k3_par_direct(1)) { /* no region of one thread (base/par.h) */
        one_token_down(j, nb, sel, k, gu, d, &st, per, leaf, ylat);
        return;
    }
#pragma omp parallel
    one_token_down(j, nb, sel, k, gu, d, &st, per, leaf, ylat);
}

/* Tokens up to which a step's experts take the schedule over whole rows
 * (run_routed_rows): a decode batch. */
#define ROWS_TOKENS 16
/* Rows of a down product per work item of run_routed_rows (a multiple of 16). */
#define DOWN_CHUNK 256
/* Columns of the block sums per work item of run_routed_rows. */
#define SUM_CHUNK 512

/* A decode batch (1 < T <= ROWS_TOKENS), nb > 1 blocks: run_block's sums for
 * every block with the work regrouped, as run_routed_one_token does for one
 * token. Selection s (expert order, gather_tokens) of an expert with n tokens
 * starting at s0 keeps, per block b, its SiTU output [n, ml] at
 * us + s0*I + b*n*ml and its down partial [n, X] at
 * d + (s0*nb + b*n)*X. In one region:
 *   1. expert items: gate and up over whole rows (one product each instead
 *      of nb row slices: on small experts the per-call cost, the activations'
 *      preparation above all, outweighed the rows), SiTU, each block's
 *      slice copied out; every row is computed as in its block's product;
 *   2. (expert, 256 rows of down) items: 16 rows at a time with every
 *      block's column view inside (k3_matvec_colblocks_serial for one token,
 *      k3_matmul_few_colblocks_serial for a few), so the down rows are read
 *      once in address order instead of as nb strided passes of ml columns;
 *   3. (block, 512 columns) items: the double sum over the experts in
 *      ascending order, k3_vaxpy_d per token as run_block, rounded to the
 *      leaf;
 * then the tree. The kernels compute each row independently of the rows
 * beside it, so every element sees run_block's arithmetic: the same bits. */
/* The region of run_routed_rows: steps 1-3 and the tree, for the k selected
 * experts sel[0..k) with us and d laid out as above. Its worksharing is
 * orphaned, so without a region it runs on the calling thread (base/par.h). */
static void routed_rows_body(const moe_job *j, int nb, const int *sel, int k, float *us, float *d,
                             float *const *leaf, float *ylat) {
    const k3_moe_w *w = j->w;
    const int64_t X = j->X, ml = j->ml, I = ml * nb, T = j->T;
    const int64_t nrc = (X + DOWN_CHUNK - 1) / DOWN_CHUNK, nsc = (X + SUM_CHUNK - 1) / SUM_CHUNK;
    const float beta = (float)j->m->c->situ_beta, lbeta = (float)j->m->c->situ_linear_beta;
#pragma omp for schedule(dynamic, 1)
    for (int64_t it = 0; it < k; it++) {
        const int e = sel[it];
        const int64_t s0 = j->start[e], n = j->start[e + 1] - s0;
        float *g = FLOATS(K3_TB_RP_TMP, 2 * n * I), *u = g + n * I;
        expert_product(&w->eg[e], j->xg + s0 * X, n, g);
        expert_product(&w->eu[e], j->xg + s0 * X, n, u);
        k3_situ_vec(u, g, n * I, beta, lbeta);
        for (int b = 0; b < nb; b++) /* each block's [n, ml] slice, where down reads it */
            for (int64_t t = 0; t < n; t++)
                memcpy(us + s0 * I + b * n * ml + t * ml, u + t * I + b * ml,
                       sizeof(float) * (size_t)ml);
    }
    k3_prep_open(); /* us stays put until the loop's end (scratch.h) */
#pragma omp for schedule(dynamic, 1)
    for (int64_t it = 0; it < (int64_t)k * nrc; it++) {
        const int e = sel[it / nrc];
        const int64_t s0 = j->start[e], n = j->start[e + 1] - s0;
        const int64_t r0 = (it % nrc) * DOWN_CHUNK, nr = X - r0 < DOWN_CHUNK ? X - r0 : DOWN_CHUNK;
        const float *ub[K3_ROWPAR_BLOCKS];
        float *yb[K3_ROWPAR_BLOCKS];
        for (int b = 0; b < nb; b++) ub[b] = us + s0 * I + b * n * ml;
        k3_wmat Wv = k3_wmat_rows(&w->ed[e], r0, nr);
        if (n == 1) { /* expert_product's k3_matvec, per block */
            for (int b = 0; b < nb; b++) yb[b] = d + (s0 * nb + b) * X + r0;
            k3_matvec_colblocks_serial(&Wv, nb, ub, yb);
            continue;
        }
        float *y = FLOATS(K3_TB_RP_TMP, nb * n * nr);
        for (int b = 0; b < nb; b++) yb[b] = y + b * n * nr;
        if (n <= few_max) { /* expert_product's k3_matmul_few, per block */
            k3_matmul_few_colblocks_serial(&Wv, nb, ub, n, yb);
        } else {
            for (int b = 0; b < nb; b++) {
                k3_wmat v = k3_wmat_cols(&Wv, b * ml, ml);
                expert_product(&v, ub[b], n, yb[b]);
            }
        }
        for (int b = 0; b < nb; b++)
            for (int64_t t = 0; t < n; t++)
                memcpy(d + (s0 * nb + b * n) * X + t * X + r0, yb[b] + t * nr,
                       sizeof(float) * (size_t)nr);
    }
    k3_prep_close();
#pragma omp for schedule(dynamic, 1)
    for (int64_t it = 0; it < nb * nsc; it++) {
        const int b = (int)(it / nsc);
        const int64_t c0 = (it % nsc) * SUM_CHUNK, len = X - c0 < SUM_CHUNK ? X - c0 : SUM_CHUNK;
        double *y = k3_thread_buf(K3_TB_EXPERT_Y, sizeof(double) * (size_t)(T * len));
        memset(y, 0, sizeof(double) * (size_t)(T * len));
        for (int i = 0; i < k; i++) {
            const int64_t s0 = j->start[sel[i]], n = j->start[sel[i] + 1] - s0;
            const float *db = d + (s0 * nb + b * n) * X;
            for (int64_t t = 0; t < n; t++)
                k3_vaxpy_d(y + j->tok[s0 + t] * len, (double)j->wt[s0 + t], db + t * X + c0, len);
        }
        for (int64_t t = 0; t < T; t++)
            for (int64_t c = 0; c < len; c++) leaf[b][t * X + c0 + c] = (float)y[t * len + c];
    }
    k3_tree_reduce_into(leaf, nb, T * X, ylat);
}

static void run_routed_rows(const moe_job *j, int nb, float *const *leaf, float *ylat) {
    const int E = j->m->c->num_experts;
    const int64_t I = j->ml * nb, S = j->start[E];
    int *sel = k3_thread_buf(K3_TB_MOE_SEL, sizeof(int) * (size_t)E);
    int k = 0;
    for (int e = 0; e < E; e++)
        if (j->start[e + 1] > j->start[e]) sel[k++] = e;
    float *us = FLOATS(K3_TB_EXPERT_GUD, S * I + S * nb * j->X);
    float *d = us + S * I;
    if (k3_par_direct(1)) { /* no region of one thread (base/par.h) */
        routed_rows_body(j, nb, sel, k, us, d, leaf, ylat);
        return;
    }
#pragma omp parallel
    routed_rows_body(j, nb, sel, k, us, d, leaf, ylat);
}

/* Every block's sums, any thread any block (the same bits), then the tree.
 * Orphaned worksharing, as routed_rows_body. */
static void routed_blocks_body(const moe_job *j, int nb, float *const *leaf, float *ylat) {
#pragma omp for schedule(dynamic, 1)
    for (int b = 0; b < nb; b++) run_block(j, b, leaf[b]);
    k3_tree_reduce_into(leaf, nb, j->T * j->X, ylat);
}

/* ylat [T, X] = the routed experts of a routing on xin [T, X] (moe.h). */
static void run_routed(const k3_model *m, const k3_moe_w *w, const moe_route *r, const float *xin,
                       int64_t X, float *ylat) {
    moe_job j;
    gather_tokens(m, w, r, xin, X, &j);
    const int64_t T = r->T;
    const int nb = k3_rowpar_local_blocks(m, &w->ed[0]);
    if (nb == 1) { /* one block: the kernels split each product instead */
        run_block(&j, 0, ylat);
        return;
    }
    float *leaves = FLOATS(K3_TB_MOE_LEAVES, nb * T * X), *leaf[K3_ROWPAR_BLOCKS];
    for (int b = 0; b < nb; b++) leaf[b] = leaves + (int64_t)b * T * X;
    if (T == 1 && j.m->c->num_experts_per_token <= K3_MOE_MAX_ACTIVE &&
        omp_get_max_threads() <= K3_STEAL_MAX && !omp_in_parallel()) {
        run_routed_one_token(&j, nb, leaf, ylat);
        return;
    }
    if (T > 1 && T <= ROWS_TOKENS && !omp_in_parallel()) {
        run_routed_rows(&j, nb, leaf, ylat);
        return;
    }
    if (k3_par_direct(1)) { /* no region of one thread (base/par.h) */
        routed_blocks_body(&j, nb, leaf, ylat);
        return;
    }
#pragma omp parallel
    routed_blocks_body(&j, nb, leaf, ylat);
}

void k3_routed_experts(const k3_model *m, const k3_moe_w *w, const float *x, const float *xin,
                       int64_t T, int64_t X, float *ylat) {
    moe_route r;
    route_tokens(m, w, x, T, &r);
    run_routed(m, w, &r, xin, X, ylat);
}

void k3_routed_experts_ref(const k3_model *m, const k3_moe_w *w, const float *x, const float *xin,
                           int64_t T, int64_t X, float *ylat) {
    moe_route r;
    moe_job j;
    route_tokens(m, w, x, T, &r);
    gather_tokens(m, w, &r, xin, X, &j);
    const int nb = k3_rowpar_local_blocks(m, &w->ed[0]);
    float *leaves = k3_xmalloc(sizeof(float) * (size_t)(nb * T * X));
    float *leaf[K3_ROWPAR_BLOCKS];
    for (int b = 0; b < nb; b++) {
        leaf[b] = leaves + (int64_t)b * T * X;
        run_block(&j, b, leaf[b]); /* not in a region: threaded kernels */
    }
    k3_tree_reduce(leaf, nb, T * X);
    memcpy(ylat, leaf[0], sizeof(float) * (size_t)(T * X));
    free(leaves);
}

void k3_moe_forward(const k3_model *m, const k3_moe_w *w, const float *x, int64_t T, float *out) {
    const k3_config *c = m->c;
    int64_t D = c->hidden_size, L = c->routed_expert_hidden_size, X = L ? L : D;
    /* ylat [T, X] and, with shared experts, their partial output [T, D] behind it:
     * tensor parallel sums both in ONE all-reduce, before the norm (spec §5.1). */
    int64_t ns = c->num_shared_experts ? T * D : 0;
    float *ylat = FLOATS(K3_TB_MOE_LAT, T * X + ns + (L ? T * L : 0)), *xin = NULL;
    float *shared = ylat + T * X;
    /* The router first: the chosen experts' reads (prefetch.h) then overlap the
     * latent down-projection and the shared experts, which do not need them. */
    moe_route r;
    route_tokens(m, w, x, T, &r);
    if (L) xin = ylat + T * X + ns;
    if (T == 1 && (L || ns)) {
        /* decode: the latent down-projection and the shared experts' gate and
         * up in one region, rows cut by bytes (mvset.h); the same bits as one
         * by one */
        const int64_t I = w->shared.gate.rows;
        float *g = ns ? FLOATS(K3_TB_MLP, 2 * I) : NULL, *u = g ? g + I : NULL;
        k3_mv p[3];
        int np = 0;
        if (L) p[np++] = (k3_mv){&w->lat_down, x, xin};
        if (ns) {
            p[np++] = (k3_mv){&w->shared.gate, x, g};
            p[np++] = (k3_mv){&w->shared.up, x, u};
        }
        k3_mvset_run(p, np);
        if (ns) mlp_tail(m, &w->shared, g, u, T, shared);
    } else {
        if (L) k3_matmul(&w->lat_down, x, T, xin);
        if (ns) k3_mlp_partial(m, &w->shared, x, T, shared);
    }
    run_routed(m, w, &r, L ? xin : x, X, ylat);
    k3_model_reduce(m, ylat, T * X + ns); /* before the norm (spec §5.1) */
    if (L && c->latent_moe_use_norm)
        k3_rmsnorm_rows(ylat, T, L, w->lat_norm, c->rms_norm_eps, ylat);
    if (L)
        k3_matmul(&w->lat_up, ylat, T, out);
    else
        memcpy(out, ylat, sizeof(float) * (size_t)(T * D));
    if (ns)
        for (int64_t i = 0; i < T * D; i++) out[i] += shared[i];
}
