/* test_kernels_mvset.c — sets of matrix-vector products in one region (kernels/mvset.h).
 *
 * The byte split on awkward sets (row counts not multiples of the 16-row
 * alignment, empty products, mixed formats whose rows cost different bytes,
 * more threads than rows): cuts start at the start, end at the end, never
 * decrease, fall on aligned rows inside a product, and each range holds
 * total/nt bytes give or take 16 rows of its two ends. The results: the set
 * run with 1, 2 and 3 threads, as a team inside a caller's region, and in
 * every kernel family (AVX-512, AVX2, reference) must be bitwise the separate
 * k3_matvec calls, every output row written exactly once. */
#include "kernels/runtime.h"
#include "kernels/matmul.h"
#include "kernels/mvset.h"
#include "helpers.h"
#include "t.h"

#include <omp.h>
#include <stdint.h>

/* An awkward set: mixed formats, odd row counts, an empty product, one-row
 * products, a product of fewer rows than the alignment. */
#define NSET 8
typedef struct {
    owned_mat m[NSET];
    k3_mv mv[NSET];
    float *x[NSET], *y[NSET], *want[NSET];
} set_t;

static void make_set(set_t *s, int64_t scale) {
    s->m[0] = make_mat(K3_W_BF16, 37 * scale, 200, 0, 0, K3_W_BF16);
    s->m[1] = make_mat(K3_W_MXFP4, 16 * scale + 5, 256, 4, 32, K3_W_BF16);
    s->m[2] = make_mat(K3_W_BF16, 0, 64, 0, 0, K3_W_BF16);
    s->m[3] = make_mat(K3_W_AFFINE, 129 * scale, 128, 4, 32, K3_W_BF16);
    s->m[4] = make_mat(K3_W_BF16, 1, 72, 0, 0, K3_W_BF16);
    s->m[5] = make_mat(K3_W_F32, 300 * scale + 3, 33, 0, 0, K3_W_BF16);
    s->m[6] = make_mat(K3_W_AFFINE, 7, 256, 8, 64, K3_W_BF16);
    s->m[7] = make_mat(K3_W_MXFP4, 1, 64, 4, 32, K3_W_BF16);
    for (int i = 0; i < NSET; i++) {
        const k3_wmat *W = &s->m[i].w;
        s->x[i] = malloc(sizeof(float) * (size_t)(W->cols + 1));
        s->y[i] = malloc(sizeof(float) * (size_t)(W->rows + 1));
        s->want[i] = malloc(sizeof(float) * (size_t)(W->rows + 1));
        for (int64_t c = 0; c < W->cols; c++) s->x[i][c] = (float)(2 * t_rand() - 1);
        s->mv[i] = (k3_mv){W, s->x[i], s->y[i]};
    }
}

static void free_set(set_t *s) {
    for (int i = 0; i < NSET; i++) {
        free_mat(&s->m[i]);
        free(s->x[i]);
        free(s->y[i]);
        free(s->want[i]);
    }
}

static uint64_t row_bytes(const k3_wmat *W) {
    k3_wmat one = *W;
    one.rows = 1;
    return k3_wmat_bytes(&one);
}

/* Bytes from the start of the set to position p. */
static uint64_t bytes_to(const k3_mv *mv, k3_mvpos p) {
    uint64_t b = 0;
    for (int i = 0; i < p.prod; i++) b += row_bytes(mv[i].W) * (uint64_t)mv[i].W->rows;
    if (p.row > 0) b += row_bytes(mv[p.prod].W) * (uint64_t)p.row;
    return b;
}

