/* prefetch.c — expert read-ahead pool and RAM-budget residency (see prefetch.h). */
#include "model/prefetch.h"
#include "model/model.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "base/mem.h"

#define NTHREADS 4
#define PIECE (2u << 20) /* read-ahead granularity per madvise */
/* MoE calls between re-rankings of the hot experts (the first two: 8) */
#define REBALANCE_EVERY 32
#define QCAP 4096

enum { OP_WILLNEED, OP_LOCK };

typedef struct {
    int op;
    uintptr_t a;
    size_t n;
} job;

typedef struct {
    uintptr_t a;
    size_t n;
} range;

static struct {
    pthread_once_t once;
    pthread_mutex_t mu; /* everything below */
    pthread_cond_t work, idle;
    job q[QCAP];
    int head, count, active, started;
    int enable; /* K3_PREFETCH / k3_prefetch_set: 1 on, 0 off, -1 auto (prefetch.h) */
    uint64_t budget;
    int count_hits;
    /* per-model routing state */
    const k3_model *m;
    int nl, E;
    uint64_t *freq;  /* [nl * E] tokens routed to (layer, expert) */
    uint8_t *locked; /* [nl * E] */
    uint8_t *seen;   /* [nl * E] selected before (K3_READAHEAD_FIRST reads each once) */
    uint64_t calls_since;
    k3_prefetch_stats st;
    FILE *routes; /* K3_ROUTES_FILE: the experts chosen per MoE call */
    uint8_t *vec; /* mincore scratch */
    size_t vec_cap;
} P = {.once = PTHREAD_ONCE_INIT,
       .mu = PTHREAD_MUTEX_INITIALIZER,
       .work = PTHREAD_COND_INITIALIZER,
       .idle = PTHREAD_COND_INITIALIZER};

static atomic_ullong g_lock_fail, g_pool_ns;

static uint64_t thread_cpu_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

int k3_prefetch_parse_size(const char *s, uint64_t *out) {
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || errno || v < 0) return -1;
    double mul = 1;
    if (*end == 'K' || *end == 'k')
        mul = 1024.0, end++;
    else if (*end == 'M' || *end == 'm')
        mul = 1024.0 * 1024, end++;
    else if (*end == 'G' || *end == 'g')
        mul = 1024.0 * 1024 * 1024, end++;
    else if (*end == 'T' || *end == 't')
        mul = 1024.0 * 1024 * 1024 * 1024, end++;
    if (*end == 'B' || *end == 'b') end++;
    if (*end) return -1;
    *out = (uint64_t)(v * mul);
    return 0;
}

static long page_size(void) {
    static long pg;
    if (!pg) pg = sysconf(_SC_PAGESIZE);
    return pg;
}

const char *k3_readahead_name(int mode) {
    return mode == K3_READAHEAD_EVERY   ? "every selection"
           : mode == K3_READAHEAD_FIRST ? "first selection of each expert"
                                        : "off";
}

static void print_stats(void) {
    k3_prefetch_stats s = k3_prefetch_get_stats();
    fprintf(stderr, "k3 prefetch: read-ahead %s (%s; model %.1f GB mapped, MemAvailable %.1f GB)\n",
            k3_readahead_name(s.readahead), P.enable < 0 ? "auto" : "set", s.mapped_bytes / 1e9,
            s.mem_available / 1e9);
    fprintf(stderr,
            "k3 prefetch: %llu MoE calls, %llu experts selected, %.1f MB read ahead, hit rate "
            "%.3f (%llu of %llu bytes resident), dense locked %.1f MB, experts locked %.1f MB, "
            "%llu re-rankings, %llu lock failures, pool CPU %.3f s\n",
            (unsigned long long)s.calls, (unsigned long long)s.experts, s.prefetch_bytes / 1e6,
            s.need_bytes ? (double)s.resident_bytes / (double)s.need_bytes : 0.0,
            (unsigned long long)s.resident_bytes, (unsigned long long)s.need_bytes,
            s.dense_locked / 1e6, s.experts_locked / 1e6, (unsigned long long)s.rebalances,
            (unsigned long long)s.lock_failures, s.pool_cpu_ns / 1e9);
}

