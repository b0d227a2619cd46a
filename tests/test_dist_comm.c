/* test_dist_comm.c — the communication layer under tensor/pipeline parallelism.
 *
 * Run directly, it checks the single-process behaviour of src/dist/dist.c (a
 * group of one: no MPI calls) and the threads-as-ranks group of
 * src/dist/local.c on awkward sizes. Run under `mpirun -np N` (see
 * tests/sh/dist_comm.sh), it checks the MPI wrapper: all-reduce against a
 * locally computed sum, bit-identical results on every rank, byte counters,
 * pipeline send/recv around a ring, broadcast, and failure agreement. Under
 * MPI every rank prints its results prefixed by "rank R:" and rank 0 prints
 * the PASS/FAIL lines for the group. */
#include "t.h"

#include <stdint.h>

#include "base/err.h"
#include "dist/dist.h"
#include "dist/local.h"

/* Value that rank r contributes at index i (exactly representable sums). */
static float contrib(int r, size_t i) {
    return (float)((int)(i % 97) - 40) * 0.25f + (float)r;
}

/* ---------------- single process ---------------- */

TEST(singleton_group) {
    CHECK(k3_dist_size() == 1 && k3_dist_rank() == 0);
    float v[5] = {1, 2, 3, 4, 5};
    k3_dist_reset_stats();
    CHECK(k3_dist_allreduce_sum(v, 5) == 0);
    CHECK(v[0] == 1 && v[4] == 5, "a group of one must leave the buffer unchanged");
    k3_dist_counters c = k3_dist_stats();
    CHECK(c.allreduce_calls == 1 && c.allreduce_bytes == 20, "counted %llu bytes",
          (unsigned long long)c.allreduce_bytes);
    CHECK(k3_dist_send(0, v, 5) == -1, "sending to oneself must be refused");
    CHECK(strstr(k3_errmsg(), "peer rank 0") != NULL, "message: %s", k3_errmsg());
    CHECK(k3_dist_all_ok(1) == 0);
    CHECK(k3_dist_all_ok(0) == -1);
    CHECK(strcmp(k3_dist_tag(), "") == 0);
}

typedef struct {
    k3_local_group *g;
    size_t n;
    float **out;
} ar_job;

static int allreduce_rank(int rank, void *arg) {
    ar_job *j = arg;
    const k3_comm *c = k3_local_comm(j->g, rank);
    float *b = j->out[rank];
    for (size_t i = 0; i < j->n; i++) b[i] = contrib(rank, i);
    return c->allreduce_sum(c->ctx, b, j->n);
}

TEST(local_allreduce_awkward_sizes) {
    const int ranks[] = {1, 2, 3, 4};
    const size_t sizes[] = {1, 7, 64, 1000, 4099};
    for (size_t a = 0; a < 4; a++)
        for (size_t b = 0; b < 5; b++) {
            int n = ranks[a];
            size_t len = sizes[b];
            k3_local_group *g = k3_local_group_new(n);
            float *bufs[4];
            for (int r = 0; r < n; r++) bufs[r] = calloc(len, sizeof(float));
            ar_job j = {g, len, bufs};
            CHECK(k3_local_run(g, allreduce_rank, &j) == 0);
            for (int r = 0; r < n; r++)
                for (size_t i = 0; i < len; i++) {
                    double want = 0;
                    for (int q = 0; q < n; q++) want += contrib(q, i);
                    CHECK(bufs[r][i] == (float)want, "n=%d len=%zu rank %d [%zu]: %g vs %g", n, len,
                          r, i, bufs[r][i], want);
                }
            for (int r = 0; r < n; r++) {
                k3_dist_counters c = k3_local_stats(g, r);
                CHECK(c.allreduce_calls == 1 && c.allreduce_bytes == len * 4);
                free(bufs[r]);
            }
            k3_local_group_free(g);
        }
}

/* Pipeline hand-off: rank n-1 starts, each rank adds its id and passes on. */
typedef struct {
    k3_local_group *g;
    float result[3];
    size_t n;
} pipe_job;