TEST(split_on_awkward_sets) {
    set_t s;
    make_set(&s, 1);
    uint64_t total = bytes_to(s.mv, (k3_mvpos){NSET, 0}), maxrow = 0;
    for (int i = 0; i < NSET; i++)
        if (row_bytes(s.mv[i].W) > maxrow) maxrow = row_bytes(s.mv[i].W);
    for (int nt = 1; nt <= 64; nt += nt < 9 ? 1 : 11) {
        k3_mvpos cut[80];
        k3_mvset_split(s.mv, NSET, nt, cut);
        CHECK(cut[0].prod == 0 && cut[0].row == 0, "nt %d: first cut", nt);
        CHECK(cut[nt].prod == NSET && cut[nt].row == 0, "nt %d: last cut", nt);
        for (int t = 0; t <= nt; t++) {
            if (cut[t].prod < NSET) {
                CHECK(cut[t].row >= 0 && cut[t].row < s.mv[cut[t].prod].W->rows,
                      "nt %d cut %d: row %lld of a %lld-row product", nt, t, (long long)cut[t].row,
                      (long long)s.mv[cut[t].prod].W->rows);
                CHECK(cut[t].row % K3_MVSET_ROW_ALIGN == 0, "nt %d cut %d: row %lld unaligned", nt,
                      t, (long long)cut[t].row);
            }
            if (t > 0) {
                uint64_t a = bytes_to(s.mv, cut[t - 1]), b = bytes_to(s.mv, cut[t]);
                CHECK(b >= a, "nt %d: cut %d goes back", nt, t);
                double share = (double)total / nt, slack = 2.0 * K3_MVSET_ROW_ALIGN * maxrow + 1;
                CHECK(fabs((double)(b - a) - share) <= slack,
                      "nt %d range %d: %llu bytes, share %.0f", nt, t - 1,
                      (unsigned long long)(b - a), share);
            }
        }
    }
    /* one thread: everything; a set of nothing: empty ranges */
    k3_mvpos one[2];
    k3_mvset_split(s.mv + 2, 1, 1, one);
    CHECK(one[0].prod == 0 && one[1].prod == 1 && one[1].row == 0);
    free_set(&s);
}

/* Run the set (how: 0 = k3_mvset_run, 1 = team inside a region) with nt
 * threads; 1 if every y is bitwise want. */
static int run_matches(set_t *s, int nt, int how) {
    for (int i = 0; i < NSET; i++)
        for (int64_t r = 0; r < s->m[i].w.rows; r++) s->y[i][r] = NAN;
    omp_set_num_threads(nt);
    if (how == 0) {
        k3_mvset_run(s->mv, NSET);
    } else {
#pragma omp parallel
        {
            k3_mvset_team(s->mv, NSET);
#pragma omp barrier
        }
    }
    int same = 1;
    for (int i = 0; i < NSET; i++)
        same &= memcmp(s->y[i], s->want[i], sizeof(float) * (size_t)s->m[i].w.rows) == 0;
    return same;
}

static void bitwise_in_mode(k3_kernels_mode mode, const char *name) {
    k3_kernels_set_mode(mode);
    for (int64_t scale = 1; scale <= 40; scale += 39) { /* below and above the region threshold */
        set_t s;
        make_set(&s, scale);
        omp_set_num_threads(2);
        for (int i = 0; i < NSET; i++) k3_matvec(&s.m[i].w, s.x[i], s.want[i]);
        for (int nt = 1; nt <= 3; nt++)
            for (int how = 0; how < 2; how++)
                CHECK(run_matches(&s, nt, how), "%s, scale %lld, %d threads, %s", name,
                      (long long)scale, nt, how ? "team" : "own region");
        free_set(&s);
    }
    omp_set_num_threads(2);
    k3_kernels_set_mode(K3_KERNELS_AUTO);
}

TEST(set_bitwise_separate_products) {
    bitwise_in_mode(K3_KERNELS_AUTO, "auto");
    bitwise_in_mode(K3_KERNELS_AVX2, "avx2");
    bitwise_in_mode(K3_KERNELS_REF, "ref");
}

/* A range run by hand covers exactly its rows: outside it y is untouched. */
TEST(range_touches_only_its_rows) {
    set_t s;
    make_set(&s, 2);
    k3_mvpos cut[4];
    k3_mvset_split(s.mv, NSET, 3, cut);
    for (int i = 0; i < NSET; i++)
        for (int64_t r = 0; r < s.m[i].w.rows; r++) s.y[i][r] = -7.0f;
    k3_mvset_range(s.mv, NSET, cut[1], cut[2]);
    uint64_t b1 = bytes_to(s.mv, cut[1]), b2 = bytes_to(s.mv, cut[2]);
    for (int i = 0; i < NSET; i++)
        for (int64_t r = 0; r < s.m[i].w.rows; r++) {
            uint64_t at = bytes_to(s.mv, (k3_mvpos){i, r});
            int inside = at >= b1 && at < b2;
            CHECK((s.y[i][r] != -7.0f) == inside, "product %d row %lld", i, (long long)r);
        }
    free_set(&s);
}

int main(void) {
    t_seed(7);
    RUN(split_on_awkward_sets);
    RUN(set_bitwise_separate_products);
    RUN(range_touches_only_its_rows);
    return t_done();
}