static void init_once(void) {
    const char *e = getenv("K3_PREFETCH"), *b = getenv("K3_RAM_BUDGET"), *s;
    P.enable = !e || !*e ? -1 : strcmp(e, "0") != 0;
    if (b && *b && k3_prefetch_parse_size(b, &P.budget))
        fprintf(stderr, "k3: K3_RAM_BUDGET=%s is not a size (e.g. 20G); ignored\n", b);
    const char *rf = getenv("K3_ROUTES_FILE");
    if (rf && *rf && !(P.routes = fopen(rf, "w")))
        fprintf(stderr, "k3: K3_ROUTES_FILE=%s: cannot create\n", rf);
    s = getenv("K3_PREFETCH_STATS");
    if (s && *s && strcmp(s, "0")) {
        P.count_hits = 1;
        atexit(print_stats);
    }
}

static void *worker(void *arg) {
    (void)arg;
    pthread_mutex_lock(&P.mu);
    for (;;) {
        while (!P.count) pthread_cond_wait(&P.work, &P.mu);
        job j = P.q[P.head];
        P.head = (P.head + 1) % QCAP;
        P.count--;
        P.active++;
        pthread_mutex_unlock(&P.mu);
        uint64_t t0 = thread_cpu_ns();
        if (j.op == OP_WILLNEED) {
            madvise((void *)j.a, j.n, MADV_WILLNEED);
        } else if (mlock((void *)j.a, j.n)) {
            g_lock_fail++;
        }
        g_pool_ns += thread_cpu_ns() - t0;
        pthread_mutex_lock(&P.mu);
        P.active--;
        if (!P.count && !P.active) pthread_cond_broadcast(&P.idle);
    }
    return NULL;
}

/* Queue a job (P.mu held). A full queue drops read-ahead (it is only a hint). */
static void push(int op, uintptr_t a, size_t n) {
    if (!P.started) {
        for (int i = 0; i < NTHREADS; i++) {
            pthread_t t;
            if (!pthread_create(&t, NULL, worker, NULL)) pthread_detach(t), P.started++;
        }
        if (!P.started) return;
    }
    if (P.count == QCAP) return;
    P.q[(P.head + P.count) % QCAP] = (job){op, a, n};
    P.count++;
    pthread_cond_signal(&P.work);
}

static range page_range(const void *p, size_t n) {
    uintptr_t pg = (uintptr_t)page_size(), a = (uintptr_t)p & ~(pg - 1);
    uintptr_t b = ((uintptr_t)p + n + pg - 1) & ~(pg - 1);
    return (range){a, n ? b - a : 0};
}

/* The byte ranges of one expert of this rank: gate, up, down x codes/scales/biases. */
static int expert_ranges(const k3_moe_w *w, int e, range r[9]) {
    const k3_wmat *W[3] = {&w->eg[e], &w->eu[e], &w->ed[e]};
    int n = 0;
    for (int i = 0; i < 3; i++) {
        const k3_wmat *x = W[i];
        r[n++] = page_range(x->data, (size_t)x->rows * x->row_stride);
        if (x->scales) r[n++] = page_range(x->scales, (size_t)x->rows * x->scale_stride);
        if (x->biases) r[n++] = page_range(x->biases, (size_t)x->rows * x->bias_stride);
    }
    return n;
}

static uint64_t resident(range r) {
    size_t pages = r.n / (size_t)page_size();
    if (!pages) return 0;
    if (pages > P.vec_cap) {
        P.vec = k3_xrealloc(P.vec, pages);
        P.vec_cap = pages;
    }
    if (mincore((void *)r.a, r.n, P.vec)) return 0;
    uint64_t k = 0;
    for (size_t i = 0; i < pages; i++) k += P.vec[i] & 1;
    return k * (uint64_t)page_size();
}

/* Layer index of a tensor name ("...layers.<i>."), or -1. */
static int layer_of(const char *name) {
    const char *p = strstr(name, "layers.");
    return p ? atoi(p + 7) : -1;
}

/* MemAvailable of /proc/meminfo in bytes (reclaimable page cache included); 0 if unknown.
 * K3_PREFETCH_MEMAVAIL=SIZE stands in for it (tests of the auto mode). */