static int pipe_rank(int rank, void *arg) {
    pipe_job *j = arg;
    const k3_comm *c = k3_local_comm(j->g, rank);
    int n = c->size;
    float buf[3] = {0, 0, 0};
    if (rank < n - 1 && c->recv(c->ctx, rank + 1, buf, 3)) return -1;
    for (int i = 0; i < 3; i++) buf[i] = buf[i] * 10 + (float)rank;
    if (rank > 0) return c->send(c->ctx, rank - 1, buf, 3);
    memcpy(j->result, buf, sizeof buf);
    return 0;
}

TEST(local_pipeline_order) {
    k3_local_group *g = k3_local_group_new(3);
    pipe_job j = {g, {0}, 3};
    CHECK(k3_local_run(g, pipe_rank, &j) == 0);
    CHECK(j.result[0] == 210.0f, "stages must run 2 -> 1 -> 0, got %g", j.result[0]);
    CHECK(k3_local_stats(g, 1).p2p_bytes == 24, "rank 1 moves 12 B in and 12 B out");
    k3_local_group_free(g);
}

static int bad_size_rank(int rank, void *arg) {
    k3_local_group *g = arg;
    const k3_comm *c = k3_local_comm(g, rank);
    float buf[4] = {0};
    if (rank == 1) return c->send(c->ctx, 0, buf, 4);
    int rc = c->recv(c->ctx, 1, buf, 3);
    return rc == -1 && strstr(k3_errmsg(), "expected 3") ? 0 : 1;
}

TEST(local_recv_size_mismatch) {
    k3_local_group *g = k3_local_group_new(2);
    CHECK(k3_local_run(g, bad_size_rank, g) == 0, "a short receive must be reported");
    k3_local_group_free(g);
    CHECK(k3_local_group_new(0) == NULL);
}

/* ---------------- under mpirun ---------------- */

static int mpi_fails;
#define MCHECK(cond, ...)                                                                          \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            mpi_fails++;                                                                           \
            printf("rank %d: %s:%d: CHECK(%s) failed: ", k3_dist_rank(), __FILE__, __LINE__,       \
                   #cond);                                                                         \
            t_note("" __VA_ARGS__);                                                                \
            printf("\n");                                                                          \
        }                                                                                          \
    } while (0)

/* Group-wide verdict, printed once by rank 0. */
static void mpi_report(const char *name) {
    float f = (float)mpi_fails;
    k3_dist_allreduce_sum(&f, 1);
    if (k3_dist_rank() == 0) printf("%s %s\n", f == 0 ? "PASS" : "FAIL", name);
    fflush(stdout);
    mpi_fails = 0;
}

static uint64_t hash_floats(const float *b, size_t n) {
    uint64_t h = 1469598103934665603ull;
    const unsigned char *p = (const unsigned char *)b;
    for (size_t i = 0; i < n * sizeof(float); i++) h = (h ^ p[i]) * 1099511628211ull;
    return h;
}

static void mpi_allreduce(void) {
    int R = k3_dist_rank(), N = k3_dist_size();
    const size_t sizes[] = {1, 13, 7168 + 3584, 100003};
    for (size_t s = 0; s < 4; s++) {
        size_t n = sizes[s];
        float *b = calloc(n, sizeof(float));
        for (size_t i = 0; i < n; i++) b[i] = contrib(R, i);
        k3_dist_reset_stats();
        const k3_comm *c = k3_dist_comm();
        MCHECK(c->rank == R && c->size == N);
        MCHECK(c->allreduce_sum(c->ctx, b, n) == 0, "%s", k3_errmsg());
        k3_dist_counters st = k3_dist_stats();
        MCHECK(st.allreduce_calls == 1 && st.allreduce_bytes == n * 4);
        size_t bad = 0;
        for (size_t i = 0; i < n; i++) {
            double want = 0;
            for (int q = 0; q < N; q++) want += contrib(q, i);
            bad += b[i] != (float)want;
        }
        MCHECK(bad == 0, "n=%zu: %zu wrong sums", n, bad);
        /* every rank must hold the same bits (routing decisions depend on them) */
        uint64_t h = hash_floats(b, n), h0 = h;
        k3_dist_bcast(&h0, sizeof h0, 0);
        MCHECK(h == h0, "n=%zu: all-reduce result differs from rank 0's", n);
        free(b);
    }
    /* non-representable values: sum of randoms, still identical on every rank */
    float r[777];
    t_seed(1000 + (unsigned)R);
    for (int i = 0; i < 777; i++) r[i] = (float)t_rand() * 1e3f;
    k3_dist_allreduce_sum(r, 777);
    uint64_t h = hash_floats(r, 777), h0 = h;
    k3_dist_bcast(&h0, sizeof h0, 0);
    MCHECK(h == h0, "rounded sums differ between ranks");
    mpi_report("mpi_allreduce");
}

