/* test_gen_sampler.c — samplers (src/gen/sampler.h): greedy, top-k, top-p,
 * min-p, temperature and repetition penalty, checked statistically over many
 * seeded draws and against a naive full-sort reference of the distribution. */
#include "t.h"

#include "base/err.h"
#include "gen/sampler.h"

#include <math.h>
#include <stdint.h>

static void random_logits(float *x, int n, double scale) {
    for (int i = 0; i < n; i++) x[i] = (float)(scale * t_rand());
}

static k3_sampler_params params(float temp, int top_k, float top_p, float min_p) {
    k3_sampler_params p = k3_sampler_defaults();
    p.temp = temp;
    p.top_k = top_k;
    p.top_p = top_p;
    p.min_p = min_p;
    p.seed = 1234;
    return p;
}

/* Rank of id among logits (0 = best; ties by lower id first). */
static int rank_of(const float *x, int n, int id) {
    int r = 0;
    for (int i = 0; i < n; i++)
        if (x[i] > x[id] || (x[i] == x[id] && i < id)) r++;
    return r;
}

TEST(greedy_is_argmax_lowest_id_on_ties) {
    t_seed(1);
    float x[257];
    random_logits(x, 257, 3);
    k3_sampler_params p = params(0, 0, 1, 0);
    k3_sampler *s = k3_sampler_new(&p, 257);
    int best = 0;
    for (int i = 1; i < 257; i++)
        if (x[i] > x[best]) best = i;
    CHECK(k3_sampler_sample(s, x) == best);
    x[200] = x[best];
    x[best + 0] = x[200];
    int lo = best < 200 ? best : 200;
    CHECK(k3_sampler_sample(s, x) == lo);
    /* filters do not matter at temp 0 */
    k3_sampler_free(s);
    p = params(0, 3, 0.1f, 0.9f);
    s = k3_sampler_new(&p, 257);
    CHECK(k3_sampler_sample(s, x) == lo);
    k3_sampler_free(s);
}

TEST(top_k_never_samples_outside_top_k) {
    t_seed(2);
    enum { V = 61, K = 5, N = 20000 };
    float x[V];
    random_logits(x, V, 1.0); /* flat-ish: the tail would be drawn often without top-k */
    k3_sampler_params p = params(1.5f, K, 1, 0);
    k3_sampler *s = k3_sampler_new(&p, V);
    int seen[V] = {0}, outside = 0;
    for (int i = 0; i < N; i++) {
        int id = k3_sampler_sample(s, x);
        seen[id]++;
        if (rank_of(x, V, id) >= K) outside++;
    }
    CHECK(outside == 0, "%d draws outside the top %d", outside, K);
    int distinct = 0;
    for (int i = 0; i < V; i++) distinct += seen[i] > 0;
    CHECK(distinct == K, "%d distinct tokens drawn", distinct);
    k3_sampler_free(s);
}

TEST(min_p_threshold) {
    t_seed(3);
    enum { V = 200, N = 20000 };
    float x[V];
    random_logits(x, V, 4.0);
    float mx = x[0];
    for (int i = 1; i < V; i++) mx = x[i] > mx ? x[i] : mx;
    const float min_p = 0.05f;
    k3_sampler_params p = params(2.0f, 0, 1, min_p);
    k3_sampler *s = k3_sampler_new(&p, V);
    int bad = 0, kept = 0;
    for (int i = 0; i < N; i++) {
        int id = k3_sampler_sample(s, x);
        if (exp((double)x[id] - mx) < min_p) bad++;
    }
    for (int i = 0; i < V; i++) kept += exp((double)x[i] - mx) >= min_p;
    double probs[V];
    CHECK(k3_sampler_probs(s, x, probs) == kept);
    CHECK(bad == 0, "%d draws below min_p x p_max", bad);
    CHECK(kept > 3 && kept < V, "the test distribution kept %d of %d", kept, V);
    k3_sampler_free(s);
}