static uint64_t mem_available(void) {
    const char *o = getenv("K3_PREFETCH_MEMAVAIL");
    uint64_t v;
    if (o && *o && !k3_prefetch_parse_size(o, &v)) return v;
    return k3_proc_field("/proc/meminfo", "MemAvailable:") * 1024;
}

/* Auto read-ahead (K3_PREFETCH unset): every selection when the mapped
 * weights exceed what this machine can hold (MemAvailable counts the page
 * cache the model already occupies as available) or a RAM budget is set;
 * otherwise each expert only the first time it is chosen, which fills the
 * page cache ahead on a cold start and costs nothing once the model is in. */
static int readahead_mode(uint64_t mapped, uint64_t avail) {
    if (P.enable >= 0) return P.enable ? K3_READAHEAD_EVERY : K3_READAHEAD_OFF;
    if (P.budget || !avail || mapped > avail) return K3_READAHEAD_EVERY;
    return K3_READAHEAD_FIRST;
}

/* A new model: reset the counts; choose the read-ahead mode; lock its dense part up to the
 * budget. */
static void attach(const k3_model *m) {
    free(P.freq);
    free(P.locked);
    free(P.seen);
    P.m = m;
    P.nl = m->c->num_hidden_layers;
    P.E = m->c->num_experts;
    P.freq = k3_xcalloc((size_t)P.nl * (size_t)P.E + 1, sizeof *P.freq);
    P.locked = k3_xcalloc((size_t)P.nl * (size_t)P.E + 1, 1);
    P.seen = k3_xcalloc((size_t)P.nl * (size_t)P.E + 1, 1);
    P.calls_since = 0;
    P.st.mapped_bytes = 0;
    for (int i = 0; i < m->ck.st->nfiles; i++)
        if (m->ck.st->files[i].map) P.st.mapped_bytes += m->ck.st->files[i].size;
    P.st.mem_available = mem_available();
    P.st.readahead = readahead_mode(P.st.mapped_bytes, P.st.mem_available);
    P.st.dense_locked = P.st.experts_locked = 0;
    if (!P.budget) return;
    const k3_st *st = m->ck.st;
    for (int i = 0; i < st->n; i++) {
        const k3_tensor *t = &st->t[i];
        int l = layer_of(t->name);
        if (strstr(t->name, "switch_mlp") || strstr(t->name, ".experts.") ||
            (l >= 0 && (l < m->layer0 || l >= m->layer1)))
            continue;
        if (P.st.dense_locked + t->bytes > P.budget) continue;
        range r = page_range(t->data, t->bytes);
        push(OP_LOCK, r.a, r.n);
        P.st.dense_locked += t->bytes;
    }
}

static uint64_t expert_bytes(const k3_moe_w *w, int e) {
    range r[9];
    int n = expert_ranges(w, e, r);
    uint64_t b = 0;
    for (int i = 0; i < n; i++) b += r[i].n;
    return b;
}

static int by_freq_desc(const void *a, const void *b) {
    uint64_t fa = P.freq[*(const int *)a], fb = P.freq[*(const int *)b];
    if (fa != fb) return fa > fb ? -1 : 1;
    return *(const int *)a - *(const int *)b;
}

/* Lock the most routed-to experts that fit the budget left after the dense part. */
static void rebalance(void) {
    const k3_model *m = P.m;
    int n = P.nl * P.E, k = 0;
    int *order = k3_xmalloc(sizeof(int) * (size_t)(n ? n : 1));
    for (int i = 0; i < n; i++)
        if (P.freq[i]) order[k++] = i;
    qsort(order, (size_t)k, sizeof *order, by_freq_desc);
    uint8_t *want = k3_xcalloc((size_t)n + 1, 1);
    uint64_t room = P.budget > P.st.dense_locked ? P.budget - P.st.dense_locked : 0, used = 0;
    for (int i = 0; i < k; i++) {
        int l = order[i] / P.E, e = order[i] % P.E;
        uint64_t b = expert_bytes(&m->L[l].moe, e);
        if (used + b <= room) want[order[i]] = 1, used += b;
    }
    for (int i = 0; i < n; i++) {
        if (want[i] == P.locked[i]) continue;
        range r[9];
        int nr = expert_ranges(&m->L[i / P.E].moe, i % P.E, r);
        for (int j = 0; j < nr; j++) {
            if (want[i])
                push(OP_LOCK, r[j].a, r[j].n);
            else
                munlock((void *)r[j].a, r[j].n);
        }
        P.locked[i] = want[i];
    }
    P.st.experts_locked = used;
    P.st.rebalances++;
    free(order);
    free(want);
}

