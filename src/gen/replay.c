/* replay.c — the replay benchmark's passes and the verify-cost sweep (see
 * replay.h). */
#include "gen/replay.h"

#include "base/err.h"
#include "base/mem.h"
#include "gen/spec.h"
#include "k3.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double cpu_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

typedef struct {
    const int32_t *ans;
    size_t na, pos; /* tokens emitted so far */
    int digest;     /* hash the logits each choice sees */
    uint64_t hash;  /* FNV-1a over their bytes */
    size_t row_bytes;
} forced;

static uint64_t fnv1a(uint64_t h, const void *p, size_t n) {
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}

/* The model's choice, forced to the answer's next token. */
static int32_t choose_forced(void *ctx, const float *logits, int32_t draft) {
    (void)draft;
    forced *f = ctx;
    if (f->digest) f->hash = fnv1a(f->hash, logits, f->row_bytes);
    return f->ans[f->pos];
}

static int take_forced(void *ctx, int32_t id) {
    (void)id;
    forced *f = ctx;
    return ++f->pos >= f->na;
}

k3_seq *k3_replay_prefill(k3_model *m, const int32_t *prompt, size_t np) {
    k3_seq *s = k3_seq_new(m);
    if (np && k3_forward(s, prompt, (int64_t)np, NULL, 0)) {
        k3_seq_free(s);
        return NULL;
    }
    return s;
}

/* Counts and times of the decode loop, from the pass's k3_spec. */
static void record(k3_replay_pass *r, const k3_spec *sp, const forced *f, size_t na) {
    r->tokens = (int64_t)na - 1;
    r->steps = sp->steps;
    r->verify_steps = sp->verify_steps;
    r->drafted = sp->drafted;
    r->accepted = sp->accepted;
    memcpy(r->by_k, sp->by_k, sizeof r->by_k);
    r->digest = f->hash;
}

int k3_replay_pass_run(k3_model *m, const k3_seq *start, const int32_t *prompt, size_t np,
                       const int32_t *answer, size_t na, int spec_max, const double *cost,
                       int digest, k3_replay_pass *r) {
    memset(r, 0, sizeof *r);
    if (na < 2) return k3_seterr("replay: an answer needs at least 2 tokens");
    if (k3_seq_len(start) != (int64_t)np)
        return k3_seterr("replay: the start state holds %lld tokens, the prompt %zu",
                         (long long)k3_seq_len(start), np);
    int V = k3_model_vocab(m);
    k3_seq *s = k3_seq_clone(start);
    k3_spec *sp = k3_spec_new(spec_max, V);
    k3_spec_set_cost(sp, m, cost);
    for (size_t i = 0; i < np; i++) k3_spec_push(sp, prompt[i]);
    k3_spec_push(sp, answer[0]); /* the first token comes from the prefill's logits */
    forced f = {answer, na, 1, digest, 0xcbf29ce484222325ull, sizeof(float) * (size_t)V};
    int32_t id = answer[0];
    int stop = 0, rc = 0;
    double t0 = k3_now(), c0 = cpu_now();
    while (!rc && !stop) {
        int64_t v = sp->verify_steps;
        double ts = k3_now(), cs = cpu_now();
        rc = k3_spec_step(sp, s, id, choose_forced, take_forced, &f, &id, &stop);
        double dt = k3_now() - ts;
        *(sp->verify_steps > v ? &r->verify_s : &r->plain_s) += dt;
        if (sp->verify_steps > v) r->verify_cpu_s += cpu_now() - cs;
    }
    r->s = k3_now() - t0;
    r->cpu_s = cpu_now() - c0;
    record(r, sp, &f, na);
    k3_spec_free(sp);
    k3_seq_free(s);
    return rc;
}

int k3_replay_line_run(k3_model *m, const int32_t *prompt, size_t np, const int32_t *answer,
                       size_t na, int spec_max, const double *cost, int digest,
                       k3_replay_line *out) {
    memset(out, 0, sizeof *out);
    double t0 = k3_now(), c0 = cpu_now();
    k3_seq *start = k3_replay_prefill(m, prompt, np);
    out->prefill_s = k3_now() - t0;
    out->prefill_cpu_s = cpu_now() - c0;
    int rc =
        !start ||
        k3_replay_pass_run(m, start, prompt, np, answer, na, 0, NULL, digest, &out->plain) ||
        k3_replay_pass_run(m, start, prompt, np, answer, na, spec_max, cost, digest, &out->spec);
    if (start) k3_seq_free(start);
    return rc ? -1 : 0;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* One step of 1 + k rows (k = 0: a plain decode step); its seconds. The
 * sequence keeps one token either way. */
static double timed_step(k3_seq *s, int k, const int32_t *row, float *logits, int *rc,
                         double *cpu) {
    double t0 = k3_now(), c0 = cpu_now();
    if (!k)
        *rc = *rc || k3_forward(s, row, 1, logits, 0);
    else
        *rc = *rc || k3_forward_spec(s, row, 1 + k, logits) || k3_seq_spec_commit(s, 1);
    *cpu = cpu_now() - c0;
    return k3_now() - t0;
}

/* Each k's median (rounds values each) over k = 0's. */
static void medians(double *t, int kmax, int rounds, double *out) {
    for (int k = 0; k <= kmax; k++)
        qsort(t + (size_t)k * (size_t)rounds, (size_t)rounds, sizeof *t, cmp_double);
    for (int k = 0; k <= kmax; k++) out[k] = t[(size_t)k * rounds + rounds / 2] / t[rounds / 2];
}

int k3_replay_verify_cost(k3_model *m, const int32_t *prompt, size_t np, int kmax, int rounds,
                          double *cost, double *cpu) {
    if (kmax < 1 || kmax > K3_DRAFT_MAX) return k3_seterr("verify cost: k 1..%d", K3_DRAFT_MAX);
    if (!np) return k3_seterr("verify cost: the prompt is empty (its tokens make the rows)");
    int V = k3_model_vocab(m);
    k3_seq *s = k3_replay_prefill(m, prompt, np);
    if (!s) return -1;
    float *logits = k3_xmalloc(sizeof(float) * (size_t)V * (size_t)(kmax + 1));
    size_t nt = (size_t)(kmax + 1) * (size_t)rounds;
    double *t = k3_xcalloc(2 * nt, sizeof *t), *c = t + nt;
    int32_t row[K3_DRAFT_MAX + 1];
    int rc = 0;
    for (int r = 0; !rc && r < rounds; r++)
        for (int k = 0; k <= kmax; k++) { /* interleaved: drift hits every k alike */
            size_t at = (size_t)k * (size_t)rounds + (size_t)r;
            for (int j = 0; j <= k; j++) row[j] = prompt[(size_t)(r * 7 + k * 3 + j) % np];
            t[at] = timed_step(s, k, row, logits, &rc, &c[at]);
        }
    if (!rc) medians(t, kmax, rounds, cost), medians(c, kmax, rounds, cpu);
    free(t);
    free(logits);
    k3_seq_free(s);
    return rc ? -1 : 0;
}

double k3_replay_routed_bytes(const k3_model *m) {
    k3_model_info in;
    k3_model_get_info(m, &in);
    return (double)in.expert_bytes * in.experts_per_token;
}
