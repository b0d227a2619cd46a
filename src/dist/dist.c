/* dist.c — MPI process group, counting communication wrappers (see dist.h). */
#include "dist/dist.h"

#include <limits.h>
#include <mpi.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/err.h"
#include "base/mem.h"
#include "model/rowpar.h"

static int g_inited; /* we called MPI_Init */
static int g_rank, g_size = 1;
static k3_dist_counters g_stats;
static char g_tag[48];

/* MPI counts are int: move big buffers in pieces of at most this many elements. */
#define CHUNK ((size_t)INT_MAX / 8)
/* Floats per all-gather round of the ordered all-reduce (bounds its scratch). */
#define TREE_PIECE ((size_t)1 << 20)

int k3_dist_launched(void) {
    static const char *vars[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        const char *v = getenv(vars[i]);
        if (v && *v) return 1;
    }
    return 0;
}

static int mpi_fail(int rc, const char *what) {
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(rc, msg, &len);
    return k3_seterr("%s: MPI error: %.*s", what, len, msg);
}

/* Ranks sharing a machine would each start one OpenMP thread per core and
 * spin against each other (a 4-rank run on 2 cores took 50x longer); unless
 * OMP_NUM_THREADS says otherwise, give each local rank its share of the cores. */
static void share_cores(void) {
    const char *omp = getenv("OMP_NUM_THREADS"), *local = getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
    int n = local ? atoi(local) : 0;
    if ((omp && *omp) || n < 2) return;
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    omp_set_num_threads(cpus / n > 1 ? (int)(cpus / n) : 1);
}

int k3_dist_init(void) {
    if (g_inited || !k3_dist_launched()) return 0;
    int already = 0;
    MPI_Initialized(&already);
    if (!already) {
        /* SERIALIZED: the HTTP server may run the forward pass on a worker thread,
         * but never two MPI calls at once. */
        int provided = 0;
        int rc = MPI_Init_thread(NULL, NULL, MPI_THREAD_SERIALIZED, &provided);
        if (rc != MPI_SUCCESS) return mpi_fail(rc, "MPI_Init_thread");
        g_inited = 1;
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g_size);
    share_cores();
    if (g_size > 1) snprintf(g_tag, sizeof g_tag, "[rank %d/%d] ", g_rank, g_size);
    return 0;
}

void k3_dist_finalize(void) {
    const char *s = getenv("K3_DIST_STATS");
    if (s && *s && strcmp(s, "0")) {
        k3_dist_counters c = k3_dist_stats();
        fprintf(stderr,
                "k3 %scomm: %llu all-reduce calls, %llu all-reduce bytes, %llu p2p calls, "
                "%llu p2p bytes, %llu p2p bytes sent\n",
                g_tag, (unsigned long long)c.allreduce_calls, (unsigned long long)c.allreduce_bytes,
                (unsigned long long)c.p2p_calls, (unsigned long long)c.p2p_bytes,
                (unsigned long long)c.sent_bytes);
    }
    if (!g_inited) return;
    g_inited = 0;
    MPI_Finalize();
}

int k3_dist_rank(void) {
    return g_rank;
}
int k3_dist_size(void) {
    return g_size;
}
const char *k3_dist_tag(void) {
    return g_tag;
}

k3_dist_counters k3_dist_stats(void) {
    return g_stats;
}
void k3_dist_reset_stats(void) {
    memset(&g_stats, 0, sizeof g_stats);
}

/* K3_ALLREDUCE=mpi: MPI_Allreduce (fewer bytes on the wire for big buffers, but
 * its summation order is MPI's, so TP-N no longer reproduces TP1 bit for bit). */
static int use_mpi_allreduce(void) {
    static int v = -1;
    if (v < 0) {
        const char *e = getenv("K3_ALLREDUCE");
        v = e && !strcmp(e, "mpi");
    }
    return v;
}

/* Gather every rank's piece and add them in the canonical tree order
 * (model/rowpar.h): identical on every rank and equal to the single-process sum. */
