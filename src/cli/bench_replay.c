/* bench_replay.c — `k3 bench --replay FILE.jsonl`: speculative against plain
 * decoding on real text (gen/replay.h), and `--verify-cost K`: the time of a
 * verify pass of 1 + k rows over a plain step.
 *
 *   k3 bench --model DIR --replay FILE.jsonl [--spec-max K] [-n N] [--threads N] [--json]
 *   k3 bench --model DIR --verify-cost K [--replay FILE.jsonl] [--rounds R] [--json]
 *   k3 bench --model DIR --replay FILE.jsonl --draft-only [--spec-max K] [-n N]
 *            [--cost NAME=c1,...,cK]...   (bench_draft.c; only the tokenizer is loaded)
 *
 * Each line of FILE is {"prompt": "...", "answer": "..."}, tokenized without
 * a chat template. -n N replays only the first N tokens of each answer. The
 * prompt is prefilled once per line; both passes start from copies of that
 * state (gen/replay.h), and its time is reported apart. */
#include "cli/bench_replay.h"

#include "base/err.h"
#include "base/mem.h"
#include "cli/bench_draft.h"
#include "cli/bench_json.h"
#include "gen/replay.h"
#include "gen/spec.h"
#include "gen/replay_file.h"
#include "k3.h"
#include "text/tokenizer.h"

#include <jansson.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const char *model, *file;
    long spec_max, n, threads, verify_k, rounds;
    int json, draft_only, ncost, has_spec_cost;
    k3_study_cost cost[K3_STUDY_COSTS];
    double spec_cost[K3_DRAFT_MAX + 1]; /* --spec-cost: the drafter's verify costs (else the
                                           model's), as generate and serve take them */
} replay_args;

typedef k3_replay_text replay_line;

int k3_bench_is_replay(int argc, char **argv) {
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--replay") || !strcmp(argv[i], "--verify-cost")) return 1;
    return 0;
}

static int want_long(const char *opt, const char *v, long lo, long hi, long *out) {
    char *end;
    long x = v ? strtol(v, &end, 10) : 0;
    if (!v || !*v || *end || x < lo || x > hi) {
        fprintf(stderr, "k3 bench: %s expects an integer %ld..%ld, got '%s'\n", opt, lo, hi,
                v ? v : "");
        return -1;
    }
    *out = x;
    return 0;
}

/* One --cost NAME=c1,... table (gen/draft_study.h). */
static int add_cost(replay_args *a, const char *v) {
    if (a->ncost == K3_STUDY_COSTS)
        return fprintf(stderr, "k3 bench: at most %d --cost tables\n", K3_STUDY_COSTS), -1;
    if (k3_study_cost_parse(v, &a->cost[a->ncost]))
        return fprintf(stderr, "k3 bench: %s\n", k3_errmsg()), -1;
    a->ncost++;
    return 0;
}

/* --spec-cost c1,c2,...,cn: the cost table the drafter weighs; by generate's
 * and serve's rule (gen/spec_cost.h) it never sends more than n drafts. */
static int spec_cost_parse(const char *v, replay_args *a) {
    int rc = k3_spec_cost_parse(v, a->spec_cost);
    a->has_spec_cost = !rc;
    if (rc) fprintf(stderr, "k3 bench: %s\n", k3_errmsg());
    return rc ? -1 : 0;
}

static int parse(int argc, char **argv, replay_args *a) {
    *a = (replay_args){.spec_max = 8, .rounds = 9};
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int rc = 0, val = 1;
        if (!strcmp(o, "--model") && v)
            a->model = v;
        else if (!strcmp(o, "--replay") && v)
            a->file = v;
        else if (!strcmp(o, "--spec-max"))
            rc = want_long(o, v, 1, 16, &a->spec_max);
        else if (!strcmp(o, "-n"))
            rc = want_long(o, v, 2, 1L << 30, &a->n);
        else if (!strcmp(o, "--threads"))
            rc = want_long(o, v, 1, 4096, &a->threads);
        else if (!strcmp(o, "--verify-cost"))
            rc = want_long(o, v, 1, 16, &a->verify_k);
        else if (!strcmp(o, "--rounds"))
            rc = want_long(o, v, 1, 1000, &a->rounds);
        else if (!strcmp(o, "--json"))
            a->json = 1, val = 0;
        else if (!strcmp(o, "--draft-only"))
            a->draft_only = 1, val = 0;
        else if (!strcmp(o, "--spec-cost") && v)
            rc = spec_cost_parse(v, a);
        else if (!strcmp(o, "--cost") && v)
            rc = add_cost(a, v);
        else {
            fprintf(stderr, "k3 bench: unknown or incomplete option '%s' with --replay\n", o);
            return -1;
        }
        if (rc) return -1;
        i += val;
    }
    if (!a->model) return fprintf(stderr, "k3 bench: --replay needs --model DIR\n"), -1;
    if (!a->file && !a->verify_k)
        return fprintf(stderr, "k3 bench: --replay needs a FILE.jsonl\n"), -1;
    if (a->draft_only && (!a->file || a->verify_k || a->json))
        return fprintf(stderr, "k3 bench: --draft-only takes --replay FILE, without "
                               "--verify-cost or --json\n"),
               -1;
    return 0;
}

