/* test_model_spec.c — speculative decoding on the fixtures.
 *
 * Rollback: a verify pass over [t0, d1..dk] kept to its first r rows (every
 * r, none and all included) leaves the sequence as if the kept rows alone had
 * been fed, compared over the logits of the next 8 steps: within 1e-6
 * relative of one pass over the kept rows (bitwise when every row is kept:
 * the commit replays exactly what the pass computed), and within 1e-5 of
 * feeding them token by token (a batched row differs from a one-token step by
 * the kernels' rounding, up to ~2e-6 here, as in test_model_batch).
 *
 * Generation: greedy k3_generate with speculation gives the token ids of
 * plain greedy decoding, for prompts with and without repetition. Random
 * weights rarely repeat themselves, so the drafter is also given a context
 * holding the reference continuation (exact, or with every 3rd / 5th token
 * changed): drafts are then kept for a while and rejected at every offset.
 * Also with a test hook that rejects the draft at each row in turn, and with
 * max_tokens ending generation inside a step (the cache then holds what
 * plain decoding leaves). Rollback and generation run with a bf16 latent
 * cache too (--cache-type bf16: the commit truncates that cache).
 *
 * Replay: the model-free acceptance study (gen/draft_study.h) counts the
 * steps, drafts and kept drafts of a speculative replay pass exactly.
 *
 * Batched: a verify item of k3_forward_batch beside a decode and a prompt
 * chunk gives the logits of a verify pass alone, and commits the same. */
#include "gen/draft_study.h"
#include "gen/generate.h"
#include "gen/spec.h"
#include "k3.h"
#include "t.h"
#include "text/tokenizer.h"

enum { K = 6, NP = 20, AFTER = 8 };

static double rel_diff(const float *a, const float *ref, int n) {
    double d = 0, mx = 0;
    for (int i = 0; i < n; i++) {
        double e = fabs((double)a[i] - ref[i]);
        d = e > d ? e : d;
        mx = fabs(ref[i]) > mx ? fabs(ref[i]) : mx;
    }
    return mx > 0 ? d / mx : d;
}

static void prompt_ids(int32_t *p, int n, int V) {
    for (int i = 0; i < n; i++) p[i] = (int32_t)((i * 977 + 31) % V);
}

/* Keep 1 + r rows of a verify pass; compare with plain decoding. */
static double rollback_case(k3_model *m, int keep, double *worst_row, double *worst_pass) {
    int V = k3_model_vocab(m);
    int32_t p[NP], row[K + 1], next;
    prompt_ids(p, NP, V);
    for (int j = 0; j <= K; j++) row[j] = (int32_t)((j * 131 + 5) % V);
    float *L = malloc(sizeof(float) * (size_t)V * (K + 1)), *a = malloc(sizeof(float) * V),
          *b = malloc(sizeof(float) * V);
    k3_seq *sa = k3_seq_new(m), *sb = k3_seq_new(m);
    CHECK(!k3_forward(sa, p, NP, NULL, 0) && !k3_forward(sb, p, NP, NULL, 0));
    CHECK(!k3_forward_spec(sa, row, K + 1, L), "%s", k3_errmsg());
    CHECK(!k3_seq_spec_commit(sa, keep), "%s", k3_errmsg());
    for (int j = 0; j < keep; j++) { /* plain decoding of the kept tokens */
        CHECK(!k3_forward(sb, &row[j], 1, b, 0));
        double d = rel_diff(L + (size_t)j * V, b, V);
        *worst_row = d > *worst_row ? d : *worst_row;
    }
    if (keep >= 2) { /* the kept rows fed as one pass: the verify pass's own arithmetic */
        k3_seq *sc = k3_seq_new(m);
        float *c = malloc(sizeof(float) * (size_t)V * (size_t)keep);
        CHECK(!k3_forward(sc, p, NP, NULL, 0) && !k3_forward(sc, row, keep, c, 1));
        next = 17;
        float *x = malloc(sizeof(float) * V), *y = malloc(sizeof(float) * V);
        k3_seq *sd = k3_seq_clone(sa);
        CHECK(!k3_forward(sd, &next, 1, x, 0) && !k3_forward(sc, &next, 1, y, 0));
        double d = rel_diff(x, y, V);
        CHECK(keep < K + 1 || d == 0, "keeping every row is not bitwise a pass over them: %g", d);
        CHECK(d <= 1e-6, "keep %d: %g from one pass of the kept rows", keep, d);
        *worst_pass = d > *worst_pass ? d : *worst_pass;
        k3_seq_free(sc), k3_seq_free(sd);
        free(c), free(x), free(y);
    }
    CHECK(k3_seq_len(sa) == k3_seq_len(sb), "len %lld vs %lld", (long long)k3_seq_len(sa),
          (long long)k3_seq_len(sb));
    double worst = 0;
    for (int s = 0; s < AFTER; s++) {
        next = (int32_t)((s * 53 + 11) % V);
        CHECK(!k3_forward(sa, &next, 1, a, 0) && !k3_forward(sb, &next, 1, b, 0));
        double d = rel_diff(a, b, V);
        worst = d > worst ? d : worst;
    }
    k3_seq_free(sa), k3_seq_free(sb);
    free(L), free(a), free(b);
    return worst;
}

