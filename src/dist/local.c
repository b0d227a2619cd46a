/* local.c — threads-as-ranks k3_comm (see local.h). */
#include "dist/local.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "base/mem.h"
#include "model/rowpar.h"

typedef struct {
    const float *buf; /* published for the peers during an all-reduce */
    /* point-to-point mailbox: filled by the sender, emptied by the receiver */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    const float *mail;
    size_t mail_n;
    int mail_from;
    int mail_taken;
} local_slot;

struct k3_local_group {
    int n;
    pthread_barrier_t bar;
    local_slot *slot;
    k3_comm *comm;
    k3_dist_counters *stats;
};

typedef struct {
    k3_local_group *g;
    int rank;
} rank_ctx;

static int local_allreduce(void *ctx, float *buf, size_t n) {
    rank_ctx *rc = ctx;
    k3_local_group *g = rc->g;
    g->stats[rc->rank].allreduce_calls++;
    g->stats[rc->rank].allreduce_bytes += (uint64_t)n * sizeof(float);
    if (g->n == 1) return 0;
    /* every rank copies all partials and sums them in the canonical tree order
     * (model/rowpar.h): identical bits everywhere, and equal to one process */
    float *all = k3_alloc((size_t)g->n * n * sizeof(float) + 1);
    float **parts = k3_xcalloc((size_t)g->n, sizeof *parts);
    if (!all) return -1; /* (the peers would then wait forever: tests only) */
    g->slot[rc->rank].buf = buf;
    pthread_barrier_wait(&g->bar);
    for (int r = 0; r < g->n; r++) {
        parts[r] = all + (size_t)r * n;
        memcpy(parts[r], g->slot[r].buf, n * sizeof(float));
    }
    pthread_barrier_wait(&g->bar); /* everyone has read every buffer */
    k3_tree_reduce(parts, g->n, (int64_t)n);
    memcpy(buf, parts[0], n * sizeof(float));
    k3_free(all);
    free(parts);
    return 0;
}

static int local_send(void *ctx, int peer, const float *buf, size_t n) {
    rank_ctx *rc = ctx;
    k3_local_group *g = rc->g;
    if (peer < 0 || peer >= g->n || peer == rc->rank)
        return k3_seterr("send: peer rank %d invalid (group of %d)", peer, g->n);
    g->stats[rc->rank].p2p_calls++;
    g->stats[rc->rank].sent_bytes += (uint64_t)n * sizeof(float);
    g->stats[rc->rank].p2p_bytes += (uint64_t)n * sizeof(float);
    local_slot *s = &g->slot[peer];
    pthread_mutex_lock(&s->mu);
    while (s->mail) pthread_cond_wait(&s->cv, &s->mu); /* one message in flight per receiver */
    s->mail = buf, s->mail_n = n, s->mail_from = rc->rank, s->mail_taken = 0;
    pthread_cond_broadcast(&s->cv);
    while (!s->mail_taken) pthread_cond_wait(&s->cv, &s->mu); /* blocking, like MPI_Send */
    s->mail = NULL;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    return 0;
}

static int local_recv(void *ctx, int peer, float *buf, size_t n) {
    rank_ctx *rc = ctx;
    k3_local_group *g = rc->g;
    if (peer < 0 || peer >= g->n || peer == rc->rank)
        return k3_seterr("recv: peer rank %d invalid (group of %d)", peer, g->n);
    g->stats[rc->rank].p2p_calls++;
    g->stats[rc->rank].p2p_bytes += (uint64_t)n * sizeof(float);
    local_slot *s = &g->slot[rc->rank];
    int rcode = 0;
    pthread_mutex_lock(&s->mu);
    while (!s->mail || s->mail_taken || s->mail_from != peer) pthread_cond_wait(&s->cv, &s->mu);
    if (s->mail_n != n)
        rcode = k3_seterr("recv from rank %d: got %zu floats, expected %zu", peer, s->mail_n, n);
    else
        memcpy(buf, s->mail, n * sizeof(float));
    s->mail_taken = 1;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    return rcode;
}

static int local_bcast(void *ctx, void *buf, size_t bytes, int root) {
    rank_ctx *rc = ctx;
    k3_local_group *g = rc->g;
    if (g->n == 1) return 0;
    if (rc->rank == root) g->slot[root].buf = buf;
    pthread_barrier_wait(&g->bar);
    if (rc->rank != root) memcpy(buf, g->slot[root].buf, bytes);
    pthread_barrier_wait(&g->bar);
    return 0;
}

k3_local_group *k3_local_group_new(int n) {
    if (n < 1) {
        k3_seterr("local group: %d ranks (need >= 1)", n);
        return NULL;
    }
    k3_local_group *g = k3_xcalloc(1, sizeof *g);
    g->n = n;
    g->slot = k3_xcalloc((size_t)n, sizeof *g->slot);
    g->comm = k3_xcalloc((size_t)n, sizeof *g->comm);
    g->stats = k3_xcalloc((size_t)n, sizeof *g->stats);
    rank_ctx *ctx = k3_xcalloc((size_t)n, sizeof *ctx);
    pthread_barrier_init(&g->bar, NULL, (unsigned)n);
    for (int r = 0; r < n; r++) {
        pthread_mutex_init(&g->slot[r].mu, NULL);
        pthread_cond_init(&g->slot[r].cv, NULL);
        ctx[r] = (rank_ctx){g, r};
        g->comm[r] = (k3_comm){&ctx[r], r, n, local_allreduce, local_send, local_recv, local_bcast};
    }
    return g;
}

void k3_local_group_free(k3_local_group *g) {
    if (!g) return;
    for (int r = 0; r < g->n; r++) {
        pthread_mutex_destroy(&g->slot[r].mu);
        pthread_cond_destroy(&g->slot[r].cv);
    }
    pthread_barrier_destroy(&g->bar);
    free(g->comm[0].ctx); /* the rank_ctx array */
    free(g->comm);
    free(g->slot);
    free(g->stats);
    free(g);
}

const k3_comm *k3_local_comm(k3_local_group *g, int rank) {
    return &g->comm[rank];
}

k3_dist_counters k3_local_stats(k3_local_group *g, int rank) {
    return g->stats[rank];
}

typedef struct {
    int (*fn)(int, void *);
    void *arg;
    int rank, rc;
} thread_job;

static void *run_rank(void *p) {
    thread_job *j = p;
    j->rc = j->fn(j->rank, j->arg);
    return NULL;
}

int k3_local_run(k3_local_group *g, int (*fn)(int rank, void *arg), void *arg) {
    thread_job *jobs = k3_xcalloc((size_t)g->n, sizeof *jobs);
    pthread_t *th = k3_xcalloc((size_t)g->n, sizeof *th);
    for (int r = 0; r < g->n; r++) {
        jobs[r] = (thread_job){fn, arg, r, 0};
        pthread_create(&th[r], NULL, run_rank, &jobs[r]);
    }
    int failed = 0;
    for (int r = 0; r < g->n; r++) {
        pthread_join(th[r], NULL);
        failed += jobs[r].rc != 0;
    }
    free(jobs);
    free(th);
    return failed;
}
