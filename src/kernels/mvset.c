/* mvset.c — several matrix-vector products in one parallel region, rows cut
 * by weight bytes into one contiguous range per thread (see mvset.h). */
#include "kernels/mvset.h"
#include "kernels/runtime.h"
#include "kernels/avx2.h"
#include "kernels/matmul.h"
#include "kernels/scratch.h"
#include "kernels/steal.h"

#include <omp.h>

/* Below this many weights in the whole set one thread does it all (the
 * threshold k3_matvec uses for a single product). */
#define MVSET_PAR_MIN_WEIGHTS 32768

static uint64_t row_bytes(const k3_wmat *W) {
    k3_wmat one = *W;
    one.rows = 1;
    return k3_wmat_bytes(&one);
}

/* Cut t of nt (see k3_mvset_split): the position of byte total*t/nt,
 * rounded to the nearest multiple of K3_MVSET_ROW_ALIGN rows. Monotone in t. */
static k3_mvpos cut_at(const k3_mv *mv, int n, uint64_t total, int t, int nt) {
    if (t <= 0) return (k3_mvpos){0, 0};
    if (t >= nt || total == 0) return (k3_mvpos){n, 0};
    const uint64_t goal =
        total / (uint64_t)nt * (uint64_t)t + total % (uint64_t)nt * (uint64_t)t / (uint64_t)nt;
    uint64_t at = 0;
    for (int i = 0; i < n; i++) {
        const int64_t R = mv[i].W->rows;
        if (R <= 0) continue;
        const uint64_t b = row_bytes(mv[i].W), sz = b * (uint64_t)R;
        if (goal >= at + sz) {
            at += sz;
            continue;
        }
        const uint64_t rows = b ? (goal - at + b / 2) / b : 0; /* nearest row */
        int64_t r =
            (int64_t)((rows + K3_MVSET_ROW_ALIGN / 2) / K3_MVSET_ROW_ALIGN) * K3_MVSET_ROW_ALIGN;
        if (r >= R) return (k3_mvpos){i + 1, 0};
        return (k3_mvpos){i, r};
    }
    return (k3_mvpos){n, 0};
}

static uint64_t set_bytes(const k3_mv *mv, int n) {
    uint64_t total = 0;
    for (int i = 0; i < n; i++)
        if (mv[i].W->rows > 0) total += row_bytes(mv[i].W) * (uint64_t)mv[i].W->rows;
    return total;
}

void k3_mvset_split(const k3_mv *mv, int n, int nt, k3_mvpos *cut) {
    const uint64_t total = set_bytes(mv, n);
    for (int t = 0; t <= nt; t++) cut[t] = cut_at(mv, n, total, t, nt);
}

void k3_mvset_range(const k3_mv *mv, int n, k3_mvpos from, k3_mvpos to) {
    for (int i = from.prod; i < n && (i < to.prod || (i == to.prod && to.row > 0)); i++) {
        const k3_wmat *W = mv[i].W;
        const int64_t lo = i == from.prod ? from.row : 0, hi = i == to.prod ? to.row : W->rows;
        if (hi <= lo) continue;
        if (lo == 0 && hi == W->rows) {
            k3_matvec_serial(W, mv[i].x, mv[i].y);
            continue;
        }
        k3_wmat v = k3_wmat_rows(W, lo, hi - lo);
        k3_matvec_serial(&v, mv[i].x, mv[i].y + lo);
    }
}

/* This thread's share of the set among nt threads. */
static void run_share(const k3_mv *mv, int n, uint64_t total, int tid, int nt) {
    k3_mvset_range(mv, n, cut_at(mv, n, total, tid, nt), cut_at(mv, n, total, tid + 1, nt));
}

/* Most products a set runs with stealing (more: static shares). */
#define MVSET_STEAL_MAX 128
/* Weight bytes a thread claims at a time. */
#define MVSET_CLAIM_BYTES 65536

/* The set as blocks of K3_MVSET_ROW_ALIGN rows: product i has blocks
 * [bo[i], bo[i+1]). */
static k3_mvpos block_pos(const k3_mv *mv, int n, const int64_t *bo, int64_t b) {
    for (int i = 0; i < n; i++)
        if (b < bo[i + 1]) return (k3_mvpos){i, (b - bo[i]) * K3_MVSET_ROW_ALIGN};
    return (k3_mvpos){n, 0};
}

/* Shares cut by bytes as k3_mvset_split does, each thread taking its own from
 * the front and the others' from the back once done (kernels/steal.h). */
static void run_stealing(const k3_mv *mv, int n, uint64_t total, int nt) {
    int64_t bo[MVSET_STEAL_MAX + 1], bound[K3_STEAL_MAX + 1];
    bo[0] = 0;
    for (int i = 0; i < n; i++) {
        const int64_t R = mv[i].W->rows > 0 ? mv[i].W->rows : 0;
        bo[i + 1] = bo[i] + (R + K3_MVSET_ROW_ALIGN - 1) / K3_MVSET_ROW_ALIGN;
    }
    for (int t = 0; t <= nt; t++) { /* cuts fall on block starts or product ends */
        k3_mvpos p = cut_at(mv, n, total, t, nt);
        bound[t] = p.prod >= n ? bo[n] : bo[p.prod] + p.row / K3_MVSET_ROW_ALIGN;
    }
    const uint64_t per_block = bo[n] ? total / (uint64_t)bo[n] : 1;
    const int64_t per =
        per_block && per_block < MVSET_CLAIM_BYTES ? (int64_t)(MVSET_CLAIM_BYTES / per_block) : 1;
    k3_steal st;
    k3_steal_init(&st, nt, bo[n], bound);
#pragma omp parallel
    {
        const int tid = omp_get_thread_num();
        int64_t b, got;
        k3_prep_open(); /* the inputs stay put: each product prepares its x once a thread */
        while ((b = k3_steal_next(&st, tid, per, &got)) >= 0)
            k3_mvset_range(mv, n, block_pos(mv, n, bo, b), block_pos(mv, n, bo, b + got));
        k3_prep_close();
    }
}

void k3_mvset_run(const k3_mv *mv, int n) {
    int64_t weights = 0;
    for (int i = 0; i < n; i++)
        if (mv[i].W->rows > 0) weights += mv[i].W->rows * mv[i].W->cols;
    if (weights < MVSET_PAR_MIN_WEIGHTS || k3_kernels_serial() || omp_get_max_threads() < 2) {
        k3_mvset_range(mv, n, (k3_mvpos){0, 0}, (k3_mvpos){n, 0});
        return;
    }
    const uint64_t total = set_bytes(mv, n);
    const int nt = omp_get_max_threads();
    if (n <= MVSET_STEAL_MAX && nt <= K3_STEAL_MAX) {
        run_stealing(mv, n, total, nt);
        return;
    }
#pragma omp parallel
    run_share(mv, n, total, omp_get_thread_num(), omp_get_num_threads());
}

void k3_mvset_team(const k3_mv *mv, int n) {
    if (omp_get_level() == 0) { /* not inside any region: open one */
        k3_mvset_run(mv, n);
        return;
    }
    run_share(mv, n, set_bytes(mv, n), omp_get_thread_num(), omp_get_num_threads());
}