TEST(top_p_keeps_smallest_prefix_reaching_mass) {
    t_seed(4);
    enum { V = 300 };
    float x[V];
    random_logits(x, V, 3.0);
    const float top_p = 0.7f;
    k3_sampler_params p = params(1.0f, 0, top_p, 0);
    k3_sampler *s = k3_sampler_new(&p, V);
    double probs[V];
    int n = k3_sampler_probs(s, x, probs);
    /* untempered full probabilities, summed in rank order */
    double mx = -1e30, z = 0;
    for (int i = 0; i < V; i++) mx = x[i] > mx ? x[i] : mx;
    for (int i = 0; i < V; i++) z += exp(x[i] - mx);
    double kept_mass = 0, max_out = 0, min_in = 1;
    for (int i = 0; i < V; i++) {
        double q = exp(x[i] - mx) / z;
        if (probs[i] > 0) {
            kept_mass += q;
            min_in = q < min_in ? q : min_in;
        } else {
            max_out = q > max_out ? q : max_out;
        }
    }
    CHECK(kept_mass >= top_p - 1e-6, "kept mass %g", kept_mass);
    CHECK(kept_mass - min_in < top_p, "not the smallest prefix (mass without last %g)",
          kept_mass - min_in);
    CHECK(max_out <= min_in, "a dropped token is more likely than a kept one");
    CHECK(n > 1 && n < V);
    for (int i = 0; i < 5000; i++) {
        int id = k3_sampler_sample(s, x);
        if (probs[id] == 0) {
            CHECK(0, "drew %d outside the nucleus", id);
            break;
        }
    }
    k3_sampler_free(s);
}

/* Naive reference of the whole chain: full sort, no pruning. */
static int naive_probs(const float *x, int V, k3_sampler_params p, double *out) {
    int *idx = malloc(sizeof(int) * (size_t)V);
    for (int i = 0; i < V; i++) idx[i] = i;
    for (int i = 1; i < V; i++) /* insertion sort: desc logit, asc id */
        for (int j = i; j > 0 && (x[idx[j]] > x[idx[j - 1]]); j--) {
            int t = idx[j];
            idx[j] = idx[j - 1];
            idx[j - 1] = t;
        }
    int n = V;
    if (p.top_k > 0 && n > p.top_k) n = p.top_k;
    double z = 0, cum = 0;
    for (int i = 0; i < n; i++) z += exp((double)x[idx[i]] - x[idx[0]]);
    if (p.top_p < 1)
        for (int i = 0; i < n; i++) {
            cum += exp((double)x[idx[i]] - x[idx[0]]);
            if (cum >= p.top_p * z) {
                n = i + 1;
                break;
            }
        }
    if (p.min_p > 0) {
        int k = 1;
        while (k < n && exp((double)x[idx[k]] - x[idx[0]]) >= p.min_p) k++;
        n = k;
    }
    memset(out, 0, sizeof(double) * (size_t)V);
    z = 0;
    for (int i = 0; i < n; i++) z += exp(((double)x[idx[i]] - x[idx[0]]) / p.temp);
    for (int i = 0; i < n; i++) out[idx[i]] = exp(((double)x[idx[i]] - x[idx[0]]) / p.temp) / z;
    free(idx);
    return n;
}

TEST(distribution_matches_naive_reference) {
    const int sizes[] = {1, 2, 7, 33, 1000, 4099};
    const k3_sampler_params ps[] = {
        params(1, 0, 1, 0),       params(0.7f, 10, 1, 0),         params(1.3f, 0, 0.9f, 0),
        params(0.5f, 0, 1, 0.1f), params(2.0f, 40, 0.95f, 0.02f), params(50.0f, 0, 1, 0)};
    for (size_t si = 0; si < sizeof sizes / sizeof *sizes; si++) {
        int V = sizes[si];
        float *x = malloc(sizeof(float) * (size_t)V);
        double *a = malloc(sizeof(double) * (size_t)V), *b = malloc(sizeof(double) * (size_t)V);
        t_seed(100 + si);
        random_logits(x, V, 8.0);
        for (size_t pi = 0; pi < sizeof ps / sizeof *ps; pi++) {
            k3_sampler *s = k3_sampler_new(&ps[pi], V);
            int na = k3_sampler_probs(s, x, a), nb = naive_probs(x, V, ps[pi], b);
            double err = 0;
            for (int i = 0; i < V; i++) err = fmax(err, fabs(a[i] - b[i]));
            CHECK(err < 1e-9, "V=%d params %zu: max prob error %g", V, pi, err);
            CHECK(na == nb || err < 1e-12, "V=%d params %zu: %d vs %d kept", V, pi, na, nb);
            k3_sampler_free(s);
        }
        free(x);
        free(a);
        free(b);
    }
}

