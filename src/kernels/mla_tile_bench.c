/* mla_tile_bench.c — the tiled MLA attention alone, for `k3 bench --attention`:
 * one step of nh heads x nt queries over an n-token latent cache of random
 * values (K3's absorbed path: K = V = latents of width r, plus shared RoPE
 * keys), timed over a few calls after a warm-up, with the current threads.
 * Reports the best call, by wall and by CPU time (on a loaded machine the
 * CPU time of one thread is the figure to trust): FLOP/s of its multiply-adds and the cache bytes
 * it read per second (each cached row is read once per call when the rows fit one chunk, so bytes/s
 * against the machine's read bandwidth says whether the kernel is bound by reading the latents). */
#include "kernels/mla_tile.h"

#include "base/err.h"
#include "base/mem.h"

#include <math.h>
#include <stdlib.h>
#include <time.h>

static double cpu_now(void) { /* CPU seconds of every thread of the process */
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static float *rand_floats(int64_t n, uint32_t seed) {
    float *p = k3_big_calloc(sizeof(float) * (size_t)n);
    if (!p) return NULL;
    for (int64_t i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        p[i] = (float)(seed >> 8) / 16777216.0f - 0.5f;
    }
    return p;
}

int k3_mla_tile_bench(int nh, int r, int rope, int64_t n, int64_t nt, int reps,
                      k3_mla_tile_bench_result *out) {
    float *lat = rand_floats(n * r, 1), *kpe = rand_floats(n * (rope ? rope : 1), 2);
    float *q = rand_floats((int64_t)nh * nt * r, 3),
          *qp = rand_floats((int64_t)nh * nt * rope + 1, 4);
    float *o = k3_big_calloc(sizeof(float) * (size_t)(nh * nt * r));
    k3_mla_tile_args a = {.K = lat,
                          .V = lat,
                          .P = kpe,
                          .ldk = r,
                          .ldv = r,
                          .ldp = rope,
                          .n = n,
                          .dk = r,
                          .dv = r,
                          .dp = rope,
                          .q = q,
                          .qp = qp,
                          .out = o,
                          .nh = nh,
                          .nt = nt,
                          .q_h = nt * r,
                          .q_t = r,
                          .qp_h = rope,
                          .qp_t = (int64_t)nh * rope,
                          .o_h = nt * r,
                          .o_t = r,
                          .off = n - nt};
    a.scale = 1.0f / sqrtf((float)(r + rope));
    size_t ns = k3_mla_tile_scratch(&a);
    float *scratch = k3_big_calloc(sizeof(float) * ns);
    int rc = 0;
    if (!lat || !kpe || !q || !qp || !o || !scratch) {
        rc = k3_seterr("out of memory for a %lld-token attention benchmark", (long long)n);
    } else {
        double best = INFINITY, best_cpu = INFINITY;
        k3_mla_tile(&a, scratch, 0); /* warm-up */
        for (int i = 0; i < reps; i++) {
            double t0 = k3_now(), c0 = cpu_now();
            k3_mla_tile(&a, scratch, 0);
            double t = k3_now() - t0, c = cpu_now() - c0;
            best = t < best ? t : best;
            best_cpu = c < best_cpu ? c : best_cpu;
        }
        double rows = (double)nh * (double)nt * (double)n; /* causal chunk: about n per row */
        out->seconds = best;
        out->cpu_seconds = best_cpu;
        out->gflops_cpu = rows * 2.0 * (2.0 * r + rope) / best_cpu / 1e9;
        out->gflops = rows * 2.0 * (2.0 * r + rope) / best / 1e9;
        out->cache_gbs = (double)n * (double)(r + rope) * 4.0 / best / 1e9;
    }
    k3_big_free(lat);
    k3_big_free(kpe);
    k3_big_free(q);
    k3_big_free(qp);
    k3_big_free(o);
    k3_big_free(scratch);
    return rc;
}