static int allreduce_tree(MPI_Comm comm, int size, float *buf, size_t n) {
    size_t piece = n < TREE_PIECE ? n : TREE_PIECE;
    float *all = k3_alloc((size_t)size * piece * sizeof(float));
    float **parts = k3_xcalloc((size_t)size, sizeof *parts);
    if (!all) return -1;
    int rc = MPI_SUCCESS;
    for (size_t off = 0; rc == MPI_SUCCESS && off < n; off += piece) {
        size_t cnt = n - off < piece ? n - off : piece;
        rc = MPI_Allgather(buf + off, (int)cnt, MPI_FLOAT, all, (int)cnt, MPI_FLOAT, comm);
        for (int r = 0; r < size; r++) parts[r] = all + (size_t)r * cnt;
        k3_tree_reduce(parts, size, (int64_t)cnt);
        memcpy(buf + off, parts[0], cnt * sizeof(float));
    }
    k3_free(all);
    free(parts);
    return rc == MPI_SUCCESS ? 0 : mpi_fail(rc, "all-reduce (allgather)");
}

/* A sub-group of the world (k3_dist_grid) or the world itself. */
typedef struct {
    MPI_Comm comm;
    int rank, size;
} group;

static int group_allreduce(const group *g, float *buf, size_t n) {
    g_stats.allreduce_calls++;
    g_stats.allreduce_bytes += (uint64_t)n * sizeof(float);
    if (g->size == 1) return 0;
    if (!use_mpi_allreduce()) return allreduce_tree(g->comm, g->size, buf, n);
    for (size_t off = 0; off < n; off += CHUNK) {
        int cnt = (int)(n - off < CHUNK ? n - off : CHUNK);
        int rc = MPI_Allreduce(MPI_IN_PLACE, buf + off, cnt, MPI_FLOAT, MPI_SUM, g->comm);
        if (rc != MPI_SUCCESS) return mpi_fail(rc, "all-reduce");
    }
    return 0;
}

static int check_peer(const group *g, int peer, const char *what) {
    if (peer < 0 || peer >= g->size || peer == g->rank)
        return k3_seterr("%s: peer rank %d invalid (this is rank %d of %d)", what, peer, g->rank,
                         g->size);
    return 0;
}

static int group_send(const group *g, int peer, const float *buf, size_t n) {
    if (check_peer(g, peer, "send")) return -1;
    g_stats.p2p_calls++;
    g_stats.p2p_bytes += (uint64_t)n * sizeof(float);
    g_stats.sent_bytes += (uint64_t)n * sizeof(float);
    for (size_t off = 0; off < n; off += CHUNK) {
        int cnt = (int)(n - off < CHUNK ? n - off : CHUNK);
        int rc = MPI_Send(buf + off, cnt, MPI_FLOAT, peer, 0, g->comm);
        if (rc != MPI_SUCCESS) return mpi_fail(rc, "send");
    }
    return 0;
}

static int group_recv(const group *g, int peer, float *buf, size_t n) {
    if (check_peer(g, peer, "recv")) return -1;
    g_stats.p2p_calls++;
    g_stats.p2p_bytes += (uint64_t)n * sizeof(float);
    for (size_t off = 0; off < n; off += CHUNK) {
        int cnt = (int)(n - off < CHUNK ? n - off : CHUNK), got = 0;
        MPI_Status st;
        int rc = MPI_Recv(buf + off, cnt, MPI_FLOAT, peer, 0, g->comm, &st);
        if (rc != MPI_SUCCESS) return mpi_fail(rc, "recv");
        MPI_Get_count(&st, MPI_FLOAT, &got);
        if (got != cnt)
            return k3_seterr("recv from rank %d: got %d floats, expected %d", peer, got, cnt);
    }
    return 0;
}

static const group *world(void) {
    static group w;
    w = (group){MPI_COMM_WORLD, g_rank, g_size};
    return &w;
}