/* Many equal logits: the selection must break ties by lower id exactly like a full sort. */
TEST(ties_match_naive_reference) {
    enum { V = 3001 };
    float *x = malloc(sizeof(float) * V);
    double *a = malloc(sizeof(double) * V), *b = malloc(sizeof(double) * V);
    t_seed(77);
    for (int i = 0; i < V; i++) x[i] = (float)floor(4 * t_rand()); /* 8 distinct values */
    const k3_sampler_params ps[] = {params(1, 7, 1, 0), params(1, 500, 1, 0),
                                    params(0.9f, 0, 0.3f, 0), params(1.1f, 100, 0.5f, 0)};
    for (size_t pi = 0; pi < sizeof ps / sizeof *ps; pi++) {
        k3_sampler *s = k3_sampler_new(&ps[pi], V);
        int na = k3_sampler_probs(s, x, a), nb = naive_probs(x, V, ps[pi], b);
        int same = na == nb;
        for (int i = 0; i < V; i++) same &= (a[i] > 0) == (b[i] > 0) && fabs(a[i] - b[i]) < 1e-12;
        CHECK(same, "params %zu: %d vs %d kept", pi, na, nb);
        k3_sampler_free(s);
    }
    free(x);
    free(a);
    free(b);
}

TEST(draw_frequencies_follow_the_distribution) {
    t_seed(5);
    enum { V = 12, N = 60000 };
    float x[V];
    random_logits(x, V, 2.0);
    k3_sampler_params p = params(0.8f, 0, 1, 0);
    k3_sampler *s = k3_sampler_new(&p, V);
    double probs[V];
    k3_sampler_probs(s, x, probs);
    int cnt[V] = {0};
    for (int i = 0; i < N; i++) cnt[k3_sampler_sample(s, x)]++;
    double chi2 = 0;
    for (int i = 0; i < V; i++) {
        double e = probs[i] * N;
        if (e > 0) chi2 += (cnt[i] - e) * (cnt[i] - e) / e;
    }
    /* 11 degrees of freedom: P(chi2 > 40) ~ 3e-5; the seed is fixed, so this is deterministic */
    CHECK(chi2 < 40, "chi2 = %g", chi2);
    k3_sampler_free(s);
}

TEST(seeded_runs_reproduce_exactly) {
    t_seed(6);
    enum { V = 500, N = 300 };
    float x[V];
    random_logits(x, V, 2.0);
    k3_sampler_params p = params(1.0f, 50, 0.95f, 0.01f);
    k3_sampler *a = k3_sampler_new(&p, V), *b = k3_sampler_new(&p, V);
    p.seed = 1235;
    k3_sampler *c = k3_sampler_new(&p, V);
    int same_ab = 1, same_ac = 1;
    int32_t first[N];
    for (int i = 0; i < N; i++) {
        int32_t ta = k3_sampler_sample(a, x), tb = k3_sampler_sample(b, x),
                tc = k3_sampler_sample(c, x);
        first[i] = ta;
        same_ab &= ta == tb;
        same_ac &= ta == tc;
    }
    CHECK(same_ab, "same seed gave different tokens");
    CHECK(!same_ac, "different seeds gave the same %d tokens", N);
    k3_sampler_reset(a);
    int again = 1;
    for (int i = 0; i < N; i++) again &= k3_sampler_sample(a, x) == first[i];
    CHECK(again, "reset did not restart the sequence");
    k3_sampler_free(a);
    k3_sampler_free(b);
    k3_sampler_free(c);
}