void k3_prefetch_route(const k3_model *m, const k3_moe_w *w, const int64_t *start) {
    pthread_once(&P.once, init_once);
    if (!P.enable && !P.budget && !P.count_hits && !P.routes) return;
    pthread_mutex_lock(&P.mu);
    if (P.m != m || P.nl != m->c->num_hidden_layers || P.E != m->c->num_experts) attach(m);
    int layer = (int)(((const char *)w - (const char *)&m->L[0].moe) / (ptrdiff_t)sizeof(k3_layer));
    if (layer < 0 || layer >= P.nl) layer = 0;
    P.st.calls++;
    if (P.routes) fprintf(P.routes, "layer %d:", layer);
    for (int e = 0; e < P.E; e++) {
        if (start[e + 1] <= start[e]) continue;
        size_t id = (size_t)layer * (size_t)P.E + (size_t)e;
        P.freq[id] += (uint64_t)(start[e + 1] - start[e]);
        if (P.routes) fprintf(P.routes, " %d", e);
        P.st.experts++;
        const int ahead = !P.locked[id] && (P.st.readahead == K3_READAHEAD_EVERY ||
                                            (P.st.readahead == K3_READAHEAD_FIRST && !P.seen[id]));
        P.seen[id] = 1;
        range r[9];
        int nr = expert_ranges(w, e, r);
        for (int i = 0; i < nr; i++) {
            if (P.count_hits) {
                P.st.need_bytes += r[i].n;
                P.st.resident_bytes += resident(r[i]);
            }
            if (!ahead) continue;
            for (size_t o = 0; o < r[i].n; o += PIECE) {
                size_t len = r[i].n - o < PIECE ? r[i].n - o : PIECE;
                push(OP_WILLNEED, r[i].a + o, len);
            }
            P.st.prefetch_bytes += r[i].n;
        }
    }
    if (P.routes) fputc('\n', P.routes);
    if (P.budget && ++P.calls_since >= (P.st.rebalances < 2 ? 8 : REBALANCE_EVERY)) {
        P.calls_since = 0;
        rebalance();
    }
    pthread_mutex_unlock(&P.mu);
}

void k3_prefetch_set(int enable, uint64_t ram_budget) {
    pthread_once(&P.once, init_once);
    pthread_mutex_lock(&P.mu);
    P.enable = enable < 0 ? -1 : enable != 0;
    P.budget = ram_budget;
    P.m = NULL; /* re-attach: the dense part is locked under the new budget */
    pthread_mutex_unlock(&P.mu);
}

k3_prefetch_stats k3_prefetch_get_stats(void) {
    pthread_mutex_lock(&P.mu);
    k3_prefetch_stats s = P.st;
    pthread_mutex_unlock(&P.mu);
    s.lock_failures = g_lock_fail;
    s.pool_cpu_ns = g_pool_ns;
    return s;
}

void k3_prefetch_reset_stats(void) {
    pthread_mutex_lock(&P.mu);
    P.st.calls = P.st.experts = P.st.need_bytes = P.st.resident_bytes = P.st.prefetch_bytes = 0;
    pthread_mutex_unlock(&P.mu);
    g_lock_fail = 0;
    g_pool_ns = 0;
}

void k3_prefetch_count_hits(int on) {
    pthread_once(&P.once, init_once);
    pthread_mutex_lock(&P.mu);
    P.count_hits = on;
    pthread_mutex_unlock(&P.mu);
}

void k3_prefetch_drain(void) {
    pthread_mutex_lock(&P.mu);
    while (P.count || P.active) pthread_cond_wait(&P.idle, &P.mu);
    pthread_mutex_unlock(&P.mu);
}
