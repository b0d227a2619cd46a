/* test_gen_spec.c — the parts of speculative decoding that need no model:
 * the drafter's proposals (the longest match, the occurrence whose context
 * agrees furthest back, a long copy resumed after a few tokens that differ,
 * a substitution seen twice applied to the copy), its index on
 * adversarial input (one token repeated 100k times, 100k distinct tokens, runs of one token between
 * distinct ones: entries, probes and bytes stay linear in the tokens; counted, not timed), the
 * choice of how many drafts to send by verify cost and acceptance (none while drafts miss), the
 * acceptance study's depths and best drafter on a copied answer, and the sampling rule: for every
 * draft x the computed distribution p(x)[t = x] + (1 - p(x)) r(t) equals the target p exactly. */
#include "t.h"

#include "gen/draft.h"
#include "gen/draft_study.h"
#include "gen/sampler.h"
#include "gen/spec.h"

TEST(proposes_what_followed_the_longest_match) {
    k3_drafter *d = k3_drafter_new(4);
    const int32_t seq[] = {1, 2, 3, 4, 5, 6, 7, 9, 2, 3, 8, 1, 2, 3};
    for (size_t i = 0; i < sizeof seq / sizeof seq[0]; i++) k3_drafter_push(d, seq[i]);
    int32_t out[16];
    int k = k3_drafter_candidates(d, out);
    CHECK(k == 4, "k %d", k);
    /* suffix 1 2 3 occurred at the start (the 3-gram), not 9 2 3 -> 8 (the 2-gram) */
    CHECK(out[0] == 4 && out[1] == 5 && out[2] == 6 && out[3] == 7, "%d %d %d %d", out[0], out[1],
          out[2], out[3]);
    k3_drafter_free(d);
}

TEST(a_repeat_reaching_the_present_continues_with_its_period) {
    k3_drafter *d = k3_drafter_new(8);
    const int32_t seq[] = {4, 5, 4, 5, 4};
    for (int i = 0; i < 5; i++) k3_drafter_push(d, seq[i]);
    int32_t out[16];
    int k = k3_drafter_candidates(d, out);
    CHECK(k == 8, "k %d", k);
    for (int j = 0; j < k; j++) CHECK(out[j] == (j % 2 ? 4 : 5), "draft %d is %d", j, out[j]);
    k3_drafter_free(d);
}

TEST(copies_from_the_occurrence_whose_context_agrees_furthest_back) {
    k3_drafter *d = k3_drafter_new(4);
    /* "8 7 6 5 4 3 2" occurs twice: first after 50 9 (then 100), last after
       60 (then 200); the end of the sequence, 50 9 8 7 6 5 4 3 2, agrees with
       the first for 9 tokens and with the most recent for 7 */
    const int32_t seq[] = {50, 9, 8, 7, 6,   5,   4,  3, 2, 100, 101, 60, 8, 7, 6,
                           5,  4, 3, 2, 200, 201, 50, 9, 8, 7,   6,   5,  4, 3, 2};
    for (size_t i = 0; i < sizeof seq / sizeof seq[0]; i++) k3_drafter_push(d, seq[i]);
    int32_t out[16];
    int k = k3_drafter_candidates(d, out);
    CHECK(k >= 2 && out[0] == 100 && out[1] == 101, "k %d: %d %d", k, out[0], out[1]);
    k3_drafter_free(d);
}

TEST(a_long_copy_resumes_after_a_few_tokens_that_differ) {
    k3_drafter *d = k3_drafter_new(4);
    for (int i = 0; i < 30; i++) k3_drafter_push(d, 100 + i);
    int32_t out[16];
    for (int i = 0; i < 18; i++) /* a copy of 18 tokens, followed by proposals */
        k3_drafter_push(d, 100 + i), k3_drafter_candidates(d, out);
    const int32_t quoted[] = {900, 901, 119}; /* 118 written as two other tokens */
    for (int i = 0; i < 3; i++) k3_drafter_push(d, quoted[i]);
    int k = k3_drafter_candidates(d, out); /* no n-gram ends in 900 901 119 */
    CHECK(k >= 2 && out[0] == 120 && out[1] == 121, "k %d: %d %d", k, out[0], out[1]);
    k3_drafter_free(d);
}

/* A file quoted with each newline (7) written as two other tokens (900 901):
 * after the substitution was seen twice, drafts from the copy apply it. */
