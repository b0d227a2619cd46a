/* cmd_bench.c — `k3 bench`: model tokens/s against the memory-bandwidth roofline,
 * and kernel micro-benchmarks.
 *
 *   k3 bench --model DIR [-p 64] [-n 32] [--threads N] [--runs R] [--json] [--act-int8]
 *       prefill and decode tokens/s (median of R runs after a warm-up), peak
 *       RSS, weight bytes read per decoded token, memory read bandwidth
 *       measured in the same run over a working set at least as large as the
 *       bytes per token (roofline_bandwidth), and roofline = decode tok/s /
 *       (bw / bytes). --depth D: the same after a D-token context (filled
 *       once, not timed, on --fill-threads N threads; each run starts from a
 *       copy of it), as llama-bench -d.
 *   k3 bench --kernels [--threads N] [-p T]   GB/s and GFLOP/s per weight format
 *   k3 bench --bandwidth [--threads N]        streaming-read bandwidth only */
#include "cli/cli.h"
#include "cli/bench_batch.h"
#include "cli/bench_json.h"
#include "cli/bench_replay.h"

#include "k3.h"

#include "base/err.h"
#include "base/mem.h"
#include "gen/depth.h"
#include "io/safetensors.h"
#include "kernels/kernels.h"
#include "model/prefetch.h"

#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <limits.h>
#include <string.h>
#include <dirent.h>
#include <sys/resource.h>

#define BW_BYTES ((size_t)512 << 20) /* ~5x the largest L3 seen on CI machines */

static void bench_usage(FILE *f) {
    fprintf(f, "usage: k3 bench --model DIR [-p 64] [-n 32] [--threads N] [--runs 5] [--json]\n"
               "                [--act-int8] [--bw-over auto|buffer|weights] [--batch B]\n"
               "                [--ram-budget SIZE] [--no-prefetch] [--depth D]\n"
               "                [--fill-threads N] [--cache-type f32|bf16]\n"
               "       k3 bench --kernels [--threads N] [-p T] [--quick]\n"
               "       k3 bench --bandwidth [--threads N]\n"
               "       k3 bench --attention N [--threads N]\n"
               "\n"
               "  --model DIR   prefill a P-token prompt, then decode N tokens, R times after a\n"
               "                warm-up; reports medians, peak RSS, bytes read per decoded\n"
               "                token, measured bandwidth and the roofline ratio; bandwidth\n"
               "                over a 512 MiB buffer, or over the mapped weight files when a\n"
               "                token reads more (working set >= bytes per token)\n"
               "  --depth D     prefill and decode after a D-token context (filled once, not\n"
               "                timed; every run starts from a copy of it), as llama-bench -d\n"
               "  --fill-threads N  with --depth: fill the context on N threads (default: as\n"
               "                --threads), then measure on --threads; the filled state does not\n"
               "                depend on N (threaded kernels equal one thread bit for bit)\n"
               "  --cache-type f32|bf16  the MLA latent cache's element (default f32, exact;\n"
               "                bf16 halves the latent bytes each decoded token reads)\n"
               "  --attention N the MLA attention kernel alone: one decode step of K3's 96\n"
               "                heads (rank 512, RoPE 64) over an N-token latent cache\n"
               "  --bw-over auto|buffer|weights\n"
               "                where the roofline bandwidth is measured (default auto: the\n"
               "                buffer up to 512 MiB per token, the weight files above)\n"
               "  --json        one JSON object on stdout instead of text\n"
               "  --replay FILE.jsonl  speculative vs plain decoding on real text, each\n"
               "                line's prompt prefilled once and both passes started from\n"
               "                copies of it (see bench_replay.c: --spec-max K, -n N,\n"
               "                --verify-cost K, --spec-cost c1,..,cK: the verify costs\n"
               "                the drafter weighs, default the model's)\n"
               "  --act-int8    int8 activations in quantized decode (AVX-512 VNNI; lossy,\n"
               "                opt-in; also K3_ACT=int8)\n"
               "  --ram-budget SIZE  keep the dense weights and the most routed-to experts\n"
               "                locked in RAM up to SIZE (e.g. 20G; models larger than RAM)\n"
               "  --no-prefetch don't read the chosen experts ahead (plain mmap faults); the\n"
               "                storage line gives bytes read per decoded token and the\n"
               "                share of chosen expert bytes already in RAM\n"
               "  --batch B     with --model: batched decode of 1, 2, 4, ... B sequences (one\n"
               "                k3_forward_batch per step), aggregate and per-sequence tok/s\n"
               "  --batch-only  with --batch B: only B (profiling one batch size; the ratio\n"
               "                columns are then 1)\n"
               "  --kernels     matvec (decode) GB/s and matmul (prefill, T tokens, default 64)\n"
               "                GFLOP/s for every weight format, plus memory read bandwidth\n"
               "  --bandwidth   streaming-read bandwidth over a 512 MiB buffer\n"
               "  --threads N   OpenMP threads (default: all cores)\n"
               "  --quick       small matrices (seconds; for tests)\n"
               "  K3_KERNELS=ref runs the scalar reference kernels instead\n");
}