/* Every line of a.file, tokenized (gen/replay_file.h); *n lines. NULL +
 * k3_errmsg naming the file and line on error. */
static replay_line *load_lines(const replay_args *a, const k3_tokenizer *tok, int *n) {
    k3_replay_doc d;
    *n = 0;
    if (k3_replay_read(a->file, &d)) return NULL;
    replay_line *L = k3_replay_tokenize(&d, tok, (size_t)a->n);
    if (L) *n = d.n;
    k3_replay_doc_free(&d);
    return L;
}

static double tps(const k3_replay_pass *r) {
    return r->s > 0 ? (double)r->tokens / r->s : 0;
}

/* Tokens per second of process CPU time. */
static double cpu_tps(const k3_replay_pass *r) {
    return r->cpu_s > 0 ? (double)r->tokens / r->cpu_s : 0;
}

/* Mean verify step over mean plain-pass step. */
static double verify_cost(const k3_replay_pass *plain, const k3_replay_pass *spec) {
    if (!spec->verify_steps || !plain->steps) return 0;
    return (spec->verify_s / (double)spec->verify_steps) / (plain->s / (double)plain->steps);
}

static void add(k3_replay_pass *t, const k3_replay_pass *r) {
    t->s += r->s, t->tokens += r->tokens, t->steps += r->steps;
    t->verify_steps += r->verify_steps, t->drafted += r->drafted, t->accepted += r->accepted;
    t->verify_s += r->verify_s, t->plain_s += r->plain_s;
    t->cpu_s += r->cpu_s, t->verify_cpu_s += r->verify_cpu_s;
    for (int k = 0; k < 17; k++) t->by_k[k] += r->by_k[k];
}

/* The verify cost by CPU time. */
static double verify_cost_cpu(const k3_replay_pass *plain, const k3_replay_pass *spec) {
    if (!spec->verify_steps || !plain->steps || plain->cpu_s <= 0) return 0;
    return (spec->verify_cpu_s / (double)spec->verify_steps) /
           (plain->cpu_s / (double)plain->steps);
}

static void print_row(const char *name, const k3_replay_pass *p, const k3_replay_pass *s) {
    printf("%-8s %7lld %9.2f %9.2f %7.2fx %9.2f %9.2f %8.2f   %7.2fx %8.2f\n", name,
           (long long)p->tokens, tps(p), tps(s), tps(p) > 0 ? tps(s) / tps(p) : 0,
           s->steps ? (double)s->tokens / s->steps : 0,
           s->verify_steps ? (double)s->accepted / s->verify_steps : 0, verify_cost(p, s),
           cpu_tps(p) > 0 ? cpu_tps(s) / cpu_tps(p) : 0, verify_cost_cpu(p, s));
}

static int run_replay(const replay_args *a, k3_model *m, replay_line *L, int n) {
    k3_replay_pass tp = {0}, ts = {0};
    double pre_s = 0, pre_cpu = 0;
    if (!a->json)
        printf("line      tokens  plain t/s  spec t/s  speedup  tok/step  acc/verify  verify   "
               "by CPU time: speedup verify\n");
    for (int i = 0; i < n; i++) {
        k3_replay_line r;
        if (k3_replay_line_run(m, L[i].p, L[i].np, L[i].a, L[i].na, (int)a->spec_max,
                               a->has_spec_cost ? a->spec_cost : NULL, 0, &r))
            return -1;
        add(&tp, &r.plain), add(&ts, &r.spec);
        pre_s += r.prefill_s, pre_cpu += r.prefill_cpu_s;
        char name[16];
        snprintf(name, sizeof name, "%d", i + 1);
        if (!a->json) print_row(name, &r.plain, &r.spec);
    }
    if (!a->json) {
        print_row("total", &tp, &ts);
        printf("verify steps by drafts:");
        for (int k = 1; k < 17; k++)
            if (ts.by_k[k]) printf(" %d:%lld", k, (long long)ts.by_k[k]);
        printf("; plain steps in the speculative pass: %lld\n",
               (long long)(ts.steps - ts.verify_steps));
        printf("prompts: prefilled once per line (both passes start from copies of that state), "
               "%.2f s wall, %.2f s CPU in all\n",
               pre_s, pre_cpu);
        printf("(spec-max %ld, %d threads; verify = a verify step's time over a plain step's)\n",
               a->spec_max, omp_get_max_threads());
        return 0;
    }
    double speedup = tps(&tp) > 0 ? tps(&ts) / tps(&tp) : 0;
    double acc = ts.verify_steps ? (double)ts.accepted / ts.verify_steps : 0;
    double per_step = ts.steps ? (double)ts.tokens / ts.steps : 0;
    json_t *o = json_pack(
        "{s:o, s:o, s:i, s:I, s:I, s:o, s:o, s:o, s:o, s:o, s:I, s:I, s:I, s:o, s:o, s:o, s:o, "
        "s:o, s:o}",
        "model", k3_bench_json_text(a->model), "replay", k3_bench_json_text(a->file), "threads",
        omp_get_max_threads(), "spec_max", (json_int_t)a->spec_max, "tokens", (json_int_t)tp.tokens,
        "replay_plain_tps", k3_bench_json_num(tps(&tp), 3), "replay_spec_tps",
        k3_bench_json_num(tps(&ts), 3), "speedup", k3_bench_json_num(speedup, 4),
        "accepted_per_step", k3_bench_json_num(acc, 4), "tokens_per_step",
        k3_bench_json_num(per_step, 4), "drafted", (json_int_t)ts.drafted, "accepted",
        (json_int_t)ts.accepted, "verify_steps", (json_int_t)ts.verify_steps, "verify_cost",
        k3_bench_json_num(verify_cost(&tp, &ts), 4), "replay_plain_cpu_tps",
        k3_bench_json_num(cpu_tps(&tp), 3), "replay_spec_cpu_tps",
        k3_bench_json_num(cpu_tps(&ts), 3), "verify_cost_cpu",
        k3_bench_json_num(verify_cost_cpu(&tp, &ts), 4), "prefill_s", k3_bench_json_num(pre_s, 3),
        "prefill_cpu_s", k3_bench_json_num(pre_cpu, 3));
    k3_bench_json_print(o);
    return 0;
}

