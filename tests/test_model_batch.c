/* test_model_batch.c — k3_forward_batch (one step over many sequences) gives
 * every sequence the logits k3_forward gives it alone.
 *
 * Four sequences with prompts of different lengths join at different steps,
 * prefill in chunks of different sizes (riding along with the others'
 * decodes), then decode greedily; the item order flips every step. At every
 * position where the batch returns logits they must equal the single-sequence
 * logits within 1e-5 relative (max |a - b| <= 1e-5 max |ref|), and the greedy
 * continuations must be identical. Run for the automatic MLA path and both
 * forced paths, on HF and MLX fixtures. Refused batches (duplicate sequence,
 * bad token, too long a chunk) consume nothing.
 *
 * Usage: test_model_batch [MODEL_DIR...]. Without arguments it runs the
 * fixtures below; under `mpirun -np 2` (tests/sh/dist_batch.sh) the model is
 * split tensor-parallel and the same checks run on the TP2 group. */
#include "dist/dist.h"
#include "dist/launch.h"
#include "k3.h"
#include "t.h"

int k3_forward_batch_path(k3_batch_item *items, int n, int path);

enum { NS = 4, GEN = 6, MAXP = 40 };

static k3_model *g_m;
static int g_V;
static const int P_LEN[NS] = {13, 5, 30, 1}; /* prompt lengths */
static const int CHUNK[NS] = {7, 3, 11, 1};  /* prefill chunk per step */
static const int START[NS] = {0, 0, 2, 3};   /* step at which the sequence joins */
static int32_t g_prompt[NS][MAXP];
static float *g_ref[NS]; /* [GEN][V]: logits after the prompt, then after each decode */
static int32_t g_rtok[NS][GEN];

static int argmax(const float *v, int n) {
    int b = 0;
    for (int i = 1; i < n; i++)
        if (v[i] > v[b]) b = i;
    return b;
}

static double rel_diff(const float *a, const float *ref, int n) {
    double d = 0, mx = 0;
    for (int i = 0; i < n; i++) {
        double e = fabs((double)a[i] - ref[i]);
        d = e > d ? e : d;
        mx = fabs(ref[i]) > mx ? fabs(ref[i]) : mx;
    }
    return mx > 0 ? d / mx : d;
}

/* Single-sequence reference: prefill in one call, GEN greedy steps. */
static void reference(void) {
    for (int s = 0; s < NS; s++) {
        for (int i = 0; i < P_LEN[s]; i++)
            g_prompt[s][i] = (int32_t)((s * 131 + i * 977 + 7) % g_V);
        g_ref[s] = calloc((size_t)GEN * (size_t)g_V, sizeof(float));
        k3_seq *q = k3_seq_new(g_m);
        CHECK(k3_forward(q, g_prompt[s], P_LEN[s], g_ref[s], 0) == 0, "%s", k3_errmsg());
        for (int g = 0; g < GEN; g++) {
            g_rtok[s][g] = argmax(g_ref[s] + (int64_t)g * g_V, g_V);
            if (g + 1 < GEN)
                CHECK(k3_forward(q, &g_rtok[s][g], 1, g_ref[s] + (int64_t)(g + 1) * g_V, 0) == 0);
        }
        k3_seq_free(q);
    }
}

/* The mixed batch with MLA path `path`; returns the worst relative difference. */
static double run_batch(int path) {
    k3_seq *seq[NS];
    int fed[NS] = {0}, ngen[NS] = {0};
    int32_t next[NS] = {0};
    float *lg[NS];
    for (int s = 0; s < NS; s++) {
        seq[s] = k3_seq_new(g_m);
        lg[s] = calloc((size_t)g_V, sizeof(float));
    }
    double worst = 0;
    int mixed_steps = 0;
    for (int step = 0; step < 64; step++) {
        k3_batch_item it[NS];
        int n = 0, prefills = 0, decodes = 0;
        for (int k = 0; k < NS; k++) {
            int s = step % 2 ? NS - 1 - k : k; /* the order flips every step */
            if (step < START[s] || ngen[s] >= GEN) continue;
            if (fed[s] < P_LEN[s]) {
                int c = P_LEN[s] - fed[s] < CHUNK[s] ? P_LEN[s] - fed[s] : CHUNK[s];
                int last = fed[s] + c == P_LEN[s];
                it[n++] = (k3_batch_item){seq[s], g_prompt[s] + fed[s], c, last ? lg[s] : NULL};
                prefills++;
            } else {
                it[n++] = (k3_batch_item){seq[s], &next[s], 1, lg[s]};
                decodes++;
            }
        }
        if (!n) break;
        mixed_steps += prefills && decodes;
        CHECK(k3_forward_batch_path(it, n, path) == 0, "step %d: %s", step, k3_errmsg());
        for (int i = 0; i < n; i++) {
            int s = 0;
            while (seq[s] != it[i].seq) s++;
            if (fed[s] < P_LEN[s]) {
                fed[s] += (int)it[i].n;
                if (fed[s] < P_LEN[s]) continue;
            }
            double d = rel_diff(lg[s], g_ref[s] + (int64_t)ngen[s] * g_V, g_V);
            worst = d > worst ? d : worst;
            CHECK(d <= 1e-5, "path %c seq %d token %d: relative difference %g", path ? path : '0',
                  s, ngen[s], d);
            next[s] = argmax(lg[s], g_V);
            CHECK(next[s] == g_rtok[s][ngen[s]], "seq %d token %d: greedy %d, alone %d", s, ngen[s],
                  next[s], g_rtok[s][ngen[s]]);
            ngen[s]++;
        }
    }
    CHECK(mixed_steps >= 3, "only %d steps mixed prefill chunks with decodes", mixed_steps);
    for (int s = 0; s < NS; s++) {
        CHECK(ngen[s] == GEN, "seq %d produced %d of %d tokens", s, ngen[s], GEN);
        CHECK(k3_seq_len(seq[s]) == P_LEN[s] + GEN - 1, "seq %d length %lld", s,
              (long long)k3_seq_len(seq[s]));
        k3_seq_free(seq[s]);
        free(lg[s]);
    }
    return worst;
}

