/* sampler.c — logit bias, repetition / presence / frequency penalties,
 * greedy, top-k, top-p, min-p, temperature (see sampler.h for the order and
 * the determinism rules). */
#include "gen/sampler.h"

#include "base/err.h"
#include "base/mem.h"
#include "gen/rng.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Tempered log-probability below which a token is dropped before sorting. */
#define PRUNE_LOG -40.0

typedef struct {
    int32_t id;
    float logit;
} cand;

struct k3_sampler {
    k3_sampler_params p;
    int vocab;
    k3_rng rng;
    int32_t *ring; /* last rep_context accepted tokens */
    int ring_n, ring_pos;
    float *pen;      /* logits after the repetition penalty */
    uint32_t *stamp; /* per-id marker so each distinct token is penalised once */
    uint32_t stamp_now;
    cand *c;
    double *w;
    k3_logit_bias *bias; /* own copy of p.bias */
    uint32_t *count;     /* [vocab] generated-token counts; NULL when no penalty reads them */
    int32_t *seen;       /* the ids whose count is non-zero, n_seen of them */
    int n_seen;
};

k3_sampler_params k3_sampler_defaults(void) {
    k3_sampler_params p = {0};
    p.temp = 0.0f;
    p.top_p = 1.0f;
    p.rep_penalty = 1.0f;
    p.rep_context = 20;
    return p;
}

int k3_sampler_check(const k3_sampler_params *p) {
    if (!(p->temp >= 0) || !isfinite(p->temp))
        return k3_seterr("--temp must be a finite number >= 0 (got %g)", p->temp);
    if (p->top_k < 0) return k3_seterr("--top-k must be >= 0 (got %d)", p->top_k);
    if (!(p->top_p > 0 && p->top_p <= 1))
        return k3_seterr("--top-p must be in (0, 1] (got %g)", p->top_p);
    if (!(p->min_p >= 0 && p->min_p <= 1))
        return k3_seterr("--min-p must be in [0, 1] (got %g)", p->min_p);
    if (!(p->rep_penalty > 0) || !isfinite(p->rep_penalty))
        return k3_seterr("--repetition-penalty must be > 0 (got %g)", p->rep_penalty);
    if (p->rep_context < 0 || p->rep_context > K3_SAMPLER_MAX_REP_CONTEXT)
        return k3_seterr("--repetition-context-size must be in 0..%d (got %d)",
                         K3_SAMPLER_MAX_REP_CONTEXT, p->rep_context);
    if (!(p->presence_penalty >= -2 && p->presence_penalty <= 2))
        return k3_seterr("presence_penalty must be in [-2, 2] (got %g)", p->presence_penalty);
    if (!(p->frequency_penalty >= -2 && p->frequency_penalty <= 2))
        return k3_seterr("frequency_penalty must be in [-2, 2] (got %g)", p->frequency_penalty);
    if (p->n_bias < 0 || p->n_bias > K3_SAMPLER_MAX_BIAS || (p->n_bias && !p->bias))
        return k3_seterr("logit_bias: at most %d entries (got %d)", K3_SAMPLER_MAX_BIAS, p->n_bias);
    for (int i = 0; i < p->n_bias; i++)
        if (!(p->bias[i].bias >= -100 && p->bias[i].bias <= 100))
            return k3_seterr("logit_bias[%d]: the bias must be in [-100, 100] (got %g)",
                             p->bias[i].id, p->bias[i].bias);
    return 0;
}

/* Bias ids exist in the vocabulary (known only when the sampler is made). */
static int check_bias_ids(const k3_sampler_params *p, int vocab) {
    for (int i = 0; i < p->n_bias; i++)
        if (p->bias[i].id < 0 || p->bias[i].id >= vocab)
            return k3_seterr("logit_bias: token id %d is not in the vocabulary (0..%d)",
                             p->bias[i].id, vocab - 1);
    return 0;
}

uint64_t k3_sampler_next_u64(k3_sampler *s) {
    return k3_rng_u64(&s->rng);
}

static double next_unit(k3_sampler *s) {
    return k3_rng_unit(&s->rng);
}

static void seed_rng(k3_sampler *s) {
    k3_rng_seed(&s->rng, s->p.seed);
}

