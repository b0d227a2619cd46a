/* test_model_mla.c — MLA forward passes and the allocation-free forward step.
 *
 *   (the attention kernel itself: test_kernels_mla_tile.c)
 *   - whole forward passes (prefill + decode, MLA path automatic / A / B) on
 *     fixtures with the HF (W_UK) and MLX (W_UK^T) layouts: 2 and 3 threads
 *     bitwise equal to 1, and the fast kernels close to K3_KERNELS=ref;
 *   - decoding 50 tokens after the first grows no workspace or MLA cache and
 *     calls no allocator at all (counted by interposing malloc & co.; not in
 *     sanitizer builds, which own the allocator). */
#include "kernels/runtime.h"
#include "model/model.h"
#include "t.h"

#include <omp.h>

/* ---- allocation counting (interposes the allocator of this process) ----- */

#if defined(__SANITIZE_ADDRESS__)
#define COUNT_MALLOC 0
#else
#define COUNT_MALLOC 1
#endif

static volatile int g_counting;
static volatile long g_allocs;

#if COUNT_MALLOC
extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);
extern void __libc_free(void *);

static void count_alloc(void) {
    if (g_counting) __atomic_fetch_add(&g_allocs, 1, __ATOMIC_RELAXED);
}
void *malloc(size_t n) {
    count_alloc();
    return __libc_malloc(n);
}
void *calloc(size_t a, size_t b) {
    count_alloc();
    return __libc_calloc(a, b);
}
void *realloc(void *p, size_t n) {
    count_alloc();
    return __libc_realloc(p, n);
}
void *aligned_alloc(size_t al, size_t n) {
    count_alloc();
    return __libc_memalign(al, n);
}
int posix_memalign(void **p, size_t al, size_t n) {
    count_alloc();
    *p = __libc_memalign(al, n);
    return *p ? 0 : 12;
}
void free(void *p) {
    __libc_free(p);
}
#endif

/* ---- whole forward passes ---------------------------------------------------- */

static const int32_t g_tok[15] = {5, 17, 3, 200, 42, 42, 7, 1, 0, 198, 64, 3, 11, 250, 4};

/* Logits of a 12-token prefill (all rows) then 3 decode steps: 15 rows. */
static float *run_model(k3_model *m, int path) {
    int64_t V = k3_model_vocab(m);
    float *out = calloc((size_t)(15 * V), sizeof(float));
    int32_t tok[15];
    for (int t = 0; t < 15; t++) tok[t] = g_tok[t] % (int32_t)V;
    k3_seq *s = k3_seq_new(m);
    int rc = k3_forward_path(s, tok, 12, out, 1, path);
    for (int t = 12; !rc && t < 15; t++) rc = k3_forward_path(s, tok + t, 1, out + t * V, 1, path);
    CHECK(rc == 0, "%s", k3_errmsg());
    k3_seq_free(s);
    return out;
}

static void fixture_dir(const char *name, char *dir, size_t len) {
    if (!strncmp(name, "tests/", 6))
        snprintf(dir, len, "%s", name);
    else
        snprintf(dir, len, "%s/%s", t_fixtures(), name);
}

static const char *g_fixtures[] = {"tiny-bf16", "tests/fixtures/heads4-sharded",
                                   "tests/fixtures/mlx-absorbed", "tests/fixtures/plain-variants"};

#define NFIX (sizeof g_fixtures / sizeof *g_fixtures)
static const int g_paths[3] = {0, 'A', 'B'};

/* Logits of every fixture x path with the current thread count. */
static void run_all_models(k3_model **ms, float *out[NFIX][3]) {
    for (size_t f = 0; f < NFIX; f++)
        for (int k = 0; k < 3; k++) out[f][k] = ms[f] ? run_model(ms[f], g_paths[k]) : NULL;
}

/* Thread counts only grow here (1, 2, 3 and then stay): when an OpenMP team
 * shrinks, libgomp ends the spare threads and LeakSanitizer would report
 * their thread-local kernel buffers (moe.c / rowpar.c) as leaks. */
TEST(threads_bitwise_and_ref_close) {
    k3_model *ms[NFIX];
    float *one[NFIX][3], *two[NFIX][3], *three[NFIX][3], *ref[NFIX][3];
    for (size_t f = 0; f < NFIX; f++) {
        char dir[1024];
        fixture_dir(g_fixtures[f], dir, sizeof dir);
        ms[f] = k3_model_load(dir, NULL);
        CHECK(ms[f], "load %s: %s", dir, k3_errmsg());
    }
    omp_set_num_threads(1);
    run_all_models(ms, one);
    omp_set_num_threads(2);
    run_all_models(ms, two);
    omp_set_num_threads(3);
    run_all_models(ms, three);
    k3_kernels_set_mode(K3_KERNELS_REF);
    run_all_models(ms, ref);
    k3_kernels_set_mode(K3_KERNELS_AUTO);
    for (size_t f = 0; f < NFIX; f++) {
        if (!ms[f]) continue;
        int64_t n = 15 * (int64_t)k3_model_vocab(ms[f]);
        for (int k = 0; k < 3; k++) {
            CHECK(!memcmp(one[f][k], two[f][k], sizeof(float) * (size_t)n),
                  "%s path %d: 2 threads differ", g_fixtures[f], g_paths[k]);
            CHECK(!memcmp(one[f][k], three[f][k], sizeof(float) * (size_t)n),
                  "%s path %d: 3 threads differ", g_fixtures[f], g_paths[k]);
            double d = 0, mx = 0;
            for (int64_t i = 0; i < n; i++) {
                d = fmax(d, fabs((double)one[f][k][i] - ref[f][k][i]));
                mx = fmax(mx, fabs((double)ref[f][k][i]));
            }
            printf("  %-32s path %-3d fast vs ref: %.3e of max|logit|\n", g_fixtures[f], g_paths[k],
                   d / mx);
            CHECK(d <= 2e-5 * mx, "%s path %d: fast vs ref %g (max %g)", g_fixtures[f], g_paths[k],
                  d, mx);
            free(one[f][k]), free(two[f][k]), free(three[f][k]), free(ref[f][k]);
        }
        k3_model_free(ms[f]);
    }
}