static void rollback(k3_model *m, const char *dir) {
    double worst = 0, worst_row = 0, worst_pass = 0;
    for (int keep = 0; keep <= K + 1; keep++) {
        double d = rollback_case(m, keep, &worst_row, &worst_pass);
        CHECK(d <= 1e-5, "%s keep %d: next steps differ by %g", dir, keep, d);
        worst = d > worst ? d : worst;
    }
    CHECK(worst_row <= 1e-5, "%s: verify rows differ from plain by %g", dir, worst_row);
    printf("  %s: next 8 steps after rollback vs one pass of the kept rows %.3g, vs token-by-token "
           "decoding %.3g; verify rows vs decoding %.3g (relative)\n",
           dir, worst_pass, worst, worst_row);
}

typedef struct {
    int32_t ids[256];
    int n;
    int64_t drafted, accepted, seq_len;
} run_out;

/* Greedy generation; ctx (n_ctx ids) is what the drafter saw before the prompt. */
static const double *gen_cost; /* the drafter's verify costs (NULL: the model's) */

static run_out gen(k3_model *m, const k3_tokenizer *tok, const int32_t *p, int n, int spec,
                   int reject_at, int max_tokens, const int32_t *ctx, int n_ctx) {
    k3_gen_params gp = {.sp = k3_sampler_defaults(), .max_tokens = max_tokens};
    gp.spec_cost = gen_cost;
    gp.spec_max = spec, gp.spec_reject_at = reject_at;
    gp.draft_context = ctx, gp.n_draft_context = (size_t)n_ctx;
    k3_gen_stats st;
    k3_seq *s = k3_seq_new(m);
    run_out o = {0};
    CHECK(!k3_generate(m, s, tok, p, (size_t)n, &gp, NULL, NULL, &st), "%s", k3_errmsg());
    o.n = (int)st.gen_tokens;
    memcpy(o.ids, st.ids, sizeof(int32_t) * (size_t)o.n);
    o.drafted = st.spec_drafted, o.accepted = st.spec_accepted, o.seq_len = k3_seq_len(s);
    k3_gen_stats_free(&st);
    k3_seq_free(s);
    return o;
}

static void same_ids(const run_out *a, const run_out *b, const char *what) {
    CHECK(a->n == b->n, "%s: %d vs %d tokens", what, a->n, b->n);
    for (int i = 0; i < a->n && i < b->n; i++)
        CHECK(a->ids[i] == b->ids[i], "%s: token %d: %d vs %d", what, i, a->ids[i], b->ids[i]);
    CHECK(a->seq_len == b->seq_len, "%s: cache %lld vs %lld", what, (long long)a->seq_len,
          (long long)b->seq_len);
}

/* The drafter's context: the prompt followed by the reference continuation,
 * every `every`-th token of it changed (0: none), so drafts are right for a
 * while and then wrong, at every offset. */