TEST(a_copy_applies_a_substitution_seen_twice) {
    k3_drafter *d = k3_drafter_new(4);
    int32_t src[100], out[16];
    for (int i = 0; i < 100; i++) src[i] = i && i % 20 == 0 ? 7 : 100 + i;
    for (int i = 0; i < 100; i++) k3_drafter_push(d, src[i]);
    for (int i = 0; i < 58; i++) { /* the copy up to src[58], proposing after each token */
        if (src[i] == 7)
            k3_drafter_push(d, 900), k3_drafter_candidates(d, out), k3_drafter_push(d, 901);
        else
            k3_drafter_push(d, src[i]);
        k3_drafter_candidates(d, out);
    }
    int k = k3_drafter_candidates(d, out); /* src[58] src[59], then 7 written as 900 901 */
    CHECK(k == 4 && out[0] == 158 && out[1] == 159 && out[2] == 900 && out[3] == 901,
          "k %d: %d %d %d %d", k, out[0], out[1], out[2], out[3]);
    k3_drafter_free(d);
}

TEST(nothing_to_propose_without_a_match) {
    k3_drafter *d = k3_drafter_new(8);
    int32_t out[16];
    for (int i = 0; i < 100; i++) k3_drafter_push(d, i);
    CHECK(k3_drafter_propose(d, out) == 0);
    k3_drafter_free(d);
}

/* Push n tokens (gen(i)) proposing after each; check the counts are linear. */
static void adversarial(int32_t (*gen)(int), const char *name) {
    enum { N = 100000 };
    k3_drafter *d = k3_drafter_new(16);
    int32_t out[16];
    for (int i = 0; i < N; i++) {
        k3_drafter_push(d, gen(i));
        k3_drafter_propose(d, out);
    }
    k3_drafter_counts c = k3_drafter_count(d);
    printf("  %s: %lld tokens, %lld entries, %lld probes, %zu bytes\n", name, (long long)c.tokens,
           (long long)c.entries, (long long)c.probes, c.bytes);
    CHECK(c.tokens == N);
    CHECK(c.entries <= 3 * (int64_t)N, "%s: %lld entries", name, (long long)c.entries);
    /* per token: 3 inserts and 3 lookups of <= 8 probes, the tokens compared
       to weigh the candidates, plus rehashing (each entry moves at most once
       per doubling: < 2 x entries x 8 in all) */
    int64_t per_token = 6 * 8 + K3_DRAFT_CHAIN * K3_DRAFT_MATCH_MAX;
    CHECK(c.probes <= per_token * N + 2 * 8 * 3 * (int64_t)N, "%s: %lld probes", name,
          (long long)c.probes);
    CHECK(c.bytes <= 200 * (size_t)N, "%s: %zu bytes", name, c.bytes);
    k3_drafter_free(d);
}

static int32_t same(int i) {
    (void)i;
    return 7;
}
static int32_t distinct(int i) {
    return i;
}

/* Runs of one token between distinct ones: every lookup finds long matches
 * at many earlier places, and the copy in progress breaks every 64 tokens. */
static int32_t runs(int i) {
    return i % 64 ? 7 : 1000 + i;
}

TEST(index_is_linear_on_adversarial_input) {
    adversarial(same, "one token repeated");
    adversarial(distinct, "all distinct");
    adversarial(runs, "runs of one token");
}

/* The choice rule on given chances and costs (gen/draft.h). */
TEST(choice_rule_picks_the_most_tokens_per_cost) {
    double half[K3_DRAFT_MAX + 1], free_verify[K3_DRAFT_MAX + 1], keep[K3_DRAFT_MAX];
    for (int k = 0; k <= K3_DRAFT_MAX; k++) half[k] = 1 + 0.5 * k, free_verify[k] = 1;
    for (int j = 0; j < K3_DRAFT_MAX; j++) keep[j] = 0.9;
    /* (1 + .9 + .81 + .729) / 2.5 = 1.372 beats k = 2 (1.355) and k = 4 (1.365) */
    CHECK(k3_draft_choose(keep, 4, half) == 3, "k %d", k3_draft_choose(keep, 4, half));
    CHECK(k3_draft_choose(keep, 2, half) == 2, "only two candidates");
    CHECK(k3_draft_choose(keep, 0, half) == 0, "no candidate");
    CHECK(k3_draft_choose(keep, 16, free_verify) == 16, "free verify sends every candidate");
    for (int j = 0; j < K3_DRAFT_MAX; j++) keep[j] = 0.4;
    CHECK(k3_draft_choose(keep, 16, half) == 0, "kept 40%%: no k beats a plain step");
    keep[0] = 0.5;
    CHECK(k3_draft_choose(keep, 1, half) == 0, "1.5 tokens for 1.5 steps only ties plain");
    keep[0] = 1, keep[1] = 0;
    CHECK(k3_draft_choose(keep, 2, half) == 1, "a draft sure to miss is not sent");
}

/* A fresh drafter (its chances still its priors) whose one draft pays only
 * if kept 7 times in 10: sent when the two earlier places of the 3-gram go
 * on alike, not when they differ, nor when the 3-gram occurred once. */