TEST(decode_does_not_allocate) {
    char dir[1024];
    fixture_dir("tests/fixtures/heads4-sharded", dir, sizeof dir);
    k3_model *m = k3_model_load(dir, NULL);
    CHECK(m, "load %s: %s", dir, k3_errmsg());
    if (!m) return;
    float *logits = malloc(sizeof(float) * (size_t)k3_model_vocab(m));
    k3_seq *s = k3_seq_new(m);
    CHECK(k3_forward(s, g_tok, 8, logits, 0) == 0, "%s", k3_errmsg());
    int32_t tok = 3;
    CHECK(k3_forward(s, &tok, 1, logits, 0) == 0); /* the first decode step sizes the buffers */
    uint64_t grows = k3_workspace_grows();
    g_allocs = 0;
    g_counting = 1;
    for (int i = 0; i < 50; i++) {
        tok = (int32_t)((tok * 31 + 7) % 256);
        CHECK(k3_forward(s, &tok, 1, logits, 0) == 0);
    }
    g_counting = 0;
    CHECK(k3_workspace_grows() == grows, "workspace grew %llu times while decoding",
          (unsigned long long)(k3_workspace_grows() - grows));
    printf("  50 decode steps: %llu workspace grows, %ld allocator calls%s\n",
           (unsigned long long)(k3_workspace_grows() - grows), g_allocs,
           COUNT_MALLOC ? "" : " (not counted under the sanitizer)");
    CHECK(g_allocs == 0, "%ld allocator calls in 50 decode steps", g_allocs);
    /* a longer chunk than any before grows the buffers: the counter does see growth */
    int32_t many[40];
    for (int i = 0; i < 40; i++) many[i] = (int32_t)(i * 13 % 256);
    CHECK(k3_forward(s, many, 40, logits, 0) == 0);
    CHECK(k3_workspace_grows() > grows, "a 40-token pass after 8-token ones must grow");
    k3_seq_free(s);
    free(logits);
    k3_model_free(m);
}

/* A batched decode step (several sequences, each with logits) allocates
 * nothing once the first step of that batch size has sized the workspace:
 * the head's [rows, vocab] logits and the batch's lists come from it too. */
TEST(batch_decode_does_not_allocate) {
    char dir[1024];
    fixture_dir("tests/fixtures/heads4-sharded", dir, sizeof dir);
    k3_model *m = k3_model_load(dir, NULL);
    CHECK(m, "load %s: %s", dir, k3_errmsg());
    if (!m) return;
    enum { NS = 3 };
    int64_t V = k3_model_vocab(m);
    float *logits = malloc(sizeof(float) * (size_t)(NS * V));
    k3_seq *s[NS];
    int32_t tok[NS];
    k3_batch_item it[NS];
    for (int i = 0; i < NS; i++) {
        s[i] = k3_seq_new(m);
        CHECK(k3_forward(s[i], g_tok, 4 + i, NULL, 0) == 0, "%s", k3_errmsg());
        tok[i] = (int32_t)(5 + i);
        it[i] = (k3_batch_item){.seq = s[i], .tokens = &tok[i], .n = 1, .logits = logits + i * V};
    }
    CHECK(k3_forward_batch(it, NS) == 0, "%s", k3_errmsg()); /* sizes the buffers */
    uint64_t grows = k3_workspace_grows();
    g_allocs = 0;
    g_counting = 1;
    for (int step = 0; step < 20; step++) {
        for (int i = 0; i < NS; i++) tok[i] = (int32_t)((tok[i] * 31 + 7 + i) % 256);
        CHECK(k3_forward_batch(it, NS) == 0, "%s", k3_errmsg());
    }
    g_counting = 0;
    CHECK(k3_workspace_grows() == grows, "workspace grew %llu times in batched decoding",
          (unsigned long long)(k3_workspace_grows() - grows));
    printf("  20 batched steps of %d: %llu workspace grows, %ld allocator calls%s\n", NS,
           (unsigned long long)(k3_workspace_grows() - grows), g_allocs,
           COUNT_MALLOC ? "" : " (not counted under the sanitizer)");
    CHECK(g_allocs == 0, "%ld allocator calls in 20 batched decode steps", g_allocs);
    for (int i = 0; i < NS; i++) k3_seq_free(s[i]);
    free(logits);
    k3_model_free(m);
}

int main(void) {
    RUN(threads_bitwise_and_ref_close);
    RUN(decode_does_not_allocate);
    RUN(batch_decode_does_not_allocate);
    return t_done();
}
