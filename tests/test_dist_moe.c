/* test_dist_moe.c — the latent-MoE reduction under tensor parallelism, and TP
 * logits in one process (ranks as threads, src/dist/local.h).
 *
 * Fixture tests/fixtures/tp4-moe (made by tests/fixtures/tp4_make.py with the
 * oracle) scales the routed experts so that the latent routed sum — the input
 * of routed_expert_norm, eps = 1e-5 — is ~1500x sqrt(eps). RMSNorm is then
 * far from linear, so normalising each rank's partial sum before the
 * all-reduce (the classic bug) changes the MoE output by O(1). The test
 * records every rank's partial [y_lat | shared] as it enters the all-reduce
 * of layer 1's MoE and checks, for TP2 and TP4:
 *   - the fixture keeps its power: latent sum and per-rank partials >= 100 sqrt(eps);
 *   - the sum of the partials equals the oracle's latent sum;
 *   - reduce-then-norm (what the engine does) matches the oracle's MoE output,
 *     norm-then-reduce does not, and their error ratio is large;
 *   - the full logits of every rank equal the single-process logits exactly
 *     and the oracle's within 1e-4;
 *   - negative control: a comm that normalises the partials before summing
 *     (norm before reduce, through the engine's real code path) fails the
 *     logits comparison by far.
 * It also reports how little a wrong A_log slice moves the logits (why
 * test_dist_slices checks slices structurally). */
#include "helpers.h"
#include "t.h"

#include <omp.h>
#include <stdint.h>

#include "base/err.h"
#include "dist/local.h"
#include "model/model.h"
#include "model/ops.h"
#include "model/parallel.h"

#define FX "tests/fixtures/tp4-moe"

/* Exactly n floats from path, or NULL. */
static float *read_floats(const char *path, int64_t n) {
    int64_t got = 0;
    float *v = t_read_floats(path, &got);
    if (v && got != n) {
        free(v);
        return NULL;
    }
    return v;
}

static int32_t g_tok[64];
static int64_t g_T;

static void read_tokens(void) {
    FILE *f = fopen(FX "/expected/tokens.txt", "r");
    g_T = 0;
    int v;
    while (f && g_T < 64 && fscanf(f, "%d,", &v) == 1) g_tok[g_T++] = v;
    if (f) fclose(f);
}

/* ---- a comm wrapper that records (and optionally sabotages) the MoE reduction ---- */

typedef struct {
    const k3_comm *inner;
    int64_t moe_n;      /* float count of the MoE all-reduce: T * (latent + hidden) */
    int64_t X;          /* latent width */
    float *partial;     /* copy of this rank's buffer entering the first MoE reduce */
    const float *lnorm; /* routed_expert_norm weight (sabotage only) */
    double eps;
    int sabotage; /* 1: RMS-normalise the latent partial before summing */
    k3_comm self;
} rec_comm;

static int rec_allreduce(void *ctx, float *buf, size_t n) {
    rec_comm *rc = ctx;
    if ((int64_t)n == rc->moe_n) {
        if (!rc->partial) {
            rc->partial = malloc(n * sizeof(float));
            memcpy(rc->partial, buf, n * sizeof(float));
        }
        if (rc->sabotage) k3_rmsnorm_rows(buf, g_T, rc->X, rc->lnorm, rc->eps, buf); /* the bug */
    }
    return rc->inner->allreduce_sum(rc->inner->ctx, buf, n);
}
static int rec_send(void *ctx, int peer, const float *b, size_t n) {
    rec_comm *rc = ctx;
    return rc->inner->send(rc->inner->ctx, peer, b, n);
}
static int rec_recv(void *ctx, int peer, float *b, size_t n) {
    rec_comm *rc = ctx;
    return rc->inner->recv(rc->inner->ctx, peer, b, n);
}

/* ---- N ranks as threads ---- */

typedef struct {
    int N, sabotage, wrong_alog;
    k3_model *m[8];
    rec_comm rc[8];
    float *logits[8];
    k3_local_group *g;
} tp_run;

static int rank_main(int r, void *arg) {
    tp_run *run = arg;
    omp_set_num_threads(1); /* N ranks share the machine's cores */
    k3_model *m = run->m[r];
    k3_seq *s = k3_seq_new(m);
    int rc = k3_forward(s, g_tok, g_T, run->logits[r], 1);
    k3_seq_free(s);
    return rc;
}

