/* bench_draft.c — `k3 bench --replay FILE.jsonl --draft-only [--cost
 * NAME=c1,...]`: per line, what the drafter keeps when the answer is forced
 * (gen/draft_study.h: the same counts as a speculative replay pass, without
 * the model), how much of the answer any n-gram drafter could draft, and the
 * speedup both would give under measured verify costs (a verify step of k
 * drafts costs c_k plain steps). The drafter chooses how many drafts to send
 * by the verify costs it is given (gen/draft.h), so it runs once with its
 * default table or --spec-cost's (the counts printed) and once per --cost table (the
 * speedup under that table). */
#include "cli/bench_draft.h"

#include "base/mem.h"
#include "gen/draft_study.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The context lengths the bound is printed for. */
static const int MS[] = {1, 2, 3, 4, 6};
#define N_MS ((int)(sizeof MS / sizeof MS[0]))

/* Sums over lines: the drafter's pass, and per cost table the drafter's and
 * the bound's costs for each m. */
typedef struct {
    k3_replay_pass run, runs[K3_STUDY_COSTS]; /* default costs, each table's */
    int64_t deep[K3_STUDY_DEPTH_MAX + 1];     /* answer tokens of depth >= m */
    double drafter[K3_STUDY_COSTS], bound[K3_STUDY_COSTS][N_MS];
    double bound_steps[K3_STUDY_COSTS][N_MS];
} study;

static void print_run(const k3_replay_pass *r) {
    printf("  drafter: %.2f tokens/step, drafts kept/fed %lld/%lld, plain steps %lld, "
           "verify steps by k:",
           r->steps ? (double)r->tokens / (double)r->steps : 0, (long long)r->accepted,
           (long long)r->drafted, (long long)(r->steps - r->verify_steps));
    for (int k = 1; k <= K3_DRAFT_MAX; k++)
        if (r->by_k[k]) printf(" %d:%lld", k, (long long)r->by_k[k]);
    printf("\n");
}

static void print_depth(const int64_t *deep, int64_t tokens) {
    printf("  answer tokens whose m tokens before, then it, occurred earlier:");
    for (int m = 1; m <= K3_STUDY_DEPTH_MAX; m++)
        printf(" m%d %lld (%.0f%%)", m, (long long)deep[m],
               tokens ? 100.0 * (double)deep[m] / (double)tokens : 0);
    printf("\n");
}

static void print_costs(const study *s, const k3_study_cost *costs, int ncost) {
    printf("  projected speedup   drafter (tokens/step) | best n-gram drafter (tokens/step), "
           "context >=");
    for (int i = 0; i < N_MS; i++) printf(" %d", MS[i]);
    printf("\n");
    double t = (double)s->run.tokens;
    for (int c = 0; c < ncost; c++) {
        printf("  %-18s %7.2fx (%.2f) |", costs[c].name, t / s->drafter[c],
               s->runs[c].steps ? t / (double)s->runs[c].steps : 0);
        for (int i = 0; i < N_MS; i++)
            printf(" %5.2fx (%.2f)", t / s->bound[c][i], t / s->bound_steps[c][i]);
        printf("\n");
    }
}

/* One line's study into *s; kmax <= every table's length (checked). */
static void study_line(const k3_replay_text *l, int kmax, const double *spec_cost,
                       const k3_study_cost *costs, int ncost, study *s) {
    memset(s, 0, sizeof *s);
    k3_draft_study_run(l->p, l->np, l->a, l->na, kmax, spec_cost, &s->run);
    uint8_t *depth = k3_xmalloc(l->na);
    k3_draft_study_depth(l->p, l->np, l->a, l->na, depth);
    for (size_t i = 1; i < l->na; i++)
        for (int m = 1; m <= depth[i]; m++) s->deep[m]++;
    for (int c = 0; c < ncost; c++) {
        k3_draft_study_run(l->p, l->np, l->a, l->na, kmax, costs[c].c, &s->runs[c]);
        s->drafter[c] = k3_draft_study_cost(&s->runs[c], costs[c].c);
        for (int i = 0; i < N_MS; i++) {
            k3_replay_pass best;
            s->bound[c][i] = k3_draft_study_oracle(depth, l->na, MS[i], kmax, costs[c].c, &best);
            s->bound_steps[c][i] = (double)best.steps;
        }
    }
    free(depth);
}

static void add(study *t, const study *s) {
    k3_replay_pass *a = &t->run;
    const k3_replay_pass *b = &s->run;
    a->tokens += b->tokens, a->steps += b->steps, a->verify_steps += b->verify_steps;
    a->drafted += b->drafted, a->accepted += b->accepted;
    for (int k = 0; k <= K3_DRAFT_MAX; k++) a->by_k[k] += b->by_k[k];
    for (int m = 0; m <= K3_STUDY_DEPTH_MAX; m++) t->deep[m] += s->deep[m];
    for (int c = 0; c < K3_STUDY_COSTS; c++) {
        t->drafter[c] += s->drafter[c], t->runs[c].steps += s->runs[c].steps;
        for (int i = 0; i < N_MS; i++)
            t->bound[c][i] += s->bound[c][i], t->bound_steps[c][i] += s->bound_steps[c][i];
    }
}

static void print_study(const char *title, const study *s, const k3_study_cost *costs, int ncost) {
    printf("%s\n", title);
    print_run(&s->run);
    print_depth(s->deep, s->run.tokens);
    if (ncost) print_costs(s, costs, ncost);
}

int k3_bench_draft_study(const k3_replay_text *L, int n, int kmax, const double *spec_cost,
                         const k3_study_cost *costs, int ncost) {
    for (int c = 0; c < ncost; c++)
        if (costs[c].n < kmax)
            return fprintf(stderr, "k3 bench: --cost %s gives %d costs, --spec-max %d needs %d\n",
                           costs[c].name, costs[c].n, kmax, kmax),
                   -1;
    study total = {0};
    for (int i = 0; i < n; i++) {
        study s;
        study_line(&L[i], kmax, spec_cost, costs, ncost, &s);
        char title[96];
        snprintf(title, sizeof title, "line %d: %zu answer tokens after a %zu-token prompt", i + 1,
                 L[i].na, L[i].np);
        print_study(title, &s, costs, ncost);
        add(&total, &s);
    }
    if (n > 1) print_study("all lines", &total, costs, ncost);
    printf("(spec-max %d; the first answer token comes from the prefill, so a line of N tokens "
           "decodes N - 1; speedup = tokens over the cost of the steps in plain steps)\n",
           kmax);
    return 0;
}
