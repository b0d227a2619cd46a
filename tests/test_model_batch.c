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
 * bad token, too long a chunk, a bad snapshot) consume nothing. Snapshots
 * taken inside a step (k3_batch_item.snap) hold the state after their first
 * snap_at tokens: fed the rest of the prompt they give the logits and the
 * greedy token of the sequence alone.
 *
 * The same with a bf16 latent cache (--cache-type bf16): batching and
 * snapshots keep every sequence's own cache in that type. There the bound is
 * 1e-3: a batched row's latents differ from a lone row's in the last f32 bit,
 * which now and then rounds a latent to the neighbouring bf16 value (2^-8
 * relative); measured up to 9e-5 on tp4-bf16, well inside the 3e-3 the bf16
 * cache keeps to the oracle (tests/sh/longctx_oracle.sh).
 *
 * Usage: test_model_batch [[--cache-type f32|bf16] MODEL_DIR...]. Without
 * arguments it runs the fixtures below (and tiny-bf16 with a bf16 cache); under `mpirun -np 2`
 * (tests/sh/dist_batch.sh) the model is split tensor-parallel and the same checks run on the TP2
 * group. */
#include "dist/dist.h"
#include "dist/launch.h"
#include "k3.h"
#include "t.h"

int k3_forward_batch_path(k3_batch_item *items, int n, int path);

enum { NS = 4, GEN = 6, MAXP = 40 };

static k3_model *g_m;
static int g_V;
static int g_cache_type; /* K3_CACHE_F32 or K3_CACHE_BF16 for the models run next */