static int draft_context(const int32_t *p, int n, const run_out *ref, int every, int V,
                         int32_t *ctx) {
    memcpy(ctx, p, sizeof *p * (size_t)n);
    for (int i = 0; i < ref->n; i++)
        ctx[n + i] = every && i % every == every - 1 ? (ref->ids[i] + 1) % V : ref->ids[i];
    return n + ref->n;
}

static void greedy(k3_model *m, const char *dir) {
    int V = k3_model_vocab(m);
    k3_tokenizer *tok = k3_tok_byte_level(V);
    int32_t rep[40], plain[40], ctx[40 + 256];
    for (int i = 0; i < 40; i++) rep[i] = (int32_t)((i % 7) * 37 + 3) % V;
    prompt_ids(plain, 40, V);
    const int32_t *prompts[2] = {rep, plain};
    for (int w = 0; w < 2; w++) {
        const char *what = w ? "no repetition" : "repetition";
        run_out ref = gen(m, tok, prompts[w], 40, 0, 0, 60, NULL, 0);
        run_out sp = gen(m, tok, prompts[w], 40, 8, 0, 60, NULL, 0);
        same_ids(&ref, &sp, what);
        int64_t drafted = sp.drafted, accepted = sp.accepted;
        const int everys[3] = {0, 3, 5};
        for (int e = 0; e < 3; e++) { /* drafts from a context that repeats */
            int every = everys[e];
            int nc = draft_context(prompts[w], 40, &ref, every, V, ctx);
            run_out c = gen(m, tok, prompts[w], 40, 8, 0, 60, ctx, nc);
            same_ids(&ref, &c, what);
            drafted += c.drafted, accepted += c.accepted;
            for (int r = 1; every == 3 && r <= 8; r++) { /* a rejection forced at row r - 1 */
                run_out rj = gen(m, tok, prompts[w], 40, 8, r, 60, ctx, nc);
                same_ids(&ref, &rj, "forced rejection");
            }
            if (every == 5) { /* however many drafts the cost table sends */
                double free_verify[K3_DRAFT_MAX + 1], dear[K3_DRAFT_MAX + 1];
                for (int k = 0; k <= K3_DRAFT_MAX; k++) free_verify[k] = 1, dear[k] = 1 + 2 * k;
                gen_cost = free_verify;
                run_out f = gen(m, tok, prompts[w], 40, 8, 0, 60, ctx, nc);
                gen_cost = dear;
                run_out d = gen(m, tok, prompts[w], 40, 8, 0, 60, ctx, nc);
                gen_cost = NULL;
                same_ids(&ref, &f, "free verify"), same_ids(&ref, &d, "dear verify");
                CHECK(f.drafted >= c.drafted && f.accepted > 0 && d.drafted == 0,
                      "%s: drafted free %lld, model's %lld, dear %lld", what, (long long)f.drafted,
                      (long long)c.drafted, (long long)d.drafted);
            }
            for (int mt = 1; every == 0 && mt <= 9; mt += 2) { /* max_tokens inside a step */
                run_out a = gen(m, tok, prompts[w], 40, 0, 0, mt, NULL, 0);
                run_out b = gen(m, tok, prompts[w], 40, 8, 0, mt, ctx, nc);
                same_ids(&a, &b, "max_tokens");
            }
        }
        CHECK(accepted > 0 && accepted < drafted, "%s: %lld drafted, %lld accepted", dir,
              (long long)drafted, (long long)accepted);
        printf("  %s %s: %lld drafted, %lld accepted\n", dir, what, (long long)drafted,
               (long long)accepted);
    }
    k3_tok_free(tok);
}

static void run_model(const char *dir, int cache_type) {
    k3_load_opts o = {.tp_size = 1, .pp_size = 1, .cache_type = cache_type};
    k3_model *m = k3_model_load(dir, &o);
    CHECK(m != NULL, "%s: %s", dir, k3_errmsg());
    if (!m) return;
    rollback(m, dir);
    greedy(m, dir);
    k3_model_free(m);
}