/* Load the N slices, attach recording comms, run the fixture tokens (prefill). */
static int tp_forward(tp_run *run, int N, int sabotage, int wrong_alog) {
    memset(run, 0, sizeof *run);
    run->N = N, run->sabotage = sabotage, run->wrong_alog = wrong_alog;
    run->g = k3_local_group_new(N);
    for (int r = 0; r < N; r++) {
        k3_load_opts o = {.tp_rank = r, .tp_size = N, .pp_size = 1};
        k3_model *m = run->m[r] = k3_model_load(FX, &o);
        if (!m) return -1;
        const k3_config *c = &m->ck.cfg;
        rec_comm *rc = &run->rc[r];
        rc->inner = k3_local_comm(run->g, r);
        rc->X = c->routed_expert_hidden_size;
        rc->moe_n = g_T * (rc->X + c->hidden_size);
        rc->lnorm = m->L[1].moe.lat_norm;
        rc->eps = c->rms_norm_eps;
        rc->sabotage = sabotage;
        rc->self = (k3_comm){rc, r, N, rec_allreduce, rec_send, rec_recv, NULL};
        if (k3_model_set_comm(m, &rc->self)) return -1;
        if (wrong_alog && r > 0) /* every rank uses heads 0.. of A_log: a classic slicing bug */
            for (int i = 0; i < c->num_hidden_layers; i++)
                if (m->L[i].is_kda)
                    memcpy(m->L[i].kda.A, run->m[0]->L[i].kda.A,
                           sizeof(float) * (size_t)m->c->kda_heads);
        run->logits[r] = calloc((size_t)(g_T * c->vocab_size), sizeof(float));
    }
    return k3_local_run(run->g, rank_main, run) ? -1 : 0;
}

static void tp_free(tp_run *run) {
    for (int r = 0; r < run->N; r++) {
        k3_model_free(run->m[r]);
        free(run->rc[r].partial);
        free(run->logits[r]);
    }
    k3_local_group_free(run->g);
}

/* y[t] = W x[t] for a [rows, cols] view (test-side scalar reference). */
static void apply(const k3_wmat *W, const float *x, int64_t T, float *y) {
    float *row = malloc(sizeof(float) * (size_t)W->cols);
    for (int64_t t = 0; t < T; t++)
        for (int64_t r = 0; r < W->rows; r++) {
            k3_wmat_row(W, r, 0, W->cols, row);
            double a = 0;
            for (int64_t c = 0; c < W->cols; c++) a += (double)row[c] * x[t * W->cols + c];
            y[t * W->rows + r] = (float)a;
        }
    free(row);
}

static float *single_process_logits(int64_t V) {
    k3_model *m = k3_model_load(FX, NULL);
    float *l = calloc((size_t)(g_T * V), sizeof(float));
    k3_seq *s = m ? k3_seq_new(m) : NULL;
    if (!s || k3_forward(s, g_tok, g_T, l, 1)) {
        free(l);
        l = NULL;
    }
    k3_seq_free(s);
    k3_model_free(m);
    return l;
}