TEST(repetition_penalty_and_context_window) {
    float x[4] = {2.0f, -1.0f, 1.5f, 0.5f};
    k3_sampler_params p = params(0, 0, 1, 0);
    p.rep_penalty = 2.0f;
    p.rep_context = 3;
    k3_sampler *s = k3_sampler_new(&p, 4);
    CHECK(k3_sampler_sample(s, x) == 0);
    k3_sampler_accept(s, 0); /* 2.0 -> 1.0: token 2 (1.5) wins */
    k3_sampler_accept(s, 0); /* penalised once, not twice */
    CHECK(k3_sampler_sample(s, x) == 2);
    k3_sampler_accept(s, 1);
    k3_sampler_accept(s, 2); /* window now {0, 1, 2}: 0 -> 1.0, 2 -> 0.75 */
    CHECK(k3_sampler_sample(s, x) == 0);
    k3_sampler_accept(s, 3);
    k3_sampler_accept(s, 3);
    k3_sampler_accept(s, 3); /* 0 and 2 fell out of the window */
    CHECK(k3_sampler_sample(s, x) == 0);
    double probs[4];
    k3_sampler_free(s);
    p.temp = 1.0f;
    s = k3_sampler_new(&p, 4);
    k3_sampler_accept(s, 1); /* negative logit is multiplied: -1 -> -2 */
    k3_sampler_probs(s, x, probs);
    double z = exp(2.0) + exp(-2.0) + exp(1.5) + exp(0.5);
    CHECK_NEAR(probs[1], exp(-2.0) / z, 1e-12);
    k3_sampler_free(s);
}

/* Logit bias is added before anything, greedy included: -100 on the argmax
 * moves greedy to the runner-up; +100 on a poor token makes it the argmax. */
TEST(logit_bias_moves_greedy) {
    float x[5] = {1.0f, 4.0f, 3.5f, -2.0f, 0.0f};
    k3_logit_bias b[1] = {{1, -100.0f}};
    k3_sampler_params p = params(0, 0, 1, 0);
    k3_sampler *s = k3_sampler_new(&p, 5);
    CHECK(k3_sampler_sample(s, x) == 1);
    k3_sampler_free(s);
    p.bias = b, p.n_bias = 1;
    s = k3_sampler_new(&p, 5);
    CHECK(k3_sampler_sample(s, x) == 2);
    k3_sampler_free(s);
    b[0] = (k3_logit_bias){3, 100.0f};
    s = k3_sampler_new(&p, 5);
    CHECK(k3_sampler_sample(s, x) == 3);
    k3_sampler_free(s);
    /* sampled: the distribution is softmax(logit + bias) exactly */
    b[0] = (k3_logit_bias){0, 2.5f};
    p = params(1, 0, 1, 0), p.bias = b, p.n_bias = 1;
    s = k3_sampler_new(&p, 5);
    double probs[5], want[5], z = 0;
    for (int i = 0; i < 5; i++) z += (want[i] = exp((double)x[i] + (i == 0 ? 2.5 : 0)));
    k3_sampler_probs(s, x, probs);
    for (int i = 0; i < 5; i++) CHECK(fabs(probs[i] - want[i] / z) < 1e-12, "id %d", i);
    k3_sampler_free(s);
    b[0] = (k3_logit_bias){5, 1.0f}; /* past the vocabulary */
    CHECK(!k3_sampler_new(&p, 5) && strstr(k3_errmsg(), "token id 5"), "%s", k3_errmsg());
    b[0] = (k3_logit_bias){0, 101.0f};
    CHECK(!k3_sampler_new(&p, 5) && strstr(k3_errmsg(), "[-100, 100]"), "%s", k3_errmsg());
}

/* OpenAI: mu[j] -= c[j] * frequency_penalty + (c[j] > 0) * presence_penalty,
 * c[j] counting generated tokens only (the prompt's do not count). */