/* The verify-cost sweep after a prompt (the first line's, or 64 ids). */
static int run_cost(const replay_args *a, k3_model *m, replay_line *L) {
    int32_t ids[64];
    for (int i = 0; i < 64; i++) ids[i] = (int32_t)((i * 977 + 13) % k3_model_vocab(m));
    const int32_t *p = L ? L[0].p : ids;
    size_t np = L ? L[0].np : 64;
    double cost[17], cpu[17];
    if (k3_replay_verify_cost(m, p, np, (int)a->verify_k, (int)a->rounds, cost, cpu)) return -1;
    double b1 = k3_spec_step_bytes(m, 1);
    if (!a->json)
        printf("k   verify/plain (wall)  (CPU)  expert-union bytes/plain (uniform routing)\n");
    for (int k = 1; k <= a->verify_k; k++) {
        double b = k3_spec_step_bytes(m, k + 1) / b1;
        if (a->json)
            k3_bench_json_print(json_pack(
                "{s:o, s:i, s:i, s:o, s:o, s:o, s:o}", "model", k3_bench_json_text(a->model),
                "threads", omp_get_max_threads(), "k", k, "verify_cost",
                k3_bench_json_num(cost[k], 4), "verify_cost_cpu", k3_bench_json_num(cpu[k], 4),
                "bytes_ratio", k3_bench_json_num(b, 4), "plain_bytes", k3_bench_json_num(b1, 0)));
        else
            printf("%-3d %12.3f %12.3f %12.3f\n", k, cost[k], cpu[k], b);
    }
    if (!a->json)
        printf("(one plain step reads %.1f MiB; median of %ld interleaved rounds)\n",
               b1 / (1 << 20), a->rounds);
    return 0;
}

/* --draft-only: the tokenizer, the lines and the study; no weights. */
static int draft_only(const replay_args *a) {
    k3_tokenizer *tok = k3_tok_for_model(a->model);
    int n = 0;
    replay_line *L = tok ? load_lines(a, tok, &n) : NULL;
    int rc = !L || k3_bench_draft_study(L, n, (int)a->spec_max,
                                        a->has_spec_cost ? a->spec_cost : NULL, a->cost, a->ncost);
    if (!L) fprintf(stderr, "k3 bench: %s\n", k3_errmsg());
    k3_replay_texts_free(L, n);
    k3_tok_free(tok);
    return rc;
}

int k3_bench_replay(int argc, char **argv) {
    replay_args a;
    if (parse(argc, argv, &a)) return 2;
    if (a.draft_only) return draft_only(&a);
    if (a.threads) omp_set_num_threads((int)a.threads);
    k3_load_opts lo = {.threads = (int)a.threads, .tp_size = 1, .pp_size = 1};
    k3_model *m = k3_model_load(a.model, &lo);
    k3_tokenizer *tok = m && a.file ? k3_tok_for_model(a.model) : NULL;
    int n = 0, rc = !m || (a.file && !tok);
    replay_line *L = rc || !a.file ? NULL : load_lines(&a, tok, &n);
    if (!rc && a.file && !L) rc = 1;
    if (!rc && a.file && !a.verify_k) rc = run_replay(&a, m, L, n) != 0;
    if (!rc && a.verify_k) rc = run_cost(&a, m, L) != 0;
    if (rc) fprintf(stderr, "k3 bench: %s\n", k3_errmsg());
    k3_replay_texts_free(L, n);
    k3_tok_free(tok);
    k3_model_free(m);
    return rc;
}