static int first_choice(const int32_t *tok, int n) {
    double cost[K3_DRAFT_MAX + 1];
    cost[0] = 1, cost[1] = 1.7;
    for (int k = 2; k <= K3_DRAFT_MAX; k++) cost[k] = 100;
    k3_drafter *d = k3_drafter_new(1);
    k3_drafter_set_cost(d, cost);
    for (int i = 0; i < n; i++) k3_drafter_push(d, tok[i]);
    int32_t out[K3_DRAFT_MAX];
    int k = k3_drafter_propose(d, out);
    k3_drafter_free(d);
    return k;
}

TEST(earlier_places_that_agree_make_a_draft_worth_sending) {
    const int32_t agree[] = {1, 2, 3, 9, 50, 1, 2, 3, 9, 60, 1, 2, 3};
    const int32_t split[] = {1, 2, 3, 9, 50, 1, 2, 3, 8, 60, 1, 2, 3};
    const int32_t once[] = {1, 2, 3, 9, 60, 1, 2, 3};
    CHECK(first_choice(agree, 13) == 1, "two places agree on 9: k %d", first_choice(agree, 13));
    CHECK(first_choice(split, 13) == 0, "9 or 8: k %d", first_choice(split, 13));
    CHECK(first_choice(once, 8) == 0, "one place: k %d", first_choice(once, 8));
}

/* Push tokens gen(0..n), proposing after each; the verify steps (k > 0)
 * from step `from` on, and the last k. */
static int steps_drafting(k3_drafter *d, int32_t (*gen)(int), int n, int from, int *last) {
    int32_t out[K3_DRAFT_MAX];
    int verify = 0;
    for (int i = 0; i < n; i++) {
        k3_drafter_push(d, gen(i));
        *last = k3_drafter_propose(d, out);
        verify += i >= from && *last > 0;
    }
    return verify;
}

static int32_t period10(int i) {
    return 500 + i % 10;
}

/* A pseudo-random walk over 3 tokens: short matches everywhere, their
 * continuations right about a third of the time. */
static int32_t three(int i) {
    uint64_t z = (uint64_t)i * 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return (int32_t)((z ^ (z >> 31)) % 3);
}

/* The same history, three cost tables, three choices: a copy whose drafts
 * were all kept sends every candidate when verifying is free, the most
 * tokens per cost at the default, and nothing when a draft costs two steps. */
TEST(the_chosen_k_follows_the_cost_table_and_the_history) {
    double free_verify[K3_DRAFT_MAX + 1], dear[K3_DRAFT_MAX + 1];
    for (int k = 0; k <= K3_DRAFT_MAX; k++) free_verify[k] = 1, dear[k] = 1 + 2 * k;
    const double *tables[3] = {free_verify, NULL, dear};
    int want[3] = {8, 8, 0}, last;
    for (int t = 0; t < 3; t++) {
        k3_drafter *d = k3_drafter_new(8);
        k3_drafter_set_cost(d, tables[t]);
        steps_drafting(d, period10, 200, 0, &last);
        CHECK(last == want[t], "table %d: k %d, want %d", t, last, want[t]);
        k3_drafter_free(d);
    }
    /* drafts that keep missing are rarely sent, though every step has
       candidates: only where a longer match than usual (a bucket seen
       little, still near its prior) makes one look worth it */
    k3_drafter *d = k3_drafter_new(8);
    int32_t out[K3_DRAFT_MAX];
    int verify = steps_drafting(d, three, 1000, 32, &last), cands = k3_drafter_candidates(d, out);
    printf("  3-token walk: %d verify steps in 968 tokens\n", verify);
    CHECK(verify < 10 && cands > 0, "%d verify steps in 968 tokens kept a third of the time; %d",
          verify, cands);
    /* the same drafter, now in a long copy: it learns from the candidates it
       did not send and drafts again */
    for (int i = 0; i < 100; i++) {
        k3_drafter_push(d, period10(i));
        last = k3_drafter_propose(d, out);
    }
    CHECK(last >= 4, "after 100 tokens of a copy, k %d", last);
    k3_drafter_free(d);
}

