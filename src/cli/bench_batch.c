/* bench_batch.c — `k3 bench --model DIR --batch B`: the engine's batched decode.
 *
 * B sequences each prefill their own P-token prompt, then decode N greedy
 * tokens together: one k3_forward_batch per step with one token of every
 * sequence, so the weights are read once per step for all B. Reported per
 * B in 1, 2, 4, ... up to the given B: aggregate decode tok/s (B * N / time),
 * per-sequence tok/s, and the speed-up over B = 1 (medians of R runs).
 * Also tokens per CPU-second of the process (all threads): on a loaded
 * machine wall-clock rates swing with other users' load, CPU time much
 * less, so the CPU column shows what batching saves per token. */
#include "cli/bench_batch.h"
#include "cli/bench_json.h"

#include "base/err.h"
#include "base/mem.h"
#include "k3.h"

#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double cpu_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int32_t argmax(const float *v, int n) {
    int32_t best = 0;
    for (int i = 1; i < n; i++)
        if (v[i] > v[best]) best = i;
    return best;
}

static int cmp_double(const void *x, const void *y) {
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

/* Seconds of N batched decode steps over B sequences after their prefills. */
static int one_run(k3_model *m, int B, long P, long N, double *secs, double *cpu) {
    int V = k3_model_vocab(m);
    k3_seq **s = k3_xcalloc((size_t)B, sizeof *s);
    float *lg = k3_xmalloc(sizeof(float) * (size_t)V * (size_t)B);
    int32_t *tok = k3_xmalloc(sizeof(int32_t) * (size_t)B);
    int32_t *prompt = k3_xmalloc(sizeof(int32_t) * (size_t)P);
    k3_batch_item *it = k3_xcalloc((size_t)B, sizeof *it);
    int rc = 0;
    for (int b = 0; !rc && b < B; b++) {
        for (long i = 0; i < P; i++)
            prompt[i] = (int32_t)((i * 7919 + 13 + b * 101) % (V > 256 ? V - 256 : V));
        s[b] = k3_seq_new(m);
        rc = k3_forward(s[b], prompt, P, lg + (size_t)b * V, 0);
    }
    double t0 = k3_now(), c0 = cpu_now();
    for (long i = 0; !rc && i < N; i++) {
        for (int b = 0; b < B; b++) {
            tok[b] = argmax(lg + (size_t)b * V, V);
            it[b] = (k3_batch_item){
                .seq = s[b], .tokens = &tok[b], .n = 1, .logits = lg + (size_t)b * V};
        }
        rc = k3_forward_batch(it, B);
    }
    *secs = k3_now() - t0;
    *cpu = cpu_now() - c0;
    for (int b = 0; b < B; b++) k3_seq_free(s[b]);
    free(s);
    free(lg);
    free(tok);
    free(prompt);
    free(it);
    return rc;
}

int k3_bench_batch(const char *dir, int threads, int maxB, int only, long P, long N, long runs,
                   int json) {
    k3_load_opts lo = {.threads = threads};
    k3_model *m = k3_model_load(dir, &lo);
    if (!m) {
        fprintf(stderr, "k3 bench: %s\n", k3_errmsg());
        return 1;
    }
    double base = 0, cbase = 0, *t = k3_xmalloc(sizeof(double) * (size_t)runs);
    double *ct = k3_xmalloc(sizeof(double) * (size_t)runs);
    int rc = 0;
    if (!json)
        printf("batched decode: %s, %d threads, %ld-token prompts, %ld steps, median of %ld\n"
               "| batch | aggregate tok/s | per-sequence tok/s | vs batch 1 | tok per CPU-s | vs "
               "batch 1 "
               "|\n|---:|---:|---:|---:|---:|---:|\n",
               dir, omp_get_max_threads(), P, N, runs);
    double warm, cwarm;
    rc = one_run(m, 1, P, N < 4 ? N : 4, &warm, &cwarm);
    for (int B = only ? maxB : 1; !rc && B <= maxB; B = B * 2 > maxB && B < maxB ? maxB : B * 2) {
        for (long r = 0; !rc && r < runs; r++) rc = one_run(m, B, P, N, &t[r], &ct[r]);
        if (rc) break;
        qsort(t, (size_t)runs, sizeof *t, cmp_double);
        qsort(ct, (size_t)runs, sizeof *ct, cmp_double);
        double med = runs % 2 ? t[runs / 2] : 0.5 * (t[runs / 2 - 1] + t[runs / 2]);
        double cmed = runs % 2 ? ct[runs / 2] : 0.5 * (ct[runs / 2 - 1] + ct[runs / 2]);
        double agg = (double)B * (double)N / med, per = (double)N / med;
        double cpu = (double)B * (double)N / cmed;
        if (!base) base = agg, cbase = cpu; /* B = 1, or B itself with --batch-only */
        if (json)
            k3_bench_json_print(json_pack(
                "{s:o, s:i, s:i, s:I, s:I, s:o, s:o, s:o, s:o, s:o}", "model",
                k3_bench_json_text(dir), "threads", omp_get_max_threads(), "batch", B, "prompt",
                (json_int_t)P, "steps", (json_int_t)N, "aggregate_tps", k3_bench_json_num(agg, 2),
                "per_sequence_tps", k3_bench_json_num(per, 2), "speedup",
                k3_bench_json_num(agg / base, 3), "tokens_per_cpu_s", k3_bench_json_num(cpu, 2),
                "cpu_speedup", k3_bench_json_num(cpu / cbase, 3)));
        else
            printf("| %d | %.1f | %.1f | %.2fx | %.1f | %.2fx |\n", B, agg, per, agg / base, cpu,
                   cpu / cbase);
        fflush(stdout);
    }
    if (rc) fprintf(stderr, "k3 bench: %s\n", k3_errmsg());
    free(t);
    free(ct);
    k3_model_free(m);
    return rc ? 1 : 0;
}