typedef struct {
    int kernels, bandwidth, threads, quick, json;
    int bw_over; /* 0 auto, 1 buffer, 2 weight files */
    long T, n, runs, batch;
    long depth;        /* --depth: tokens of context before the timed prompt */
    long fill_threads; /* --fill-threads: threads that fill that context (0: as measured) */
    long attention;    /* --attention: cache length of the attention-kernel benchmark */
    int batch_only;    /* --batch-only: just B, not 1, 2, 4, ... B */
    const char *model;
    int no_prefetch;     /* --no-prefetch: plain mmap faults for the experts */
    uint64_t ram_budget; /* --ram-budget: dense part + hot experts locked in RAM */
    int cache_type;      /* --cache-type: K3_CACHE_F32 or K3_CACHE_BF16 */
} bench_args;

/* Bytes this process caused to be read from storage (/proc/self/io read_bytes; page faults and
 * read-ahead of mapped weights included); 0 where the kernel does not say. */
static uint64_t storage_read_bytes(void) {
    return k3_proc_field("/proc/self/io", "read_bytes:");
}
static uint64_t g_decode_read; /* storage bytes read during the timed decode steps */
/* The timed decode steps' process CPU time (all threads, read-ahead pool included), the
 * kernel's share of it, and major page faults (a page read from storage on access). */
static double g_decode_cpu, g_decode_sys, g_decode_runq;
static uint64_t g_decode_majflt;

/* Seconds all this process's threads waited runnable for a CPU (field 2 of
 * /proc/self/task/<tid>/schedstat, summed); 0 where the kernel does not say. On a shared
 * machine this separates waiting for a core from waiting for storage. */
static double runqueue_wait_s(void) {
    DIR *d = opendir("/proc/self/task");
    struct dirent *e;
    double s = 0;
    while (d && (e = readdir(d))) {
        char path[64];
        unsigned long long run, wait;
        if (e->d_name[0] == '.') continue;
        snprintf(path, sizeof path, "/proc/self/task/%.20s/schedstat", e->d_name);
        FILE *f = fopen(path, "r");
        if (f && fscanf(f, "%llu %llu", &run, &wait) == 2) s += 1e-9 * (double)wait;
        if (f) fclose(f);
    }
    if (d) closedir(d);
    return s;
}

static void usage_now(double *cpu, double *sys, uint64_t *majflt) {
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    *sys = (double)u.ru_stime.tv_sec + 1e-6 * (double)u.ru_stime.tv_usec;
    *cpu = (double)u.ru_utime.tv_sec + 1e-6 * (double)u.ru_utime.tv_usec + *sys;
    *majflt = (uint64_t)u.ru_majflt;
}

/* Thread counts go to omp_set_num_threads (an int); more than this is a typo. */
#define MAX_THREADS 4096

/* An integer lo..hi (hi LONG_MAX: no upper bound) for option opt. */
static int parse_int(const char *s, const char *opt, long lo, long hi, long *out) {
    char *end;
    long v = strtol(s, &end, 10);
    if (!*s || *end || v < lo || v > hi) {
        if (hi < LONG_MAX)
            fprintf(stderr, "k3 bench: %s expects an integer %ld..%ld, got '%s'\n", opt, lo, hi, s);
        else
            fprintf(stderr, "k3 bench: %s expects an integer >= %ld, got '%s'\n", opt, lo, s);
        return -1;
    }
    *out = v;
    return 0;
}