TEST(study_depth_and_the_best_drafter_on_a_copied_answer) {
    int32_t prompt[10], answer[10];
    for (int i = 0; i < 10; i++) prompt[i] = answer[i] = i + 1;
    uint8_t depth[10];
    k3_draft_study_depth(prompt, 10, answer, 10, depth);
    CHECK(depth[0] == 0, "10 was never followed by 1 before: %d", depth[0]);
    for (int i = 1; i < 10; i++) /* 1..i, then i + 1, is in the prompt */
        CHECK(depth[i] == (i < K3_STUDY_DEPTH_MAX ? i : K3_STUDY_DEPTH_MAX), "depth[%d] %d", i,
              depth[i]);
    double free_verify[K3_DRAFT_MAX + 1], dear[K3_DRAFT_MAX + 1];
    for (int k = 0; k <= K3_DRAFT_MAX; k++) free_verify[k] = 1, dear[k] = k + 2;
    free_verify[0] = dear[0] = 1;
    k3_replay_pass best;
    double c = k3_draft_study_oracle(depth, 10, 1, 8, free_verify, &best);
    CHECK(c == 1 && best.steps == 1 && best.by_k[8] == 1 && best.accepted == 8,
          "free verify: cost %g, %lld steps", c, (long long)best.steps);
    c = k3_draft_study_oracle(depth, 10, 3, 8, free_verify, &best); /* answer[1..2] too shallow */
    CHECK(c == 3 && best.steps == 3 && best.verify_steps == 1, "m 3: cost %g", c);
    c = k3_draft_study_oracle(depth, 10, 1, 8, dear, &best);
    CHECK(c == 9 && best.verify_steps == 0, "dear verify: cost %g", c);
    k3_replay_pass run;
    k3_draft_study_run(prompt, 10, answer, 10, 8, NULL, &run);
    CHECK(run.tokens == 9 && run.accepted <= run.drafted);
    CHECK(k3_draft_study_cost(&run, free_verify) == (double)run.steps);
}

/* The sampling rule's distribution for draft x, computed. */
static void check_rule(k3_sampler_params sp, const float *logits, int V) {
    k3_sampler *s = k3_sampler_new(&sp, V);
    k3_sampler_accept(s, 2);
    double p[16], r[16];
    k3_sampler_probs(s, logits, p);
    for (int x = 0; x < V; x++) {
        double rest = k3_spec_residual(p, V, x, r);
        CHECK(fabs(rest - (1 - p[x])) < 1e-15, "rest %g vs %g", rest, 1 - p[x]);
        CHECK(r[x] == 0);
        for (int t = 0; t < V; t++) {
            double q = (t == x ? p[x] : 0) + rest * r[t];
            CHECK(fabs(q - p[t]) < 1e-15, "x %d t %d: %.17g vs %.17g", x, t, q, p[t]);
        }
    }
    k3_sampler_free(s);
}

TEST(sampling_rule_keeps_the_target_distribution) {
    const float logits[8] = {1.0f, 2.5f, 0.3f, -1.0f, 2.4f, 0.0f, 1.7f, -3.0f};
    k3_sampler_params sp = k3_sampler_defaults();
    sp.temp = 0.8f;
    check_rule(sp, logits, 8);
    sp.top_k = 5, sp.top_p = 0.9f, sp.min_p = 0.05f, sp.rep_penalty = 1.3f;
    check_rule(sp, logits, 8);
    sp = k3_sampler_defaults(); /* greedy: a one-hot target */
    check_rule(sp, logits, 8);
}

TEST(sampling_rule_takes_a_sure_draft_and_never_an_impossible_one) {
    const float logits[4] = {0.0f, 50.0f, -50.0f, 0.0f};
    k3_sampler_params sp = k3_sampler_defaults();
    sp.temp = 1.0f, sp.top_k = 2;
    k3_sampler *s = k3_sampler_new(&sp, 4);
    double pr[4];
    for (int i = 0; i < 200; i++) {
        CHECK(k3_spec_sample(s, logits, 1, pr, 4) == 1);
        int32_t y = k3_spec_sample(s, logits, 2, pr, 4); /* p(2) = 0: never kept */
        CHECK(y == 0 || y == 1 || y == 3, "got %d", y);
        CHECK(y != 2);
    }
    k3_sampler_free(s);
}

int main(void) {
    RUN(proposes_what_followed_the_longest_match);
    RUN(a_repeat_reaching_the_present_continues_with_its_period);
    RUN(copies_from_the_occurrence_whose_context_agrees_furthest_back);
    RUN(a_long_copy_resumes_after_a_few_tokens_that_differ);
    RUN(a_copy_applies_a_substitution_seen_twice);
    RUN(nothing_to_propose_without_a_match);
    RUN(study_depth_and_the_best_drafter_on_a_copied_answer);
    RUN(index_is_linear_on_adversarial_input);
    RUN(choice_rule_picks_the_most_tokens_per_cost);
    RUN(the_chosen_k_follows_the_cost_table_and_the_history);
    RUN(earlier_places_that_agree_make_a_draft_worth_sending);
    RUN(sampling_rule_keeps_the_target_distribution);
    RUN(sampling_rule_takes_a_sure_draft_and_never_an_impossible_one);
    return t_done();
}