TEST(batch_equals_single_auto) {
    double d = run_batch(0);
    printf("  worst relative difference %.3g\n", d);
}
TEST(batch_equals_single_expanded) {
    run_batch('A');
}
TEST(batch_equals_single_absorbed) {
    run_batch('B');
}

TEST(batch_of_one_is_bitwise_k3_forward) {
    k3_seq *a = k3_seq_new(g_m), *b = k3_seq_new(g_m);
    float *la = calloc((size_t)g_V, 4), *lb = calloc((size_t)g_V, 4);
    k3_batch_item it = {b, g_prompt[2], 30, lb};
    CHECK(k3_forward(a, g_prompt[2], 30, la, 0) == 0 && k3_forward_batch(&it, 1) == 0);
    CHECK(memcmp(la, lb, sizeof(float) * (size_t)g_V) == 0, "differs by %g", rel_diff(lb, la, g_V));
    k3_seq_free(a);
    k3_seq_free(b);
    free(la);
    free(lb);
}

TEST(refused_batches_consume_nothing) {
    k3_seq *a = k3_seq_new(g_m), *b = k3_seq_new(g_m);
    int32_t ok[2] = {1, 2}, bad[2] = {3, g_V};
    static int32_t big[600];
    k3_batch_item dup[2] = {{a, ok, 2, NULL}, {a, ok, 1, NULL}};
    CHECK(k3_forward_batch(dup, 2) == -1 && strstr(k3_errmsg(), "twice"), "%s", k3_errmsg());
    k3_batch_item badtok[2] = {{a, ok, 2, NULL}, {b, bad, 2, NULL}};
    CHECK(k3_forward_batch(badtok, 2) == -1 && strstr(k3_errmsg(), "sequence 1"), "%s",
          k3_errmsg());
    k3_batch_item empty[1] = {{a, ok, 0, NULL}};
    CHECK(k3_forward_batch(empty, 1) == -1);
    k3_batch_item huge[1] = {{b, big, 600, NULL}};
    CHECK(k3_forward_batch(huge, 1) == -1 && strstr(k3_errmsg(), "at most"), "%s", k3_errmsg());
    CHECK(k3_forward_batch(dup, 0) == -1);
    CHECK(k3_seq_len(a) == 0 && k3_seq_len(b) == 0, "a refused batch advanced a sequence");
    k3_seq_free(a);
    k3_seq_free(b);
}

static int run_model(const char *dir) {
    k3_load_opts o = {.threads = 2};
    g_m = k3_dist_model_load(dir, &o, 0);
    if (!g_m) {
        printf("FAIL model_batch_load %s (%s)\n", dir, k3_errmsg());
        return 1;
    }
    g_V = k3_model_vocab(g_m);
    printf("# %s\n", dir);
    reference();
    RUN(batch_equals_single_auto);
    RUN(batch_equals_single_expanded);
    RUN(batch_equals_single_absorbed);
    RUN(batch_of_one_is_bitwise_k3_forward);
    RUN(refused_batches_consume_nothing);
    for (int s = 0; s < NS; s++) free(g_ref[s]);
    k3_model_free(g_m);
    return 0;
}

int main(int argc, char **argv) {
    int rc = 0;
    if (k3_dist_init()) {
        printf("FAIL model_batch_mpi_init (%s)\n", k3_errmsg());
        return 1;
    }
    if (k3_dist_rank() != 0 && !freopen("/dev/null", "w", stdout)) return 1; /* rank 0 reports */
    if (argc > 1) {
        for (int i = 1; i < argc; i++) rc |= run_model(argv[i]);
    } else {
        const char *shared[] = {"tiny-bf16", "tiny-mxfp4"};
        char dir[1024];
        for (int i = 0; i < 2; i++) {
            snprintf(dir, sizeof dir, "%s/%s", t_fixtures(), shared[i]);
            rc |= run_model(dir);
        }
        rc |= run_model("tests/fixtures/mlx-mixed");
        rc |= run_model("tests/fixtures/mlx-absorbed");
    }
    k3_dist_finalize();
    return t_done() | rc;
}