/* Options taking an integer argument, and where they go. */
static long *int_option(bench_args *a, const char *o) {
    static long threads;
    if (!strcmp(o, "-p")) return &a->T;
    if (!strcmp(o, "-n")) return &a->n;
    if (!strcmp(o, "--runs")) return &a->runs;
    if (!strcmp(o, "--batch")) return &a->batch;
    if (!strcmp(o, "--depth")) return &a->depth;
    if (!strcmp(o, "--fill-threads")) return &a->fill_threads;
    if (!strcmp(o, "--attention")) return &a->attention;
    if (!strcmp(o, "--threads")) return &threads;
    return NULL;
}

static int parse_args(int argc, char **argv, bench_args *a) {
    memset(a, 0, sizeof *a);
    a->T = 64;
    a->n = 32;
    a->runs = 5;
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i];
        long *iv = int_option(a, o);
        if (!strcmp(o, "--kernels")) {
            a->kernels = 1;
        } else if (!strcmp(o, "--bandwidth")) {
            a->bandwidth = 1;
        } else if (!strcmp(o, "--quick")) {
            a->quick = 1;
        } else if (!strcmp(o, "--json")) {
            a->json = 1;
        } else if (!strcmp(o, "--batch-only")) {
            a->batch_only = 1;
        } else if (!strcmp(o, "--act-int8")) {
            k3_act_int8_set(1);
        } else if (!strcmp(o, "--no-prefetch")) {
            a->no_prefetch = 1;
        } else if (!strcmp(o, "--ram-budget") && i + 1 < argc) {
            if (k3_prefetch_parse_size(argv[++i], &a->ram_budget)) {
                fprintf(stderr, "k3 bench: --ram-budget expects a size (e.g. 20G), got '%s'\n",
                        argv[i]);
                return -1;
            }
        } else if (!strcmp(o, "--bw-over") && i + 1 < argc) {
            const char *v = argv[++i];
            a->bw_over = !strcmp(v, "auto")      ? 0
                         : !strcmp(v, "buffer")  ? 1
                         : !strcmp(v, "weights") ? 2
                                                 : -1;
            if (a->bw_over < 0) {
                fprintf(stderr, "k3 bench: --bw-over expects auto, buffer or weights, got '%s'\n",
                        v);
                return -1;
            }
        } else if (!strcmp(o, "--model") && i + 1 < argc) {
            a->model = argv[++i];
        } else if (!strcmp(o, "--cache-type") && i + 1 < argc) {
            if (k3_cache_type_parse(argv[++i], &a->cache_type)) {
                fprintf(stderr, "k3 bench: %s\n", k3_errmsg());
                return -1;
            }
        } else if (iv && i + 1 < argc) {
            int threads = !strcmp(o, "--threads") || iv == &a->fill_threads;
            if (parse_int(argv[++i], o, iv == &a->depth ? 0 : 1, threads ? MAX_THREADS : LONG_MAX,
                          iv) < 0)
                return -1;
            if (!strcmp(o, "--threads")) a->threads = (int)*iv;
        } else if (!strcmp(o, "--help") || !strcmp(o, "-h")) {
            bench_usage(stdout);
            exit(0);
        } else {
            fprintf(stderr,
                    "k3 bench: unknown or incomplete option '%s' (k3 bench --help lists the "
                    "options)\n",
                    o);
            return -1;
        }
    }
    if (!a->kernels && !a->bandwidth && !a->model && !a->attention) {
        bench_usage(stderr);
        return -1;
    }
    if (a->fill_threads && (!a->depth || !a->model || a->batch)) {
        fprintf(stderr, "k3 bench: --fill-threads N fills the context of --model DIR --depth D "
                        "(D >= 1, not with --batch)\n");
        return -1;
    }
    return 0;
}

