/* cmd_bench.c — `k3 bench`: kernel micro-benchmarks and the memory-bandwidth roofline.
 *
 *   k3 bench --kernels [--threads N] [-p T]   GB/s and GFLOP/s per weight format
 *   k3 bench --bandwidth [--threads N]        streaming-read bandwidth only */
#include "cli/cli.h"

#include "base/err.h"
#include "kernels/cpu.h"
#include "kernels/kbench.h"
#include "kernels/membw.h"

#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BW_BYTES ((size_t)512 << 20) /* ~5x the largest L3 seen on CI machines */

static void bench_usage(FILE *f) {
    fprintf(f, "usage: k3 bench --kernels [--threads N] [-p T] [--quick]\n"
               "       k3 bench --bandwidth [--threads N]\n"
               "\n"
               "  --kernels     matvec (decode) GB/s and matmul (prefill, T tokens, default 64)\n"
               "                GFLOP/s for every weight format, plus memory read bandwidth\n"
               "  --bandwidth   streaming-read bandwidth over a 512 MiB buffer\n"
               "  --threads N   OpenMP threads (default: all cores)\n"
               "  --quick       small matrices (seconds; for tests)\n"
               "  K3_KERNELS=ref runs the scalar reference kernels instead\n");
}

typedef struct {
    int kernels, bandwidth, threads, quick;
    long T;
} bench_args;

static int parse_int(const char *s, const char *opt, long lo, long *out) {
    char *end;
    long v = strtol(s, &end, 10);
    if (!*s || *end || v < lo) {
        fprintf(stderr, "k3 bench: %s expects an integer >= %ld, got '%s'\n", opt, lo, s);
        return -1;
    }
    *out = v;
    return 0;
}

static int parse_args(int argc, char **argv, bench_args *a) {
    memset(a, 0, sizeof *a);
    a->T = 64;
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i];
        long v;
        if (!strcmp(o, "--kernels"))
            a->kernels = 1;
        else if (!strcmp(o, "--bandwidth"))
            a->bandwidth = 1;
        else if (!strcmp(o, "--quick"))
            a->quick = 1;
        else if ((!strcmp(o, "--threads") || !strcmp(o, "-p")) && i + 1 < argc) {
            if (parse_int(argv[++i], o, 1, &v) < 0) return -1;
            if (o[1] == 'p')
                a->T = v;
            else
                a->threads = (int)v;
        } else if (!strcmp(o, "--help") || !strcmp(o, "-h")) {
            bench_usage(stdout);
            exit(0);
        } else {
            fprintf(stderr, "k3 bench: unknown or incomplete option '%s'\n", o);
            bench_usage(stderr);
            return -1;
        }
    }
    if (!a->kernels && !a->bandwidth) {
        bench_usage(stderr);
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
    printf("kernels %s, %d threads, matvec over ~%llu MiB of weights, matmul %lldx%lld x T=%ld\n",
           k3_kernels_name(), omp_get_max_threads(), (unsigned long long)(mv >> 20), (long long)mr,
           (long long)mc, a->T);
    printf("| format | matvec GB/s | matvec GFLOP/s | matmul GFLOP/s |\n|---|---:|---:|---:|\n");
    for (size_t i = 0; i < sizeof fmts / sizeof fmts[0]; i++) {
        k3_kbench_row r;
        if (k3_kbench_format(fmts[i].fmt, fmts[i].bits, fmts[i].group, mv, mr, mc, a->T, reps, &r) <
            0) {
            fprintf(stderr, "k3 bench: %s\n", k3_errmsg());
            return 1;
        }
        printf("| %s | %.2f | %.2f | %.2f |\n", r.name, r.mv_gbs, r.mv_gflops, r.mm_gflops);
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
    printf("memory read bandwidth: %.2f GB/s (%d threads)\n", bw / 1e9, omp_get_max_threads());
    return 0;
}

int cmd_bench(int argc, char **argv) {
    bench_args a;
    if (parse_args(argc, argv, &a) < 0) return 2;
    if (a.threads > 0) omp_set_num_threads(a.threads);
    int rc = 0;
    if (a.kernels) rc = run_kernels(&a);
    if (!rc && (a.bandwidth || a.kernels)) rc = run_bandwidth(&a);
    return rc;
}