/* Relative bound of batched against lone logits for the cache type in use. */
static double tol(void) {
    return g_cache_type == K3_CACHE_BF16 ? 1e-3 : 1e-5;
}
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
                it[n++] = (k3_batch_item){.seq = seq[s],
                                          .tokens = g_prompt[s] + fed[s],
                                          .n = c,
                                          .logits = last ? lg[s] : NULL};
                prefills++;
            } else {
                it[n++] =
                    (k3_batch_item){.seq = seq[s], .tokens = &next[s], .n = 1, .logits = lg[s]};
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
            CHECK(d <= tol(), "path %c seq %d token %d: relative difference %g", path ? path : '0',
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
    k3_batch_item it = {.seq = b, .tokens = g_prompt[2], .n = 30, .logits = lb};
    CHECK(k3_forward(a, g_prompt[2], 30, la, 0) == 0 && k3_forward_batch(&it, 1) == 0);
    CHECK(memcmp(la, lb, sizeof(float) * (size_t)g_V) == 0, "differs by %g", rel_diff(lb, la, g_V));
    k3_seq_free(a);
    k3_seq_free(b);
    free(la);
    free(lb);
}

/* Feed snap the rest of prompt s from `from` on; its logits must be the
 * single sequence's after the whole prompt. */
static void check_snap(k3_seq *snap, int s, int from) {
    float *lg = calloc((size_t)g_V, sizeof(float));
    CHECK(k3_seq_len(snap) == from, "snap of seq %d at %d has length %lld", s, from,
          (long long)k3_seq_len(snap));
    if (from < P_LEN[s])
        CHECK(k3_forward(snap, g_prompt[s] + from, P_LEN[s] - from, lg, 0) == 0, "%s", k3_errmsg());
    else
        CHECK(k3_forward(snap, &g_rtok[s][0], 1, lg, 0) == 0, "%s", k3_errmsg());
    const float *ref = g_ref[s] + (from < P_LEN[s] ? 0 : g_V);
    double d = rel_diff(lg, ref, g_V);
    CHECK(d <= tol(), "snap of seq %d at %d: relative difference %g", s, from, d);
    CHECK(argmax(lg, g_V) == argmax(ref, g_V), "snap of seq %d at %d: greedy differs", s, from);
    free(lg);
}

TEST(snapshots_inside_a_step) {
    k3_seq *a = k3_seq_new(g_m), *b = k3_seq_new(g_m), *sa1 = k3_seq_new(g_m),
           *sa2 = k3_seq_new(g_m), *sb = k3_seq_new(g_m), *sd = k3_seq_new(g_m);
    float *la = calloc((size_t)g_V, 4), *lb = calloc((size_t)g_V, 4);
    /* step 1: a's first 11 tokens with a snapshot after 7; all of b, snapshot at its end */
    k3_batch_item s1[2] = {{.seq = a, .tokens = g_prompt[2], .n = 11, .snap = sa1, .snap_at = 7},
                           {.seq = b,
                            .tokens = g_prompt[0],
                            .n = P_LEN[0],
                            .logits = lb,
                            .snap = sb,
                            .snap_at = P_LEN[0]}};
    CHECK(k3_forward_batch(s1, 2) == 0, "%s", k3_errmsg());
    /* step 2: the rest of a (snapshot after 26 of 30), b's first decode (snapshot at 1) */
    k3_batch_item s2[2] = {
        {.seq = b, .tokens = &g_rtok[0][0], .n = 1, .logits = lb, .snap = sd, .snap_at = 1},
        {.seq = a,
         .tokens = g_prompt[2] + 11,
         .n = P_LEN[2] - 11,
         .logits = la,
         .snap = sa2,
         .snap_at = 15}};
    CHECK(k3_forward_batch(s2, 2) == 0, "%s", k3_errmsg());
    CHECK(rel_diff(la, g_ref[2], g_V) <= tol(), "the live sequence changed: %g",
          rel_diff(la, g_ref[2], g_V));
    CHECK(rel_diff(lb, g_ref[0] + g_V, g_V) <= tol(), "the live decode changed");
    check_snap(sa1, 2, 7);
    check_snap(sa2, 2, 26);
    check_snap(sb, 0, P_LEN[0]);
    CHECK(k3_seq_len(sd) == P_LEN[0] + 1, "decode snapshot length %lld", (long long)k3_seq_len(sd));
    k3_seq *all[] = {a, b, sa1, sa2, sb, sd};
    for (int i = 0; i < 6; i++) k3_seq_free(all[i]);
    free(la);
    free(lb);
}

TEST(refused_batches_consume_nothing) {
    k3_seq *a = k3_seq_new(g_m), *b = k3_seq_new(g_m);
    int32_t ok[2] = {1, 2}, bad[2] = {3, g_V};
    static int32_t big[600];
    k3_batch_item dup[2] = {{.seq = a, .tokens = ok, .n = 2, .logits = NULL},
                            {.seq = a, .tokens = ok, .n = 1, .logits = NULL}};
    CHECK(k3_forward_batch(dup, 2) == -1 && strstr(k3_errmsg(), "twice"), "%s", k3_errmsg());
    k3_batch_item badtok[2] = {{.seq = a, .tokens = ok, .n = 2, .logits = NULL},
                               {.seq = b, .tokens = bad, .n = 2, .logits = NULL}};
    CHECK(k3_forward_batch(badtok, 2) == -1 && strstr(k3_errmsg(), "sequence 1"), "%s",
          k3_errmsg());
    k3_batch_item empty[1] = {{.seq = a, .tokens = ok, .n = 0, .logits = NULL}};
    CHECK(k3_forward_batch(empty, 1) == -1);
    k3_batch_item huge[1] = {{.seq = b, .tokens = big, .n = 600, .logits = NULL}};
    CHECK(k3_forward_batch(huge, 1) == -1 && strstr(k3_errmsg(), "at most"), "%s", k3_errmsg());
    CHECK(k3_forward_batch(dup, 0) == -1);
    k3_seq *fed = k3_seq_new(g_m), *fresh = k3_seq_new(g_m);
    CHECK(k3_forward(fed, ok, 1, NULL, 0) == 0);
    k3_batch_item snap_fed[1] = {{.seq = a, .tokens = ok, .n = 2, .snap = fed, .snap_at = 1}};
    CHECK(k3_forward_batch(snap_fed, 1) == -1 && strstr(k3_errmsg(), "has been fed"), "%s",
          k3_errmsg());
    k3_batch_item snap_at0[1] = {{.seq = a, .tokens = ok, .n = 2, .snap = fresh, .snap_at = 0}};
    CHECK(k3_forward_batch(snap_at0, 1) == -1 && strstr(k3_errmsg(), "outside"), "%s", k3_errmsg());
    k3_batch_item snap_past[1] = {{.seq = a, .tokens = ok, .n = 2, .snap = fresh, .snap_at = 3}};
    CHECK(k3_forward_batch(snap_past, 1) == -1 && strstr(k3_errmsg(), "outside"), "%s",
          k3_errmsg());
    k3_batch_item snap_live[2] = {{.seq = a, .tokens = ok, .n = 2, .snap = b, .snap_at = 1},
                                  {.seq = b, .tokens = ok, .n = 1}};
    CHECK(k3_forward_batch(snap_live, 2) == -1 && strstr(k3_errmsg(), "used by"), "%s",
          k3_errmsg());
    k3_batch_item snap_twice[2] = {{.seq = a, .tokens = ok, .n = 2, .snap = fresh, .snap_at = 1},
                                   {.seq = b, .tokens = ok, .n = 2, .snap = fresh, .snap_at = 2}};
    CHECK(k3_forward_batch(snap_twice, 2) == -1 && strstr(k3_errmsg(), "used by"), "%s",
          k3_errmsg());
    CHECK(k3_seq_len(fresh) == 0 && k3_seq_len(fed) == 1, "a refused snapshot changed length");
    k3_seq_free(fed);
    k3_seq_free(fresh);
    CHECK(k3_seq_len(a) == 0 && k3_seq_len(b) == 0, "a refused batch advanced a sequence");
    k3_seq_free(a);
    k3_seq_free(b);
}

static int run_model(const char *dir) {
    k3_load_opts o = {.threads = 2, .cache_type = g_cache_type};
    g_m = k3_dist_model_load(dir, &o, 0);
    if (!g_m) {
        printf("FAIL model_batch_load %s (%s)\n", dir, k3_errmsg());
        return 1;
    }
    g_V = k3_model_vocab(g_m);
    printf("# %s%s\n", dir, g_cache_type ? " (bf16 latent cache)" : "");
    reference();
    RUN(batch_equals_single_auto);
    RUN(batch_equals_single_expanded);
    RUN(batch_equals_single_absorbed);
    RUN(batch_of_one_is_bitwise_k3_forward);
    RUN(snapshots_inside_a_step);
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
        for (int i = 1; i < argc; i++)
            if (!strcmp(argv[i], "--cache-type") && i + 1 < argc) {
                if (k3_cache_type_parse(argv[++i], &g_cache_type)) return 2;
            } else {
                rc |= run_model(argv[i]);
            }
    } else {
        const char *shared[] = {"tiny-bf16", "tiny-mxfp4"};
        char dir[1024];
        for (int i = 0; i < 2; i++) {
            snprintf(dir, sizeof dir, "%s/%s", t_fixtures(), shared[i]);
            rc |= run_model(dir);
        }
        rc |= run_model("tests/fixtures/mlx-mixed");
        rc |= run_model("tests/fixtures/mlx-absorbed");
        g_cache_type = K3_CACHE_BF16;
        snprintf(dir, sizeof dir, "%s/tiny-bf16", t_fixtures());
        rc |= run_model(dir);
    }
    k3_dist_finalize();
    return t_done() | rc;
}