static void mpi_pipeline(void) {
    int R = k3_dist_rank(), N = k3_dist_size();
    float buf[5] = {0};
    k3_dist_reset_stats();
    if (R < N - 1) MCHECK(k3_dist_recv(R + 1, buf, 5) == 0, "%s", k3_errmsg());
    for (int i = 0; i < 5; i++) buf[i] += (float)(R + 1) * (float)(i + 1);
    if (R > 0) MCHECK(k3_dist_send(R - 1, buf, 5) == 0, "%s", k3_errmsg());
    if (R == 0) {
        float want = 0;
        for (int q = 0; q < N; q++) want += (float)(q + 1);
        for (int i = 0; i < 5; i++) MCHECK(buf[i] == want * (float)(i + 1));
    }
    k3_dist_counters st = k3_dist_stats();
    uint64_t expect = (uint64_t)((R > 0) + (R < N - 1)) * 20;
    MCHECK(st.p2p_bytes == expect, "p2p bytes %llu, expected %llu",
           (unsigned long long)st.p2p_bytes, (unsigned long long)expect);
    mpi_report("mpi_pipeline_send_recv");
}

static void mpi_bcast_and_agree(void) {
    int R = k3_dist_rank(), N = k3_dist_size();
    int32_t toks[4] = {0};
    if (R == 0) toks[0] = 5, toks[1] = 6, toks[2] = 7, toks[3] = -1;
    MCHECK(k3_dist_bcast(toks, sizeof toks, 0) == 0);
    MCHECK(toks[0] == 5 && toks[3] == -1);
    MCHECK(k3_dist_all_ok(1) == 0, "everyone succeeded");
    /* the last rank fails: every rank must learn its message */
    if (R == N - 1) k3_seterr("cannot map shard.safetensors");
    int rc = k3_dist_all_ok(R != N - 1);
    char want[128];
    snprintf(want, sizeof want, "rank %d: cannot map shard.safetensors", N - 1);
    MCHECK(rc == -1 && strcmp(k3_errmsg(), want) == 0, "got '%s'", k3_errmsg());
    /* two failing ranks: the lowest one speaks */
    if (R >= N - 2) k3_seterr("failure on %d", R);
    rc = k3_dist_all_ok(R < N - 2);
    snprintf(want, sizeof want, "rank %d: failure on %d", N - 2, N - 2);
    MCHECK(rc == -1 && strcmp(k3_errmsg(), want) == 0, "got '%s'", k3_errmsg());
    char tag[48];
    snprintf(tag, sizeof tag, "[rank %d/%d] ", R, N);
    MCHECK(strcmp(k3_dist_tag(), tag) == 0, "tag '%s'", k3_dist_tag());
    mpi_report("mpi_bcast_and_failure_agreement");
}

int main(void) {
    if (k3_dist_launched()) {
        if (k3_dist_init()) {
            printf("FAIL mpi_init: %s\n", k3_errmsg());
            return 1;
        }
        if (k3_dist_size() < 2) {
            if (k3_dist_rank() == 0) printf("FAIL mpi_group_size (run with -np >= 2)\n");
            k3_dist_finalize();
            return 1;
        }
        mpi_allreduce();
        mpi_pipeline();
        mpi_bcast_and_agree();
        k3_dist_finalize();
        return 0;
    }
    CHECK(k3_dist_init() == 0); /* no launcher: must not start MPI */
    RUN(singleton_group);
    RUN(local_allreduce_awkward_sizes);
    RUN(local_pipeline_order);
    RUN(local_recv_size_mismatch);
    k3_dist_finalize();
    return t_done();
}