TEST(speculative_decoding_on_the_fixtures) {
    const char *shared[] = {"tiny-bf16", "tiny-mxfp4"};
    char dir[1024];
    for (int i = 0; i < 2; i++) {
        snprintf(dir, sizeof dir, "%s/%s", t_fixtures(), shared[i]);
        run_model(dir, K3_CACHE_F32);
    }
    run_model("tests/fixtures/mlx-mixed", K3_CACHE_F32);
    snprintf(dir, sizeof dir, "%s/tiny-bf16", t_fixtures());
    run_model(dir, K3_CACHE_BF16);
}

/* The replay forces the target's choice, so the drafter alone decides what
 * is kept: the model-free study counts exactly what a speculative replay
 * pass does, on an answer that copies its prompt with edits. */
TEST(draft_study_counts_what_a_replay_pass_counts) {
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/tiny-bf16", t_fixtures());
    k3_model *m = k3_model_load(dir, NULL);
    CHECK(m != NULL, "%s", k3_errmsg());
    if (!m) return;
    int V = k3_model_vocab(m);
    enum { NPR = 48, NA = 72 };
    int32_t prompt[NPR], answer[NA];
    for (int i = 0; i < NPR; i++) prompt[i] = (int32_t)((i * 131 + 7) % V);
    for (int i = 0; i < NA; i++) /* the prompt again, every 11th token changed */
        answer[i] = i % 11 == 5 ? (int32_t)((i * 17 + 3) % V) : prompt[(i + 4) % NPR];
    k3_replay_pass run, study;
    k3_seq *start = k3_replay_prefill(m, prompt, NPR);
    CHECK(start != NULL, "%s", k3_errmsg());
    if (!start) {
        k3_model_free(m);
        return;
    }
    CHECK(!k3_replay_pass_run(m, start, prompt, NPR, answer, NA, 8, NULL, 0, &run), "%s",
          k3_errmsg());
    k3_seq_free(start);
    double cost[K3_DRAFT_MAX + 1]; /* the study weighs the costs the pass did */
    k3_spec_cost_default(m, cost);
    k3_draft_study_run(prompt, NPR, answer, NA, 8, cost, &study);
    CHECK(study.steps == run.steps && study.verify_steps == run.verify_steps,
          "steps %lld/%lld, verify %lld/%lld", (long long)study.steps, (long long)run.steps,
          (long long)study.verify_steps, (long long)run.verify_steps);
    CHECK(study.drafted == run.drafted && study.accepted == run.accepted,
          "drafted %lld/%lld, accepted %lld/%lld", (long long)study.drafted, (long long)run.drafted,
          (long long)study.accepted, (long long)run.accepted);
    CHECK(!memcmp(study.by_k, run.by_k, sizeof run.by_k));
    CHECK(run.accepted > 0 && run.accepted < run.drafted, "%lld of %lld kept",
          (long long)run.accepted, (long long)run.drafted);
    k3_model_free(m);
}

TEST(commit_refuses_without_a_pass_and_out_of_range) {
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/tiny-bf16", t_fixtures());
    k3_model *m = k3_model_load(dir, NULL);
    k3_seq *s = k3_seq_new(m);
    int32_t t[3] = {1, 2, 3};
    float *L = malloc(sizeof(float) * 3 * (size_t)k3_model_vocab(m));
    CHECK(k3_seq_spec_commit(s, 0) == -1);
    CHECK(!k3_forward_spec(s, t, 3, L));
    CHECK(k3_forward_spec(s, t, 3, L) == -1, "a second pass before the commit");
    CHECK(k3_seq_spec_commit(s, 4) == -1);
    CHECK(!k3_seq_spec_commit(s, 2) && k3_seq_len(s) == 2);
    int32_t bad = 1 << 30;
    CHECK(k3_forward_spec(s, &bad, 1, L) == -1 && k3_seq_len(s) == 2);
    CHECK(k3_forward_spec(s, t, 33, L) == -1);
    free(L);
    k3_seq_free(s);
    k3_model_free(m);
}

/* A verify item rides in k3_forward_batch beside a decode and a prompt
 * chunk: its rows' logits, and after a commit the next step's, are those of
 * k3_forward_spec on a twin sequence alone (to the batch's rounding, as in
 * test_model_batch), and the others' logits those of their own passes. */