k3_sampler *k3_sampler_new(const k3_sampler_params *p, int vocab) {
    if (k3_sampler_check(p)) return NULL;
    if (vocab <= 0) {
        k3_seterr("sampler: vocabulary size %d", vocab);
        return NULL;
    }
    if (check_bias_ids(p, vocab)) return NULL;
    k3_sampler *s = k3_xcalloc(1, sizeof *s);
    s->p = *p;
    s->vocab = vocab;
    s->ring = k3_xcalloc(p->rep_context ? (size_t)p->rep_context : 1, sizeof *s->ring);
    s->pen = k3_xmalloc((size_t)vocab * sizeof *s->pen);
    s->stamp = k3_xcalloc((size_t)vocab, sizeof *s->stamp);
    s->c = k3_xmalloc((size_t)vocab * sizeof *s->c);
    s->w = k3_xmalloc((size_t)vocab * sizeof *s->w);
    if (p->n_bias) {
        s->bias = k3_xmalloc((size_t)p->n_bias * sizeof *s->bias);
        memcpy(s->bias, p->bias, (size_t)p->n_bias * sizeof *s->bias);
    }
    s->p.bias = s->bias;
    if (p->presence_penalty != 0 || p->frequency_penalty != 0) {
        s->count = k3_xcalloc((size_t)vocab, sizeof *s->count);
        s->seen = k3_xmalloc((size_t)vocab * sizeof *s->seen);
    }
    seed_rng(s);
    return s;
}

void k3_sampler_free(k3_sampler *s) {
    if (!s) return;
    free(s->ring);
    free(s->pen);
    free(s->stamp);
    free(s->c);
    free(s->w);
    free(s->bias);
    free(s->count);
    free(s->seen);
    free(s);
}

void k3_sampler_reset(k3_sampler *s) {
    s->ring_n = s->ring_pos = 0;
    for (int i = 0; i < s->n_seen; i++) s->count[s->seen[i]] = 0;
    s->n_seen = 0;
    seed_rng(s);
}

void k3_sampler_accept(k3_sampler *s, int32_t id) {
    if (s->p.rep_context <= 0) return;
    s->ring[s->ring_pos] = id;
    s->ring_pos = (s->ring_pos + 1) % s->p.rep_context;
    if (s->ring_n < s->p.rep_context) s->ring_n++;
}

void k3_sampler_accept_generated(k3_sampler *s, int32_t id) {
    k3_sampler_accept(s, id);
    if (!s->count || id < 0 || id >= s->vocab) return;
    if (s->count[id]++ == 0) s->seen[s->n_seen++] = id;
}

/* OpenAI's presence / frequency penalties on the generated-token counts. */
static void apply_counts(k3_sampler *s) {
    for (int i = 0; s->count && i < s->n_seen; i++) {
        int32_t id = s->seen[i];
        s->pen[id] -= (float)s->count[id] * s->p.frequency_penalty + s->p.presence_penalty;
    }
}

/* The CTRL repetition penalty, each distinct token of the ring once. */
static void apply_repetition(k3_sampler *s) {
    if (s->p.rep_penalty == 1.0f || !s->ring_n) return;
    if (++s->stamp_now == 0) { /* wrapped: clear the markers */
        memset(s->stamp, 0, (size_t)s->vocab * sizeof *s->stamp);
        s->stamp_now = 1;
    }
    for (int i = 0; i < s->ring_n; i++) {
        int32_t id = s->ring[i];
        if (id < 0 || id >= s->vocab || s->stamp[id] == s->stamp_now) continue;
        s->stamp[id] = s->stamp_now;
        float l = s->pen[id];
        s->pen[id] = l > 0 ? l / s->p.rep_penalty : l * s->p.rep_penalty;
    }
}

/* s->pen = logits + bias, then the penalties (NaN becomes -inf). */
static void apply_penalty(k3_sampler *s, const float *logits) {
    for (int i = 0; i < s->vocab; i++) s->pen[i] = isnan(logits[i]) ? -INFINITY : logits[i];
    for (int i = 0; i < s->p.n_bias; i++) s->pen[s->bias[i].id] += s->bias[i].bias;
    apply_repetition(s);
    apply_counts(s);
}

static int32_t argmax(const float *x, int n) {
    int32_t best = -1;
    for (int i = 0; i < n; i++)
        if (x[i] > -INFINITY && (best < 0 || x[i] > x[best])) best = i;
    return best;
}

/* The total order of candidates: higher logit first, lower id on ties. */
static int cand_cmp(const void *a, const void *b) {
    const cand *x = a, *y = b;
    if (x->logit != y->logit) return x->logit > y->logit ? -1 : 1;
    return x->id < y->id ? -1 : x->id > y->id;
}

static int id_cmp(const void *a, const void *b) {
    const cand *x = a, *y = b;
    return x->id < y->id ? -1 : x->id > y->id;
}

static void swap_cand(cand *a, cand *b) {
    cand t = *a;
    *a = *b;
    *b = t;
}

/* Reorder c[0..n) so that c[0..k) are the k best (in no particular order):
 * quickselect with a median-of-three pivot, falling back to a full sort if
 * it degenerates. The result as a set is unique (cand_cmp is a total order). */