static void moe_reduction(int N) {
    tp_run run;
    int rc = tp_forward(&run, N, 0, 0);
    CHECK(rc == 0, "TP%d forward: %s", N, k3_errmsg());
    if (rc) return tp_free(&run);
    const k3_config *c = &run.m[0]->ck.cfg;
    int64_t T = g_T, X = c->routed_expert_hidden_size, D = c->hidden_size, V = c->vocab_size;
    double eps = c->rms_norm_eps;
    const k3_moe_w *w = &run.m[0]->L[1].moe; /* replicated parts are the same on every rank */
    float *ylat_ref = read_floats(FX "/expected/moe1_ylat.f32", T * X);
    float *out_ref = read_floats(FX "/expected/moe1_out.f32", T * D);
    float *oracle = read_floats(FX "/expected/logits.f32", T * V);
    CHECK(ylat_ref && out_ref && oracle, "fixture files missing");
    for (int r = 0; r < N; r++)
        CHECK(run.rc[r].partial != NULL, "rank %d: no MoE all-reduce seen", r);
    if (!ylat_ref || !out_ref || !oracle || !run.rc[N - 1].partial) return tp_free(&run);

    /* the sums of the partials, in rank order (f64) */
    float *ysum = calloc((size_t)(T * X), sizeof(float)),
          *shsum = calloc((size_t)(T * D), sizeof(float));
    double min_part_rms = INFINITY;
    for (int64_t i = 0; i < T * X; i++) {
        double a = 0;
        for (int r = 0; r < N; r++) a += run.rc[r].partial[i];
        ysum[i] = (float)a;
    }
    for (int64_t i = 0; i < T * D; i++) {
        double a = 0;
        for (int r = 0; r < N; r++) a += run.rc[r].partial[T * X + i];
        shsum[i] = (float)a;
    }
    double min_sum_rms = INFINITY;
    for (int64_t t = 0; t < T; t++) {
        double s = 0;
        for (int64_t j = 0; j < X; j++) s += (double)ysum[t * X + j] * ysum[t * X + j];
        if (sqrt(s / X) < min_sum_rms) min_sum_rms = sqrt(s / X);
        for (int r = 0; r < N; r++) {
            double p = 0;
            for (int64_t j = 0; j < X; j++)
                p += (double)run.rc[r].partial[t * X + j] * run.rc[r].partial[t * X + j];
            if (sqrt(p / X) < min_part_rms) min_part_rms = sqrt(p / X);
        }
    }
    CHECK(min_sum_rms >= 100 * sqrt(eps),
          "latent sum rms %.3g < 100 sqrt(eps): the fixture lost its power", min_sum_rms);
    CHECK(min_part_rms >= 100 * sqrt(eps), "per-rank partial rms %.3g < 100 sqrt(eps)",
          min_part_rms);
    double ylat_err = t_max_diff(ysum, ylat_ref, T * X);
    CHECK(ylat_err < 1e-4, "sum of partials vs oracle latent sum: %.3g", ylat_err);

    /* right order: up(norm(sum y_r)) + sum shared_r; wrong: up(sum norm(y_r)) + sum shared_r */
    float *tmp = malloc(sizeof(float) * (size_t)(T * X)),
          *right = malloc(sizeof(float) * (size_t)(T * D));
    float *wrong = malloc(sizeof(float) * (size_t)(T * D)),
          *acc = calloc((size_t)(T * X), sizeof(float));
    k3_rmsnorm_rows(ysum, T, X, w->lat_norm, eps, tmp);
    apply(&w->lat_up, tmp, T, right);
    for (int r = 0; r < N; r++) {
        k3_rmsnorm_rows(run.rc[r].partial, T, X, w->lat_norm, eps, tmp);
        for (int64_t i = 0; i < T * X; i++) acc[i] += tmp[i];
    }
    apply(&w->lat_up, acc, T, wrong);
    for (int64_t i = 0; i < T * D; i++) right[i] += shsum[i], wrong[i] += shsum[i];
    double err_right = t_max_diff(right, out_ref, T * D),
           err_wrong = t_max_diff(wrong, out_ref, T * D);
    printf("  TP%d: latent sum rms >= %.3f (%.0fx sqrt(eps)), partial rms >= %.3f; MoE output vs "
           "oracle: "
           "reduce-then-norm %.3g, norm-then-reduce %.3g (ratio %.3g)\n",
           N, min_sum_rms, min_sum_rms / sqrt(eps), min_part_rms, err_right, err_wrong,
           err_wrong / err_right);
    CHECK(err_right < 1e-4, "reduce-then-norm must match the oracle: %.3g", err_right);
    CHECK(err_wrong > 1e-1, "norm-then-reduce must not match: %.3g", err_wrong);
    CHECK(err_wrong / err_right > 1e4, "error ratio %.3g is too small to tell the orders apart",
          err_wrong / err_right);

    /* what the engine returned: every rank's logits = single process exactly, and the oracle's */
    float *one = single_process_logits(V);
    CHECK(one != NULL, "%s", k3_errmsg());
    for (int r = 0; one && r < N; r++) {
        double d1 = t_max_diff(run.logits[r], one, T * V),
               d0 = t_max_diff(run.logits[r], oracle, T * V);
        CHECK(d1 == 0, "TP%d rank %d vs one process: max diff %.3g", N, r, d1);
        CHECK(d0 < 1e-4, "TP%d rank %d vs oracle: max diff %.3g", N, r, d0);
        if (r == 0) printf("  TP%d logits: vs one process %.3g, vs oracle %.3g\n", N, d1, d0);
    }
    free(one);
    free(ysum), free(shsum), free(tmp), free(right), free(wrong), free(acc);
    free(ylat_ref), free(out_ref), free(oracle);
    tp_free(&run);
}

TEST(moe_reduction_tp2) {
    moe_reduction(2);
}
TEST(moe_reduction_tp4) {
    moe_reduction(4);
}

/* The engine's code path with the norm moved before the reduce must fail the logits test. */
TEST(negative_control_norm_before_reduce) {
    int64_t V = 97;
    float *oracle = read_floats(FX "/expected/logits.f32", g_T * V);
    for (int N = 2; N <= 4; N *= 2) {
        tp_run run;
        CHECK(tp_forward(&run, N, 1, 0) == 0, "%s", k3_errmsg());
        double d = oracle && run.logits[0] ? t_max_diff(run.logits[0], oracle, g_T * V) : 0;
        printf("  TP%d with norm before reduce: logits vs oracle max diff %.3g\n", N, d);
        CHECK(d > 1e-2, "norm-before-reduce must break the logits (diff %.3g)", d);
        tp_free(&run);
    }
    free(oracle);
}

/* Informational: how much a wrong A_log slice moves the logits on this fixture. */
TEST(wrong_alog_slice_effect) {
    int64_t V = 97;
    float *one = single_process_logits(V);
    tp_run run;
    CHECK(one && tp_forward(&run, 4, 0, 1) == 0, "%s", k3_errmsg());
    if (!one) return;
    double d = t_max_diff(run.logits[0], one, g_T * V);
    printf("  TP4 with A_log heads 0.. on every rank: logits move by %.3g (structural checks catch "
           "it)\n",
           d);
    CHECK(d > 0, "a wrong A_log slice changed nothing at all");
    tp_free(&run);
    free(one);
}

int main(void) {
    read_tokens();
    if (g_T < 2) {
        printf("FAIL moe_fixture (cannot read " FX "/expected/tokens.txt)\n");
        return 1;
    }
    RUN(moe_reduction_tp2);
    RUN(moe_reduction_tp4);
    RUN(negative_control_norm_before_reduce);
    RUN(wrong_alog_slice_effect);
    return t_done();
}