TEST(verify_item_in_a_batch_equals_a_verify_pass_alone) {
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/tiny-bf16", t_fixtures());
    k3_model *m = k3_model_load(dir, NULL);
    CHECK(m != NULL, "%s", k3_errmsg());
    if (!m) return;
    const int V = k3_model_vocab(m);
    int32_t p[NP], row[K], chunk[5] = {7, 8, 9, 10, 11};
    prompt_ids(p, NP, V);
    for (int i = 0; i < K; i++) row[i] = p[i + 3];
    k3_seq *a = k3_seq_new(m), *twin = k3_seq_new(m), *c = k3_seq_new(m), *c1 = k3_seq_new(m),
           *d = k3_seq_new(m);
    float *La = malloc(sizeof(float) * K * (size_t)V), *Lt = malloc(sizeof(float) * K * (size_t)V);
    float *Lc = malloc(sizeof(float) * (size_t)V), *Lc1 = malloc(sizeof(float) * (size_t)V);
    CHECK(!k3_forward(a, p, NP, NULL, 0) && !k3_forward(twin, p, NP, NULL, 0));
    CHECK(!k3_forward(c, p, 9, NULL, 0) && !k3_forward(c1, p, 9, NULL, 0));
    k3_batch_item it[3] = {{.seq = c, .tokens = p + 9, .n = 1, .logits = Lc},
                           {.seq = a, .tokens = row, .n = K, .logits = La, .verify = 1},
                           {.seq = d, .tokens = chunk, .n = 5}};
    CHECK(!k3_forward_batch(it, 3), "%s", k3_errmsg());
    CHECK(!k3_forward_spec(twin, row, K, Lt) && !k3_forward(c1, p + 9, 1, Lc1, 0));
    double worst = 0;
    for (int r = 0; r < K; r++) {
        double e = rel_diff(La + (size_t)r * V, Lt + (size_t)r * V, V);
        worst = e > worst ? e : worst;
    }
    CHECK(worst <= 1e-5, "verify rows in a batch differ from alone by %g", worst);
    CHECK(rel_diff(Lc, Lc1, V) <= 1e-5, "the decode beside the verify item differs");
    CHECK(k3_seq_len(a) == NP + K && k3_seq_len(d) == 5);
    it[1].n = 2; /* a pass awaits its commit: refused, nothing consumed */
    CHECK(k3_forward_batch(it + 1, 1) == -1 && k3_seq_len(a) == NP + K);
    CHECK(!k3_seq_spec_commit(a, 3) && !k3_seq_spec_commit(twin, 3) && k3_seq_len(a) == NP + 3);
    int32_t next = 5;
    CHECK(!k3_forward(a, &next, 1, La, 0) && !k3_forward(twin, &next, 1, Lt, 0));
    CHECK(rel_diff(La, Lt, V) <= 1e-5, "after the commit: %g", rel_diff(La, Lt, V));
    k3_seq *snap = k3_seq_new(m);
    k3_batch_item bad = {.seq = c, .tokens = row, .n = 2, .verify = 1, .snap = snap, .snap_at = 1};
    CHECK(k3_forward_batch(&bad, 1) == -1, "a verify item with a snapshot");
    int32_t many[33] = {0};
    bad = (k3_batch_item){.seq = c, .tokens = many, .n = 33, .verify = 1};
    CHECK(k3_forward_batch(&bad, 1) == -1 && k3_seq_len(c) == 10, "33 verify rows");
    k3_seq *all[] = {a, twin, c, c1, d, snap};
    for (int i = 0; i < 6; i++) k3_seq_free(all[i]);
    free(La);
    free(Lt);
    free(Lc);
    free(Lc1);
    k3_model_free(m);
}

int main(void) {
    RUN(verify_item_in_a_batch_equals_a_verify_pass_alone);
    RUN(speculative_decoding_on_the_fixtures);
    RUN(commit_refuses_without_a_pass_and_out_of_range);
    RUN(draft_study_counts_what_a_replay_pass_counts);
    return t_done();
}
