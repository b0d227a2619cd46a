/* mla_tile.h — tiled MLA attention: every query row of a step against each
 * block of cached tokens in one pass (flash-attention style online softmax).
 *
 * The rows are nh heads x nt queries. Query t attends cached rows
 * [0, off + t + 1) (causal; decode is nt = 1, off = n - 1). A row's score
 * against cached row j is scale * (q . K[j] + qp . P[j]) and its output
 * sum_j softmax_j V[j]. The absorbed MLA path passes the latent cache as
 * both K and V (dk = dv = kv_lora_rank), the expanded path one head's keys
 * and values.
 *
 * The cache is cut into splits of K3_TILE_SPLIT tokens, the same in every
 * call; a split is walked in blocks of K3_TILE_TOK tokens, and each block is
 * scored against every row of a chunk of rows while it sits in cache, so a
 * step reads the cache once per row chunk, not once per row. The rows'
 * queries are transposed once per call, so that a group of rows fills the
 * lanes of a vector and each cached value is broadcast against it (a small
 * matrix product per block, no horizontal sums). Splits and row chunks are
 * the tasks the threads share (flash-decoding); each split leaves a partial
 * (max, sum, weighted sum) per row and a row's splits (those below its causal
 * length) merge in split order.
 *
 * Batch invariance: a row's arithmetic depends on its query, the cache and
 * its causal length only, never on the rows beside it (heads, queries of a
 * verify pass or prefill chunk, TP's share of heads), on n past its length,
 * on its group, lane or chunk, or on the threads. So a row's output is bitwise
 * the same alone, in a decode of 96 heads and in a speculative verify pass. */
#ifndef K3_KERNELS_MLA_TILE_H
#define K3_KERNELS_MLA_TILE_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    const float *K, *V, *P; /* cached rows: keys [n, dk], values [n, dv], shared keys [n, dp] */
    int64_t ldk, ldv, ldp, n;
    int dk, dv, dp;      /* dp may be 0 (P unused) */
    const float *q, *qp; /* query row (h, t): q + h*q_h + t*q_t [dk], qp + h*qp_h + t*qp_t [dp] */
    float *out;          /* out + h*o_h + t*o_t [dv] */
    int64_t nh, nt, q_h, q_t, qp_h, qp_t, o_h, o_t;
    int64_t off;
    float scale;
    /* A bf16 cache (mla_tile_bf16_impl.h): when K16 is set, K16, V16 and P16 (same
       leading dimensions) are read instead of K, V and P, widened to f32 a
       block at a time; the arithmetic is the f32 kernel's. */
    const uint16_t *K16, *V16, *P16;
} k3_mla_tile_args;

/* Floats of scratch k3_mla_tile needs for a (64-byte aligned). */
size_t k3_mla_tile_scratch(const k3_mla_tile_args *a);
/* The attention of every row of a. ref = 1: the scalar double reference (one
 * row at a time, no scratch needed); otherwise the AVX-512 or AVX2 tiles as
 * the kernel mode and CPU allow (the reference where the CPU has neither). */
void k3_mla_tile(const k3_mla_tile_args *a, float *scratch, int ref);

/* The kernel alone (k3 bench --attention): nh heads x nt queries over an
 * n-token cache of width r + rope, the best of reps calls. 0 or -1 + k3_errmsg. */
typedef struct {
    double seconds, gflops, cache_gbs; /* per call; multiply-add FLOP/s; cache bytes read/s */
    double cpu_seconds, gflops_cpu;    /* the same by CPU time (all threads) */
} k3_mla_tile_bench_result;
int k3_mla_tile_bench(int nh, int r, int rope, int64_t n, int64_t nt, int reps,
                      k3_mla_tile_bench_result *out);

/* ---- internal: the per-ISA block step (mla_tile_avx512.c, mla_tile_avx2.c) ---- */

#define K3_TILE_GROUP 48 /* rows scored together against a block (lanes, a multiple of 16) */
#define K3_TILE_TOK 64   /* tokens per block */
/* Tokens of every split: cached rows [s * K3_TILE_SPLIT, (s + 1) * K3_TILE_SPLIT)
 * are split s, whatever the call (a multiple of K3_TILE_TOK). */
#define K3_TILE_SPLIT 1024
/* Floats of partial results (each split's max, weight sum and weighted sum per
 * row) one batch of rows may hold: more rows go in batches one after the
 * other (2^25, 128 MiB; tests lower it to make batches). */
extern int64_t k3_mla_tile_part_cap;

typedef struct {
    int g, gp;                  /* rows in use (<= K3_TILE_GROUP), lanes (g rounded up to 16) */
    const float *qt;            /* [dk + dp][gp]: the rows' q then qp, transposed, zero past g */
    int64_t len[K3_TILE_GROUP]; /* row i attends cached rows [0, len[i]) */
    float *acc[K3_TILE_GROUP];  /* [dv] row i's weighted sum */
    float mx[K3_TILE_GROUP], sum[K3_TILE_GROUP]; /* per lane: running max, sum of weights */
} k3_tile_group;

/* Fold cached rows [j0, j1) (j1 - j0 <= K3_TILE_TOK) into the running state of
 * the group's rows. */
void k3_mla_tile_block_avx512(const k3_mla_tile_args *a, k3_tile_group *g, int64_t j0, int64_t j1);
void k3_mla_tile_block_avx2(const k3_mla_tile_args *a, k3_tile_group *g, int64_t j0, int64_t j1);
/* The same over a bf16 cache (a->K16): the block widened into a stack stage,
 * then the f32 step above on it (mla_tile_bf16_impl.h). */
void k3_mla_tile_block_bf16_avx512(const k3_mla_tile_args *a, k3_tile_group *g, int64_t j0,
                                   int64_t j1);
void k3_mla_tile_block_bf16_avx2(const k3_mla_tile_args *a, k3_tile_group *g, int64_t j0,
                                 int64_t j1);

#endif