TEST(presence_frequency_penalties_exact) {
    float x[6] = {0.5f, 1.0f, -0.25f, 2.0f, 0.0f, 1.5f};
    k3_sampler_params p = params(0.7f, 0, 1, 0);
    p.presence_penalty = 0.6f, p.frequency_penalty = 0.35f;
    k3_sampler *s = k3_sampler_new(&p, 6);
    k3_sampler_accept(s, 4); /* a prompt token: no penalty */
    int gen[] = {3, 1, 3, 3, 5};
    for (int i = 0; i < 5; i++) k3_sampler_accept_generated(s, gen[i]);
    int cnt[6] = {0, 1, 0, 3, 0, 1};
    double probs[6], want[6], z = 0;
    for (int j = 0; j < 6; j++) {
        double mu = (double)x[j] - cnt[j] * (double)0.35f - (cnt[j] > 0) * (double)0.6f;
        z += (want[j] = exp(mu / (double)0.7f));
    }
    k3_sampler_probs(s, x, probs);
    for (int j = 0; j < 6; j++)
        CHECK(fabs(probs[j] - want[j] / z) < 1e-6, "id %d: %g vs %g", j, probs[j], want[j] / z);
    /* greedy: token 3 (2.0 - 3*0.35 - 0.6 = 0.35) loses to 5 (1.5 - 0.35 - 0.6 = 0.55),
     * which beats 0 (0.5, never generated) */
    k3_sampler_free(s);
    p.temp = 0;
    s = k3_sampler_new(&p, 6);
    CHECK(k3_sampler_sample(s, x) == 3);
    for (int i = 0; i < 5; i++) k3_sampler_accept_generated(s, gen[i]);
    CHECK(k3_sampler_sample(s, x) == 5);
    k3_sampler_accept_generated(s, 5); /* 5 now 1.5 - 0.7 - 0.6 = 0.2: 0 wins */
    CHECK(k3_sampler_sample(s, x) == 0);
    k3_sampler_reset(s); /* counts forgotten */
    CHECK(k3_sampler_sample(s, x) == 3);
    k3_sampler_free(s);
    /* negative penalties favour repeats */
    p.presence_penalty = -2, p.frequency_penalty = 0;
    s = k3_sampler_new(&p, 6);
    k3_sampler_accept_generated(s, 2);
    CHECK(k3_sampler_sample(s, x) == 3); /* -0.25 + 2 = 1.75 < 2.0 */
    k3_sampler_accept_generated(s, 4);
    k3_sampler_free(s);
    p.presence_penalty = 2.5f;
    CHECK(!k3_sampler_new(&p, 6) && strstr(k3_errmsg(), "presence_penalty"), "%s", k3_errmsg());
    p.presence_penalty = 0, p.frequency_penalty = NAN;
    CHECK(!k3_sampler_new(&p, 6) && strstr(k3_errmsg(), "frequency_penalty"), "%s", k3_errmsg());
}

TEST(nan_and_bad_parameters) {
    float x[3] = {NAN, 1.0f, NAN};
    k3_sampler_params p = params(1.0f, 0, 1, 0);
    k3_sampler *s = k3_sampler_new(&p, 3);
    for (int i = 0; i < 50; i++) CHECK(k3_sampler_sample(s, x) == 1);
    x[1] = NAN;
    CHECK(k3_sampler_sample(s, x) == -1 && strstr(k3_errmsg(), "NaN"));
    k3_sampler_free(s);
    p.top_p = 0;
    CHECK(!k3_sampler_new(&p, 3) && strstr(k3_errmsg(), "--top-p"), "%s", k3_errmsg());
    p = params(-1, 0, 1, 0);
    CHECK(!k3_sampler_new(&p, 3) && strstr(k3_errmsg(), "--temp"));
    p = params(1, -2, 1, 0);
    CHECK(!k3_sampler_new(&p, 3) && strstr(k3_errmsg(), "--top-k"));
    p = params(1, 0, 1, 1.5f);
    CHECK(!k3_sampler_new(&p, 3) && strstr(k3_errmsg(), "--min-p"));
    p = params(1, 0, 1, 0);
    p.rep_penalty = 0;
    CHECK(!k3_sampler_new(&p, 3) && strstr(k3_errmsg(), "--repetition-penalty"));
}

int main(void) {
    RUN(greedy_is_argmax_lowest_id_on_ties);
    RUN(top_k_never_samples_outside_top_k);
    RUN(min_p_threshold);
    RUN(top_p_keeps_smallest_prefix_reaching_mass);
    RUN(distribution_matches_naive_reference);
    RUN(ties_match_naive_reference);
    RUN(draw_frequencies_follow_the_distribution);
    RUN(seeded_runs_reproduce_exactly);
    RUN(repetition_penalty_and_context_window);
    RUN(nan_and_bad_parameters);
    RUN(logit_bias_moves_greedy);
    RUN(presence_frequency_penalties_exact);
    return t_done();
}