static void select_best(cand *c, int n, int k) {
    int lo = 0, hi = n - 1, budget = 64;
    while (hi > lo && budget-- > 0) {
        int mid = lo + (hi - lo) / 2;
        if (cand_cmp(&c[mid], &c[lo]) < 0) swap_cand(&c[mid], &c[lo]);
        if (cand_cmp(&c[hi], &c[lo]) < 0) swap_cand(&c[hi], &c[lo]);
        if (cand_cmp(&c[hi], &c[mid]) < 0) swap_cand(&c[hi], &c[mid]);
        cand pivot = c[mid];
        int i = lo, j = hi;
        while (i <= j) { /* Hoare partition: better than pivot to the left */
            while (cand_cmp(&c[i], &pivot) < 0) i++;
            while (cand_cmp(&pivot, &c[j]) < 0) j--;
            if (i <= j) swap_cand(&c[i++], &c[j--]);
        }
        if (k - 1 <= j)
            hi = j;
        else if (k - 1 >= i)
            lo = i;
        else
            return;
    }
    if (hi > lo) qsort(c + lo, (size_t)(hi - lo + 1), sizeof *c, cand_cmp);
}

/* Candidates in id order, pruned at PRUNE_LOG after temperature. */
static int collect(k3_sampler *s, float best) {
    double scale = s->p.temp > 1 ? s->p.temp : 1.0;
    double floor_l = best + PRUNE_LOG * scale;
    int n = 0;
    for (int i = 0; i < s->vocab; i++)
        if (s->pen[i] > -INFINITY && s->pen[i] >= floor_l) s->c[n++] = (cand){i, s->pen[i]};
    return n;
}

/* Top-p over c[0..n) (id order in and out): the smallest most-likely prefix
 * whose untempered mass reaches top_p of the total (summed in id order).
 * Only as much of the ranking as needed is sorted: 64, 256, ... best. */
static int keep_top_p(k3_sampler *s, int n, float best) {
    double total = 0;
    for (int i = 0; i < n; i++) total += exp((double)s->c[i].logit - best);
    int keep = n;
    for (int m = n < 64 ? n : 64;; m = m * 4 < n ? m * 4 : n) {
        select_best(s->c, n, m);
        qsort(s->c, (size_t)m, sizeof *s->c, cand_cmp);
        double cum = 0;
        int found = 0;
        for (int i = 0; i < m && !found; i++) {
            cum += exp((double)s->c[i].logit - best);
            found = cum >= s->p.top_p * total;
            if (found) keep = i + 1;
        }
        if (found || m == n) break;
    }
    qsort(s->c, (size_t)keep, sizeof *s->c, id_cmp);
    return keep;
}

/* Min-p: keep p >= min_p x p_max, i.e. logit >= best + log(min_p); id order kept. */
static int keep_min_p(k3_sampler *s, int n, float best) {
    double cut = log((double)s->p.min_p);
    int k = 0;
    for (int i = 0; i < n; i++)
        if ((double)s->c[i].logit - best >= cut) s->c[k++] = s->c[i];
    return k;
}

/* Filters 3-5 leave a set of candidates in id order in c[0..n); their
 * tempered weights go to s->w. Returns n (0: no finite logit). */
static int filtered_weights(k3_sampler *s, double *sum) {
    int32_t b = argmax(s->pen, s->vocab);
    if (b < 0) return 0;
    float best = s->pen[b];
    int n = collect(s, best);
    if (s->p.top_k > 0 && n > s->p.top_k) {
        select_best(s->c, n, s->p.top_k);
        n = s->p.top_k;
        qsort(s->c, (size_t)n, sizeof *s->c, id_cmp);
    }
    if (s->p.top_p < 1.0f) n = keep_top_p(s, n, best);
    if (s->p.min_p > 0.0f) n = keep_min_p(s, n, best);
    *sum = 0;
    for (int i = 0; i < n; i++) *sum += (s->w[i] = exp(((double)s->c[i].logit - best) / s->p.temp));
    return n;
}

int32_t k3_sampler_sample(k3_sampler *s, const float *logits) {
    apply_penalty(s, logits);
    if (s->p.temp <= 0) {
        int32_t b = argmax(s->pen, s->vocab);
        if (b < 0) k3_seterr("sampler: every logit is NaN or -inf");
        return b;
    }
    double sum;
    int n = filtered_weights(s, &sum);
    if (!n) return k3_seterr("sampler: every logit is NaN or -inf");
    double u = next_unit(s) * sum, cum = 0;
    for (int i = 0; i < n; i++) {
        cum += s->w[i];
        if (u < cum) return s->c[i].id;
    }
    return s->c[n - 1].id; /* u rounded up to sum: the last candidate */
}

int k3_sampler_probs(k3_sampler *s, const float *logits, double *probs) {
    memset(probs, 0, (size_t)s->vocab * sizeof *probs);
    apply_penalty(s, logits);
    if (s->p.temp <= 0) {
        int32_t b = argmax(s->pen, s->vocab);
        if (b < 0) return 0;
        probs[b] = 1;
        return 1;
    }
    double sum;
    int n = filtered_weights(s, &sum);
    for (int i = 0; i < n; i++) probs[s->c[i].id] = s->w[i] / sum;
    return n;
}