static int run_kernels(const bench_args *a) {
    static const struct {
        k3_wfmt fmt;
        int bits, group;
    } fmts[] = {{K3_W_F32, 0, 0},     {K3_W_F16, 0, 0},     {K3_W_BF16, 0, 0},
                {K3_W_MXFP4, 4, 32},  {K3_W_AFFINE, 8, 64}, {K3_W_AFFINE, 6, 64},
                {K3_W_AFFINE, 5, 64}, {K3_W_AFFINE, 4, 64}, {K3_W_AFFINE, 3, 64},
                {K3_W_AFFINE, 2, 64}, {K3_W_AFFINE, 4, 32}, {K3_W_AFFINE, 4, 128}};
    uint64_t mv = a->quick ? (8u << 20) : (256u << 20);
    int64_t mr = a->quick ? 256 : 2048, mc = a->quick ? 1024 : 4096;
    int reps = a->quick ? 3 : 5;
    if (!a->json) {
        printf(
            "kernels %s, %d threads, matvec over ~%llu MiB of weights, matmul %lldx%lld x T=%ld\n",
            k3_kernels_name(), omp_get_max_threads(), (unsigned long long)(mv >> 20), (long long)mr,
            (long long)mc, a->T);
        printf("| format | matvec GB/s | matvec GB/s per core (CPU time) | matvec GFLOP/s | "
               "matmul GFLOP/s |\n|---|---:|---:|---:|---:|\n");
    }
    for (size_t i = 0; i < sizeof fmts / sizeof fmts[0]; i++) {
        k3_kbench_row r;
        if (k3_kbench_format(fmts[i].fmt, fmts[i].bits, fmts[i].group, mv, mr, mc, a->T, reps, &r) <
            0) {
            fprintf(stderr, "k3 bench: %s\n", k3_errmsg());
            return 1;
        }
        if (a->json)
            k3_bench_json_print(
                json_pack("{s:s, s:i, s:s, s:I, s:I, s:I, s:I, s:o, s:o, s:o, s:o}", "kernels",
                          k3_kernels_name(), "threads", omp_get_max_threads(), "format", r.name,
                          "matvec_bytes", (json_int_t)mv, "matmul_rows", (json_int_t)mr,
                          "matmul_cols", (json_int_t)mc, "matmul_tokens", (json_int_t)a->T,
                          "matvec_gbs", k3_bench_json_num(r.mv_gbs, 2), "matvec_cpu_gbs",
                          k3_bench_json_num(r.mv_cpu_gbs, 2), "matvec_gflops",
                          k3_bench_json_num(r.mv_gflops, 2), "matmul_gflops",
                          k3_bench_json_num(r.mm_gflops, 2)));
        else
            printf("| %s | %.2f | %.2f | %.2f | %.2f |\n", r.name, r.mv_gbs, r.mv_cpu_gbs,
                   r.mv_gflops, r.mm_gflops);
        fflush(stdout);
    }
    return 0;
}

static int run_bandwidth(const bench_args *a) {
    double bw = k3_membw_read(a->quick ? BW_BYTES / 8 : BW_BYTES, 5);
    if (bw <= 0) {
        fprintf(stderr, "k3 bench: %s\n", k3_errmsg());
        return 1;
    }
    if (a->json)
        k3_bench_json_print(json_pack("{s:o, s:i}", "memory_read_bytes_per_s",
                                      k3_bench_json_num(bw, 0), "threads", omp_get_max_threads()));
    else
        printf("memory read bandwidth: %.2f GB/s (%d threads)\n", bw / 1e9, omp_get_max_threads());
    return 0;
}