int k3_dist_allreduce_sum(float *buf, size_t n) {
    return group_allreduce(world(), buf, n);
}

int k3_dist_send(int peer, const float *buf, size_t n) {
    return group_send(world(), peer, buf, n);
}

int k3_dist_recv(int peer, float *buf, size_t n) {
    return group_recv(world(), peer, buf, n);
}

static int comm_bcast(void *ctx, void *buf, size_t bytes, int root);

int k3_dist_bcast(void *buf, size_t bytes, int root) {
    return comm_bcast(NULL, buf, bytes, root);
}

void k3_dist_barrier(void) {
    if (g_size > 1) MPI_Barrier(MPI_COMM_WORLD);
}

int k3_dist_all_ok(int ok) {
    if (g_size == 1) return ok ? 0 : -1;
    /* The lowest failing rank (or g_size if none) becomes the speaker. */
    int mine = ok ? g_size : g_rank, first = g_size;
    MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (first == g_size) return 0;
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", first == g_rank ? k3_errmsg() : "");
    MPI_Bcast(msg, sizeof msg, MPI_CHAR, first, MPI_COMM_WORLD);
    msg[sizeof msg - 1] = 0;
    return k3_seterr("rank %d: %s", first, msg);
}

/* ---- the world group as a k3_comm ---- */

static int comm_allreduce(void *ctx, float *buf, size_t n) {
    return group_allreduce(ctx ? ctx : world(), buf, n);
}
static int comm_send(void *ctx, int peer, const float *buf, size_t n) {
    return group_send(ctx ? ctx : world(), peer, buf, n);
}
static int comm_recv(void *ctx, int peer, float *buf, size_t n) {
    return group_recv(ctx ? ctx : world(), peer, buf, n);
}

static int comm_bcast(void *ctx, void *buf, size_t bytes, int root) {
    const group *g = ctx ? ctx : world();
    if (g->size == 1) return 0;
    char *p = buf;
    for (size_t off = 0; off < bytes; off += CHUNK) {
        int cnt = (int)(bytes - off < CHUNK ? bytes - off : CHUNK);
        int rc = MPI_Bcast(p + off, cnt, MPI_BYTE, root, g->comm);
        if (rc != MPI_SUCCESS) return mpi_fail(rc, "broadcast");
    }
    return 0;
}

const k3_comm *k3_dist_comm(void) {
    static k3_comm c;
    c = (k3_comm){NULL, g_rank, g_size, comm_allreduce, comm_send, comm_recv, comm_bcast};
    return &c;
}

int k3_dist_grid(int tp, const k3_comm **tp_comm, const k3_comm **pp_comm) {
    static group gt, gp;
    static k3_comm ct, cp;
    static int made;
    if (tp < 1 || g_size % tp)
        return k3_seterr("%d ranks cannot be split into tensor-parallel groups of %d", g_size, tp);
    if (!made) {
        gt.comm = gp.comm = MPI_COMM_SELF;
        if (g_size > 1) {
            int rc = MPI_Comm_split(MPI_COMM_WORLD, g_rank / tp, g_rank % tp, &gt.comm);
            if (rc == MPI_SUCCESS)
                rc = MPI_Comm_split(MPI_COMM_WORLD, g_rank % tp, g_rank / tp, &gp.comm);
            if (rc != MPI_SUCCESS) return mpi_fail(rc, "splitting the world into TP x PP groups");
        }
        made = tp;
    } else if (made != tp) {
        return k3_seterr("the TP x PP grid was already made with groups of %d", made);
    }
    gt.rank = g_rank % tp, gt.size = tp;
    gp.rank = g_rank / tp, gp.size = g_size / tp;
    ct = (k3_comm){&gt, gt.rank, gt.size, comm_allreduce, comm_send, comm_recv, comm_bcast};
    cp = (k3_comm){&gp, gp.rank, gp.size, comm_allreduce, comm_send, comm_recv, comm_bcast};
    *tp_comm = &ct;
    *pp_comm = &cp;
    return 0;
}