static int cmp_double(const void *x, const void *y) {
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof(double), cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static int32_t argmax(const float *v, int n) {
    int32_t best = 0;
    for (int i = 1; i < n; i++)
        if (v[i] > v[best]) best = i;
    return best;
}

/* One prefill of P tokens then N greedy decode steps after the context ctx
 * (NULL: none), copied in untimed; seconds of each phase. */
static int one_run(k3_seq *s, const k3_seq *ctx, const int32_t *prompt, long P, long N,
                   float *logits, int V, double *t_prefill, double *t_decode) {
    k3_seq_reset(s);
    if (ctx) k3_seq_clone_copy(s, ctx);
    double t0 = k3_now();
    if (k3_forward(s, prompt, P, logits, 0) < 0) return -1;
    double t1 = k3_now();
    uint64_t io0 = storage_read_bytes(), mf0, mf1;
    double c0, s0, c1, s1, q0 = runqueue_wait_s();
    usage_now(&c0, &s0, &mf0);
    for (long i = 0; i < N; i++) {
        int32_t tok = argmax(logits, V);
        if (k3_forward(s, &tok, 1, logits, 0) < 0) return -1;
    }
    g_decode_read += storage_read_bytes() - io0;
    usage_now(&c1, &s1, &mf1);
    g_decode_cpu += c1 - c0;
    g_decode_sys += s1 - s0;
    g_decode_majflt += mf1 - mf0;
    g_decode_runq += runqueue_wait_s() - q0;
    *t_prefill = t1 - t0;
    *t_decode = k3_now() - t1;
    return 0;
}

typedef struct {
    double load_s, prefill_tps, decode_tps, bw, roofline;
    double prefill_min, prefill_max, decode_min, decode_max; /* tok/s over the timed runs */
    uint64_t peak_rss, active_bytes, weight_bytes;
    uint64_t bw_bytes;                  /* working set of the bandwidth measurement */
    double storage_per_token, hit_rate; /* decode: bytes read from storage, expert hit rate */
    double cpu_per_token, sys_per_token, majflt_per_token, wall_per_token; /* decode, seconds */
    double runq_per_token; /* decode: seconds its threads waited for a core */
    double fill_s;         /* the --depth context's fill, wall seconds */
    int fill_threads;      /* and the threads it ran on */
    k3_prefetch_stats pf;
    int bw_on_weights; /* 1: over the mapped weight files, 0: an anonymous buffer */
} model_result;

/* The roofline's bandwidth over a working set at least as large as what one
 * decoded token reads. Up to BW_BYTES per token an anonymous BW_BYTES buffer
 * (well beyond the last-level cache); above it the model's own weight files,
 * mapped read-only (page cache shared with the loaded model), read whole, so
 * the measurement neither allocates gigabytes that would evict the weights
 * nor runs out of memory, and it reads the same kind of pages decode reads. */
static double roofline_bandwidth(const bench_args *a, uint64_t active, uint64_t *ws, int *mapped) {
    *mapped = 0;
    if (a->bw_over == 1 || (a->bw_over == 0 && active <= BW_BYTES)) {
        *ws = a->quick ? BW_BYTES / 8 : BW_BYTES;
        return k3_membw_read(*ws, 5);
    }
    k3_st *st = k3_st_open_dir(a->model);
    if (!st) return 0;
    k3_span *sp = k3_xcalloc((size_t)st->nfiles, sizeof *sp);
    *ws = 0;
    for (int i = 0; i < st->nfiles; i++) {
        sp[i] = (k3_span){st->files[i].map, st->files[i].map ? st->files[i].size : 0};
        *ws += sp[i].bytes;
    }
    double bw = *ws >= active ? k3_membw_read_spans(sp, st->nfiles, 3) : 0;
    if (*ws < active) k3_seterr("%s: weight files smaller than the bytes per token", a->model);
    free(sp);
    k3_st_free(st);
    *mapped = 1;
    return bw;
}

static void fill_progress(void *ctx, int64_t done, int64_t total, double s) {
    fprintf(stderr, "k3 bench: context %lld/%lld tokens (%.2f s, %d threads)\n", (long long)done,
            (long long)total, s, *(const int *)ctx);
}

/* The --depth context, on --fill-threads (default: the measurement's threads). */
static k3_seq *fill_context(const bench_args *a, k3_model *m, model_result *r) {
    r->fill_threads = a->fill_threads ? (int)a->fill_threads : omp_get_max_threads();
    double t0 = k3_now();
    k3_seq *c = k3_depth_fill(m, a->depth, r->fill_threads, fill_progress, &r->fill_threads);
    r->fill_s = k3_now() - t0;
    return c;
}

static int measure_model(const bench_args *a, model_result *r) {
    k3_load_opts lo = {0};
    lo.threads = a->threads;
    lo.cache_type = a->cache_type;
    double t0 = k3_now();
    k3_model *m = k3_model_load(a->model, &lo);
    if (!m) return -1;
    r->load_s = k3_now() - t0;
    int V = k3_model_vocab(m);
    k3_seq *s = k3_seq_new(m);
    float *logits = k3_xmalloc(sizeof(float) * (size_t)V);
    int32_t *prompt = k3_xmalloc(sizeof(int32_t) * (size_t)a->T);
    for (long i = 0; i < a->T; i++)
        prompt[i] = (int32_t)((i * 7919 + 13) % (V > 256 ? V - 256 : V));
    k3_seq *ctx = a->depth ? fill_context(a, m, r) : NULL;
    double *tp = k3_xmalloc(sizeof(double) * (size_t)a->runs);
    double *td = k3_xmalloc(sizeof(double) * (size_t)a->runs);
    int rc = a->depth && !ctx
                 ? -1 /* warm-up: */
                 : one_run(s, ctx, prompt, a->T, a->n < 4 ? a->n : 4, logits, V, &tp[0], &td[0]);
    k3_prefetch_reset_stats();
    /* The hit count asks mincore about every selected expert (9 system calls each, ~450
     * per decoded token on the bench preset, 3-5% of its 1-thread decode): it has a run
     * of its own, not timed, so no timed run pays for it (with 1 or 2 runs every run
     * used to count). */
    k3_prefetch_count_hits(1);
    if (rc == 0) rc = one_run(s, ctx, prompt, a->T, a->n, logits, V, &tp[0], &td[0]);
    k3_prefetch_count_hits(0);
    g_decode_read = g_decode_majflt = 0;
    g_decode_cpu = g_decode_sys = g_decode_runq = 0;
    double wall = 0;
    for (long i = 0; rc == 0 && i < a->runs; i++)
        rc = one_run(s, ctx, prompt, a->T, a->n, logits, V, &tp[i], &td[i]), wall += td[i];
    if (rc == 0) {
        const double ntok = (double)(a->n * a->runs);
        r->pf = k3_prefetch_get_stats();
        r->storage_per_token = (double)g_decode_read / ntok;
        r->cpu_per_token = g_decode_cpu / ntok;
        r->sys_per_token = g_decode_sys / ntok;
        r->majflt_per_token = (double)g_decode_majflt / ntok;
        r->wall_per_token = wall / ntok;
        r->runq_per_token = g_decode_runq / ntok;
        r->hit_rate =
            r->pf.need_bytes ? (double)r->pf.resident_bytes / (double)r->pf.need_bytes : 1;
        r->prefill_tps = (double)a->T / median(tp, (int)a->runs);
        r->decode_tps = (double)a->n / median(td, (int)a->runs);
        r->prefill_min = r->decode_min = INFINITY, r->prefill_max = r->decode_max = 0;
        for (long i = 0; i < a->runs; i++) {
            r->prefill_min = fmin(r->prefill_min, (double)a->T / tp[i]);
            r->prefill_max = fmax(r->prefill_max, (double)a->T / tp[i]);
            r->decode_min = fmin(r->decode_min, (double)a->n / td[i]);
            r->decode_max = fmax(r->decode_max, (double)a->n / td[i]);
        }
        r->peak_rss = k3_peak_rss(); /* before the bandwidth buffer inflates it */
        r->active_bytes = k3_model_active_bytes(m);
        r->weight_bytes = k3_model_weight_bytes(m);
    }
    free(tp);
    free(td);
    free(prompt);
    free(logits);
    k3_seq_free(s);
    if (ctx) k3_seq_free(ctx);
    k3_model_free(m);
    if (rc) return -1;
    r->bw = roofline_bandwidth(a, r->active_bytes, &r->bw_bytes, &r->bw_on_weights);
    if (r->bw <= 0) return -1;
    r->roofline = r->decode_tps / (r->bw / (double)r->active_bytes);
    return 0;
}

/* The activation mode decode products use: "int8" only where the CPU runs the kernel. */
static const char *activation_mode(int verbose) {
    int on = k3_act_int8(), have = k3_kernels_active() == K3_KERNELS_AVX512 &&
                                   k3_cpu_has_avx512_vnni() && k3_cpu_has_avx512_vbmi();
    if (on && have) return verbose ? "int8 (opt-in, lossy)" : "int8";
    if (on) return verbose ? "f32 (int8 asked for, needs AVX-512 VNNI+VBMI kernels)" : "f32";
    return verbose ? "f32 (exact)" : "f32";
}

/* The --model measurement as one JSON line (cli/bench_json.h). */
static void print_model_json(const bench_args *a, const model_result *r) {
    json_t *o = json_pack(
        "{s:o, s:i, s:s, s:s, s:I, s:i, s:o, s:I, s:I, s:I, s:o, s:o, s:o, s:o, s:o, s:o, s:o}",
        "model", k3_bench_json_text(a->model), "threads", omp_get_max_threads(), "kernels",
        k3_kernels_name(), "cache_type", a->cache_type ? "bf16" : "f32", "depth",
        (json_int_t)a->depth, "fill_threads", r->fill_threads, "fill_s",
        k3_bench_json_num(r->fill_s, 3), "prompt", (json_int_t)a->T, "decode", (json_int_t)a->n,
        "runs", (json_int_t)a->runs, "load_s", k3_bench_json_num(r->load_s, 3), "prefill_tps",
        k3_bench_json_num(r->prefill_tps, 2), "decode_tps", k3_bench_json_num(r->decode_tps, 2),
        "prefill_tps_min", k3_bench_json_num(r->prefill_min, 2), "prefill_tps_max",
        k3_bench_json_num(r->prefill_max, 2), "decode_tps_min", k3_bench_json_num(r->decode_min, 2),
        "decode_tps_max", k3_bench_json_num(r->decode_max, 2));
    /* the rest one by one: shorter to read than one long format */
    json_object_set_new(o, "peak_rss_bytes", json_integer((json_int_t)r->peak_rss));
    json_object_set_new(o, "weight_bytes", json_integer((json_int_t)r->weight_bytes));
    json_object_set_new(o, "active_bytes_per_token", json_integer((json_int_t)r->active_bytes));
    json_object_set_new(o, "bandwidth_bytes_per_s", k3_bench_json_num(r->bw, 0));
    json_object_set_new(o, "bandwidth_working_set_bytes", json_integer((json_int_t)r->bw_bytes));
    json_object_set_new(o, "bandwidth_over",
                        json_string(r->bw_on_weights ? "weight files" : "buffer"));
    json_object_set_new(o, "roofline", k3_bench_json_real(r->roofline));
    json_object_set_new(o, "activations", json_string(activation_mode(0)));
    json_object_set_new(o, "storage_bytes_per_token", k3_bench_json_num(r->storage_per_token, 0));
    json_object_set_new(o, "expert_hit_rate", k3_bench_json_num(r->hit_rate, 4));
    json_object_set_new(o, "decode_wall_s_per_token", k3_bench_json_real(r->wall_per_token));
    json_object_set_new(o, "decode_cpu_s_per_token", k3_bench_json_real(r->cpu_per_token));
    json_object_set_new(o, "decode_sys_s_per_token", k3_bench_json_real(r->sys_per_token));
    json_object_set_new(o, "decode_majflt_per_token", k3_bench_json_num(r->majflt_per_token, 1));
    json_object_set_new(o, "decode_runqueue_wait_s_per_token",
                        k3_bench_json_real(r->runq_per_token));
    json_object_set_new(o, "prefetch_pool_cpu_s", k3_bench_json_real(r->pf.pool_cpu_ns / 1e9));
    json_object_set_new(o, "readahead", json_string(k3_readahead_name(r->pf.readahead)));
    k3_bench_json_print(o);
}

static int run_model(const bench_args *a) {
    model_result r = {0};
    if (measure_model(a, &r) < 0) {
        fprintf(stderr, "k3 bench: %s\n", k3_errmsg());
        return 1;
    }
    int th = omp_get_max_threads();
    if (a->json) {
        print_model_json(a, &r);
        return 0;
    }
    printf("model            %s (%s kernels, %d threads)\n", a->model, k3_kernels_name(), th);
    printf("activations      %s\n", activation_mode(1));
    printf("load             %.3f s\n", r.load_s);
    if (a->depth)
        printf("depth            %ld tokens of context before the prompt (filled on %d threads in "
               "%.2f s, not timed)\n",
               a->depth, r.fill_threads, r.fill_s);
    printf("latent cache     %s\n", a->cache_type ? "bf16" : "f32");
    printf("prefill          %.1f tokens/s (%ld-token prompt, median of %ld)\n", r.prefill_tps,
           a->T, a->runs);
    printf("decode           %.1f tokens/s (%ld tokens, median of %ld)\n", r.decode_tps, a->n,
           a->runs);
    printf("peak memory      %.1f MiB\n", (double)r.peak_rss / (1 << 20));
    printf("weights          %.1f MiB mapped, %.1f MiB read per decoded token\n",
           (double)r.weight_bytes / (1 << 20), (double)r.active_bytes / (1 << 20));
    printf("bandwidth        %.2f GB/s (streaming read over %.1f MiB of %s, same threads)\n",
           r.bw / 1e9, (double)r.bw_bytes / (1 << 20),
           r.bw_on_weights ? "the mapped weight files" : "an anonymous buffer");
    printf("roofline         %.1f tokens/s; decode reaches %.2f of it\n",
           r.bw / (double)r.active_bytes, r.roofline);
    printf("storage          %.2f MiB read from storage per decoded token; routed experts "
           "resident when chosen: %.3f of their bytes (read-ahead: %s; RAM budget %.2f GiB: dense "
           "%.1f MiB + experts %.1f MiB locked)\n",
           r.storage_per_token / (1 << 20), r.hit_rate, k3_readahead_name(r.pf.readahead),
           (double)a->ram_budget / (1 << 30), (double)r.pf.dense_locked / (1 << 20),
           (double)r.pf.experts_locked / (1 << 20));
    printf("decode time      per token: %.1f ms wall, %.1f ms CPU (all threads; %.1f ms in the "
           "kernel), %.1f ms waiting for a core (all threads), %.1f major page faults; "
           "read-ahead pool %.3f s CPU in all\n",
           1e3 * r.wall_per_token, 1e3 * r.cpu_per_token, 1e3 * r.sys_per_token,
           1e3 * r.runq_per_token, r.majflt_per_token, r.pf.pool_cpu_ns / 1e9);
    return 0;
}

/* The MLA attention kernel alone at K3's width (kernels/mla_tile.h). */
static int run_attention(const bench_args *a) {
    k3_mla_tile_bench_result r;
    if (k3_mla_tile_bench(96, 512, 64, a->attention, 1, a->quick ? 2 : 5, &r) < 0) {
        fprintf(stderr, "k3 bench: %s\n", k3_errmsg());
        return 1;
    }
    if (a->json) {
        k3_bench_json_print(
            json_pack("{s:s, s:i, s:i, s:i, s:I, s:o, s:o, s:o, s:o, s:o}", "kernels",
                      k3_kernels_name(), "threads", omp_get_max_threads(), "attention_heads", 96,
                      "attention_rank", 512, "attention_cache_tokens", (json_int_t)a->attention,
                      "attention_ms", k3_bench_json_num(1e3 * r.seconds, 3), "attention_gflops",
                      k3_bench_json_num(r.gflops, 2), "attention_cache_gbs",
                      k3_bench_json_num(r.cache_gbs, 2), "attention_cpu_ms",
                      k3_bench_json_num(1e3 * r.cpu_seconds, 3), "attention_gflops_per_cpu_s",
                      k3_bench_json_num(r.gflops_cpu, 2)));
        return 0;
    }
    printf("attention        %s kernels, %d threads: 96 heads x 1 query over %ld cached tokens "
           "(rank 512 + RoPE 64): %.2f ms, %.1f GFLOP/s, cache read at %.1f GB/s; CPU time "
           "%.2f ms, %.1f GFLOP/s per CPU second\n",
           k3_kernels_name(), omp_get_max_threads(), a->attention, 1e3 * r.seconds, r.gflops,
           r.cache_gbs, 1e3 * r.cpu_seconds, r.gflops_cpu);
    return 0;
}

int cmd_bench(int argc, char **argv) {
    if (k3_bench_is_replay(argc, argv)) return k3_bench_replay(argc, argv);
    bench_args a;
    if (parse_args(argc, argv, &a) < 0) return 2;
    if (a.threads > 0) omp_set_num_threads(a.threads);
    if (a.no_prefetch || a.ram_budget) k3_prefetch_set(!a.no_prefetch, a.ram_budget);
    int rc = 0;
    if (a.model && a.batch > 0)
        return k3_bench_batch(a.model, a.threads, (int)a.batch, a.batch_only, a.T, a.n, a.runs,
                              a.json);
    if (a.model) rc = run_model(&a);
    if (!rc && a.attention) rc = run_attention(&a);
    if (!rc && a.kernels) rc = run_kernels(&a);
    if (!rc && (a.bandwidth || a.kernels)) rc = run_bandwidth(&a);
    return rc;
}
