/* pcache.c — prompt-cache snapshots in per-scope radix tries, LRU eviction (pcache.h).
 *
 * A node sits at a token depth; the edge from its parent carries the ids in
 * between. Nodes holding a snapshot are also listed in `snaps` (a handful:
 * each is a whole sequence state), whose use counters give the LRU order.
 * Evicting a snapshot prunes the nodes that no longer lead to one.
 *
 * Copies are queued in FIFO order: a snapshot's fill (from a live sequence
 * that is not stepped meanwhile) and a restore (a new sequence filled from a
 * snapshot). The cache's copier thread makes them one at a time on one core;
 * a caller of serve_pcache_wait makes the queued ones up to its own itself,
 * with its OpenMP threads (the scheduler's worker: its compute threads are
 * idle while it waits). Copies start in queue order, and a restore whose
 * snapshot is still being filled waits for that fill. A snapshot evicted while a
 * copy reads or fills it is parked until the copy is done and then freed by
 * the next call from the owning thread (sequences are created and freed there
 * only: in driver/follower mode that broadcasts a command). */
#include "serve/pcache.h"

#include <omp.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "base/mem.h"
#include "model/model.h"

/* One stored sequence state. Busy while the copier fills it or reads it. */
typedef struct snap {
    k3_seq *seq;
    float *logits; /* the last token's logits, or NULL */
    int filling;   /* its copy from the live sequence is not made yet */
    int readers;   /* restores queued that read it */
    struct snap *next_parked;
} snap;

typedef struct task {
    k3_seq *dst;
    const k3_seq *src;
    snap *fill, *from; /* insert: the snapshot filled; restore: the one read */
    serve_pcache_ticket *t;
    struct task *next;
} task;

typedef struct node {
    int32_t *lab; /* ids on the edge from the parent */
    int64_t nlab, depth;
    struct node *parent, **kid;
    int nkid, capkid;
    snap *sn; /* the snapshot at this depth, or NULL */
    size_t bytes;
    uint64_t last_use;
    struct scope *sc;
} node;

typedef struct scope {
    char *key;
    size_t len;
    node *root;
    struct scope *next;
} scope;

struct serve_pcache {
    pthread_mutex_t mu; /* guards everything below (stats readers are other threads) */
    pthread_cond_t work, done;
    scope *scopes;
    node **snaps; /* nodes holding a snapshot */
    int n, cap, vocab;
    uint64_t clock;
    serve_pcache_stats st;
    task *head, *tail; /* copies to make, FIFO */
    snap *parked;      /* evicted while busy: freed once idle */
    int stop, hold, running;
    pthread_t copier;
};

static void snap_free(snap *p) {
    k3_seq_free(p->seq);
    free(p->logits);
    free(p);
}

/* Free the parked snapshots no copy uses any more (the owning thread, under mu). */
static void reap_locked(serve_pcache *pc) {
    for (snap **pp = &pc->parked; *pp;) {
        snap *p = *pp;
        if (p->filling || p->readers) {
            pp = &p->next_parked;
            continue;
        }
        *pp = p->next_parked;
        snap_free(p);
    }
}

void serve_pcache_reap(serve_pcache *pc) {
    pthread_mutex_lock(&pc->mu);
    reap_locked(pc);
    pthread_mutex_unlock(&pc->mu);
}

/* The next copy, taken off the queue (under mu), or NULL when there is none
 * or it restores from a snapshot whose fill is still being made. */
static task *take_copy(serve_pcache *pc) {
    task *k = pc->head;
    if (!k || (k->from && k->from->filling)) return NULL;
    pc->head = k->next;
    if (!pc->head) pc->tail = NULL;
    return k;
}

/* Make copy k (entered and left under mu, which is released meanwhile). */
static void make_copy(serve_pcache *pc, task *k) {
    pthread_mutex_unlock(&pc->mu);
    k3_seq_clone_copy(k->dst, k->src); /* neither side is stepped or freed meanwhile */
    pthread_mutex_lock(&pc->mu);
    if (k->fill) k->fill->filling = 0;
    if (k->from) k->from->readers--;
    if (k->t) k->t->pending = 0;
    pc->st.copies++;
    pthread_cond_broadcast(&pc->done);
    pthread_cond_broadcast(&pc->work); /* a restore may have waited for this fill */
    free(k);
}

static void *copier_main(void *arg) {
    serve_pcache *pc = arg;
    /* one core: a copy made here runs beside the model's threads; a waiter
       that needs it sooner makes it with its own threads */
    omp_set_num_threads(1);
    pthread_mutex_lock(&pc->mu);
    for (;;) {
        task *k = NULL;
        while (!pc->stop && (pc->hold || !(k = take_copy(pc))))
            pthread_cond_wait(&pc->work, &pc->mu);
        if (!k && !(k = take_copy(pc))) {
            if (!pc->head) break;                  /* stopping, and nothing left to copy */
            pthread_cond_wait(&pc->done, &pc->mu); /* a waiter is making the fill */
            continue;
        }
        make_copy(pc, k);
    }
    pthread_mutex_unlock(&pc->mu);
    return NULL;
}

serve_pcache *serve_pcache_new(size_t budget_bytes, int vocab) {
    serve_pcache *pc = k3_xcalloc(1, sizeof *pc);
    pthread_mutex_init(&pc->mu, NULL);
    pthread_cond_init(&pc->work, NULL);
    pthread_cond_init(&pc->done, NULL);
    pc->st.budget = budget_bytes;
    pc->vocab = vocab;
    /* without a copier thread (budget 0, or it cannot start) copies are made inline */
    pc->running = budget_bytes && !pthread_create(&pc->copier, NULL, copier_main, pc);
    return pc;
}

void serve_pcache_hold(serve_pcache *pc, int hold) {
    pthread_mutex_lock(&pc->mu);
    pc->hold = hold;
    pthread_cond_broadcast(&pc->work);
    pthread_mutex_unlock(&pc->mu);
}

int serve_pcache_copying(serve_pcache *pc, const serve_pcache_ticket *t) {
    pthread_mutex_lock(&pc->mu);
    int p = t->pending;
    pthread_mutex_unlock(&pc->mu);
    return p;
}

void serve_pcache_wait(serve_pcache *pc, const serve_pcache_ticket *t) {
    pthread_mutex_lock(&pc->mu);
    while (t->pending) {
        task *k = take_copy(pc); /* queued ahead of ours, or ours: make it here */
        if (k)
            make_copy(pc, k);
        else
            pthread_cond_wait(&pc->done, &pc->mu); /* the copier is making it */
    }
    pthread_mutex_unlock(&pc->mu);
}

/* Queue the copy src -> dst (under mu); made inline when there is no copier. */
static void queue_copy(serve_pcache *pc, k3_seq *dst, const k3_seq *src, snap *fill, snap *from,
                       serve_pcache_ticket *t) {
    if (!pc->running) {
        k3_seq_clone_copy(dst, src);
        pc->st.copies++;
        if (t) t->pending = 0;
        return;
    }
    task *k = k3_xcalloc(1, sizeof *k);
    *k = (task){dst, src, fill, from, t, NULL};
    if (fill) fill->filling = 1;
    if (from) from->readers++;
    if (t) t->pending = 1;
    if (pc->tail)
        pc->tail->next = k;
    else
        pc->head = k;
    pc->tail = k;
    pthread_cond_signal(&pc->work);
}

static void node_free(node *x) {
    for (int i = 0; i < x->nkid; i++) node_free(x->kid[i]);
    if (x->sn) snap_free(x->sn); /* only when no copy is left (serve_pcache_free) */
    free(x->kid);
    free(x->lab);
    free(x);
}

void serve_pcache_free(serve_pcache *pc) {
    if (!pc) return;
    pthread_mutex_lock(&pc->mu);
    pc->stop = 1;
    pc->hold = 0;
    pthread_cond_broadcast(&pc->work);
    pthread_mutex_unlock(&pc->mu);
    if (pc->running) pthread_join(pc->copier, NULL); /* makes the copies still queued */
    reap_locked(pc);
    while (pc->scopes) {
        scope *sc = pc->scopes;
        pc->scopes = sc->next;
        node_free(sc->root);
        free(sc->key);
        free(sc);
    }
    free(pc->snaps);
    pthread_mutex_destroy(&pc->mu);
    pthread_cond_destroy(&pc->work);
    pthread_cond_destroy(&pc->done);
    free(pc);
}

static scope *find_scope(serve_pcache *pc, const char *key, size_t len, int create) {
    for (scope *sc = pc->scopes; sc; sc = sc->next)
        if (sc->len == len && (!len || !memcmp(sc->key, key, len))) return sc;
    if (!create) return NULL;
    scope *sc = k3_xcalloc(1, sizeof *sc);
    sc->key = k3_xmalloc(len + 1);
    if (len) memcpy(sc->key, key, len);
    sc->len = len;
    sc->root = k3_xcalloc(1, sizeof *sc->root);
    sc->root->sc = sc;
    sc->next = pc->scopes;
    pc->scopes = sc;
    pc->st.scopes++;
    return sc;
}

static void drop_scope(serve_pcache *pc, scope *sc) {
    for (scope **p = &pc->scopes; *p; p = &(*p)->next)
        if (*p == sc) {
            *p = sc->next;
            break;
        }
    node_free(sc->root);
    free(sc->key);
    free(sc);
    pc->st.scopes--;
}

/* The child of x whose edge starts with id, or NULL. */
static node *child(const node *x, int32_t id) {
    for (int i = 0; i < x->nkid; i++)
        if (x->kid[i]->lab[0] == id) return x->kid[i];
    return NULL;
}

static void add_kid(node *x, node *k) {
    if (x->nkid == x->capkid) {
        x->capkid = x->capkid ? 2 * x->capkid : 2;
        x->kid = k3_xrealloc(x->kid, sizeof *x->kid * (size_t)x->capkid);
    }
    x->kid[x->nkid++] = k;
    k->parent = x;
    k->sc = x->sc;
}

static void remove_kid(node *x, node *k) {
    for (int i = 0; i < x->nkid; i++)
        if (x->kid[i] == k) {
            x->kid[i] = x->kid[--x->nkid];
            return;
        }
}

/* The node at depth n on the path of ids, created (splitting an edge) if needed. */
static node *descend_create(node *x, const int32_t *ids, int64_t n) {
    while (x->depth < n) {
        node *k = child(x, ids[x->depth]);
        if (!k) {
            node *leaf = k3_xcalloc(1, sizeof *leaf);
            leaf->nlab = n - x->depth;
            leaf->lab = k3_xmalloc(sizeof *leaf->lab * (size_t)leaf->nlab);
            memcpy(leaf->lab, ids + x->depth, sizeof *leaf->lab * (size_t)leaf->nlab);
            leaf->depth = n;
            add_kid(x, leaf);
            return leaf;
        }
        int64_t m = 0, lim = n - x->depth < k->nlab ? n - x->depth : k->nlab;
        while (m < lim && k->lab[m] == ids[x->depth + m]) m++;
        if (m == k->nlab) {
            x = k;
            continue;
        }
        /* split k's edge after m ids: x -> mid -> k */
        node *mid = k3_xcalloc(1, sizeof *mid);
        mid->nlab = m;
        mid->lab = k3_xmalloc(sizeof *mid->lab * (size_t)m);
        memcpy(mid->lab, k->lab, sizeof *mid->lab * (size_t)m);
        mid->depth = x->depth + m;
        remove_kid(x, k);
        add_kid(x, mid);
        memmove(k->lab, k->lab + m, sizeof *k->lab * (size_t)(k->nlab - m));
        k->nlab -= m;
        add_kid(mid, k);
        x = mid;
    }
    return x;
}

k3_seq *serve_pcache_lookup_async(serve_pcache *pc, const char *key, size_t key_len,
                                  const int32_t *ids, int64_t n, float *logits, int64_t *matched,
                                  serve_pcache_ticket *t) {
    pthread_mutex_lock(&pc->mu);
    reap_locked(pc);
    pc->st.lookups++;
    *matched = 0;
    t->pending = 0;
    node *best = NULL, *x = NULL;
    scope *sc = pc->st.budget ? find_scope(pc, key, key_len, 0) : NULL;
    if (sc) x = sc->root;
    while (x) {
        if (x->sn && (x->depth < n || (x->depth == n && x->sn->logits))) best = x;
        if (x->depth >= n) break;
        node *k = child(x, ids[x->depth]);
        if (!k || x->depth + k->nlab > n ||
            memcmp(k->lab, ids + x->depth, sizeof *ids * (size_t)k->nlab))
            break;
        x = k;
    }
    k3_seq *s = NULL;
    if (best) {
        s = k3_seq_clone_begin(best->sn->seq);
        queue_copy(pc, s, best->sn->seq, NULL, best->sn, t);
        best->last_use = ++pc->clock;
        *matched = best->depth;
        if (best->depth == n) memcpy(logits, best->sn->logits, sizeof(float) * (size_t)pc->vocab);
        pc->st.hits++;
        pc->st.tokens_reused += (uint64_t)best->depth;
    }
    pthread_mutex_unlock(&pc->mu);
    return s;
}

k3_seq *serve_pcache_lookup(serve_pcache *pc, const char *key, size_t key_len, const int32_t *ids,
                            int64_t n, float *logits, int64_t *matched) {
    serve_pcache_ticket t;
    k3_seq *s = serve_pcache_lookup_async(pc, key, key_len, ids, n, logits, matched, &t);
    serve_pcache_wait(pc, &t);
    return s;
}

/* Bytes of one snapshot of s: its caches at their capacity, or (at >= 0) at exactly
 * `at` tokens, the least any snapshot of s's model at that length can cost. */
static size_t seq_bytes(const k3_seq *s, int64_t at) {
    const k3_config *c = s->m->c;
    int64_t P = (int64_t)c->kda_heads * c->kda_head_dim, hd = c->kda_head_dim;
    int64_t rope = c->qk_rope_head_dim ? c->qk_rope_head_dim : 1;
    size_t floats = 0, elems = 0; /* state floats, MLA cache elements (f32 or bf16) */
    for (int i = 0; i < c->num_hidden_layers; i++) {
        const k3_layer_cache *l = &s->lc[i];
        if (l->conv) floats += (size_t)((c->kda_conv_kernel - 1) * 3 * P + 1);
        if (l->S) floats += (size_t)(c->kda_heads * hd * hd);
        const int64_t cap = at >= 0 ? at : l->cap;
        if (l->lat) elems += (size_t)(cap * c->kv_lora_rank);
        if (l->kpe) elems += (size_t)(cap * rope);
    }
    return sizeof *s + (size_t)c->num_hidden_layers * sizeof *s->lc + floats * sizeof(float) +
           elems * k3_cache_elem_bytes(s->m);
}

size_t serve_pcache_seq_bytes(const k3_seq *s) {
    return seq_bytes(s, -1);
}

/* Free x's snapshot; drop x and its ancestors while they lead to nothing. */
static void unsnap(serve_pcache *pc, node *x) {
    for (int i = 0; i < pc->n; i++)
        if (pc->snaps[i] == x) {
            pc->snaps[i] = pc->snaps[--pc->n];
            break;
        }
    pc->st.bytes -= x->bytes;
    pc->st.entries = pc->n;
    if (x->sn->filling || x->sn->readers) { /* a copy still uses it: park it */
        x->sn->next_parked = pc->parked;
        pc->parked = x->sn;
    } else {
        snap_free(x->sn);
    }
    x->sn = NULL;
    x->bytes = 0;
    scope *sc = x->sc;
    while (x->parent && !x->sn && !x->nkid) {
        node *p = x->parent;
        remove_kid(p, x);
        node_free(x);
        x = p;
    }
    if (!sc->root->nkid && !sc->root->sn) drop_scope(pc, sc);
}

static void evict_to_fit(serve_pcache *pc, size_t need) {
    while (pc->n && pc->st.bytes + need > pc->st.budget) {
        int lru = 0;
        for (int i = 1; i < pc->n; i++)
            if (pc->snaps[i]->last_use < pc->snaps[lru]->last_use) lru = i;
        unsnap(pc, pc->snaps[lru]);
        pc->st.evictions++;
    }
}

/* The snapshot stored at exactly ids[0..n) in scope, or NULL (under the mutex). */
static node *stored(serve_pcache *pc, const char *key, size_t key_len, const int32_t *ids,
                    int64_t n) {
    scope *sc = find_scope(pc, key, key_len, 0);
    for (node *x = sc ? sc->root : NULL; x;) {
        if (x->depth == n) return x->sn ? x : NULL;
        node *k = child(x, ids[x->depth]);
        if (!k || x->depth + k->nlab > n ||
            memcmp(k->lab, ids + x->depth, sizeof *ids * (size_t)k->nlab))
            return NULL;
        x = k;
    }
    return NULL;
}

int serve_pcache_would_keep(serve_pcache *pc, const char *key, size_t key_len, const int32_t *ids,
                            int64_t n, const k3_seq *like, int with_logits) {
    if (pc->st.budget == 0 || n <= 0) return 0;
    const size_t least = seq_bytes(like, n) + (size_t)n * sizeof *ids +
                         (with_logits ? sizeof(float) * (size_t)pc->vocab : 0);
    pthread_mutex_lock(&pc->mu);
    node *old = stored(pc, key, key_len, ids, n);
    const int keep = !(old && (old->sn->logits || !with_logits)) && least <= pc->st.budget;
    pthread_mutex_unlock(&pc->mu);
    return keep;
}

/* Store seq's state at ids[0..n) in scope: a copy filled by the copier
 * (take = 0; *t pending until then), or seq itself (take = 1: the cache owns
 * it, or frees it when not kept). */
static int insert(serve_pcache *pc, const char *key, size_t key_len, const int32_t *ids, int64_t n,
                  k3_seq *seq, const float *logits, int take, serve_pcache_ticket *t) {
    if (t) t->pending = 0;
    if (pc->st.budget == 0 || n <= 0) {
        if (take) k3_seq_free(seq);
        return 0;
    }
    pthread_mutex_lock(&pc->mu);
    reap_locked(pc);
    node *old = stored(pc, key, key_len, ids, n);
    size_t bytes = serve_pcache_seq_bytes(seq) + (size_t)n * sizeof *ids +
                   (logits ? sizeof(float) * (size_t)pc->vocab : 0);
    if ((old && (old->sn->logits || !logits)) || bytes > pc->st.budget) {
        if (old) old->last_use = ++pc->clock; /* the same state: no second copy */
        pthread_mutex_unlock(&pc->mu);
        if (take) k3_seq_free(seq);
        return 0;
    }
    if (old) unsnap(pc, old); /* replaced by one with logits */
    evict_to_fit(pc, bytes);
    node *x = descend_create(find_scope(pc, key, key_len, 1)->root, ids, n);
    x->sn = k3_xcalloc(1, sizeof *x->sn);
    if (take) {
        x->sn->seq = seq;
    } else {
        x->sn->seq = k3_seq_clone_begin(seq);
        queue_copy(pc, x->sn->seq, seq, x->sn, NULL, t);
    }
    if (logits) {
        x->sn->logits = k3_xmalloc(sizeof(float) * (size_t)pc->vocab);
        memcpy(x->sn->logits, logits, sizeof(float) * (size_t)pc->vocab);
    }
    x->bytes = bytes;
    x->last_use = ++pc->clock;
    if (pc->n == pc->cap) {
        pc->cap = pc->cap ? pc->cap * 2 : 8;
        pc->snaps = k3_xrealloc(pc->snaps, (size_t)pc->cap * sizeof *pc->snaps);
    }
    pc->snaps[pc->n++] = x;
    pc->st.bytes += bytes;
    pc->st.entries = pc->n;
    pc->st.snapshots++;
    int queued = t && t->pending;
    pthread_mutex_unlock(&pc->mu);
    return queued;
}

int serve_pcache_insert_async(serve_pcache *pc, const char *key, size_t key_len, const int32_t *ids,
                              int64_t n, const k3_seq *seq, const float *logits,
                              serve_pcache_ticket *t) {
    return insert(pc, key, key_len, ids, n, (k3_seq *)seq, logits, 0, t);
}

int serve_pcache_insert(serve_pcache *pc, const char *key, size_t key_len, const int32_t *ids,
                        int64_t n, const k3_seq *seq, const float *logits) {
    serve_pcache_ticket t;
    insert(pc, key, key_len, ids, n, (k3_seq *)seq, logits, 0, &t);
    serve_pcache_wait(pc, &t);
    return 0;
}

void serve_pcache_insert_take(serve_pcache *pc, const char *key, size_t key_len, const int32_t *ids,
                              int64_t n, k3_seq *seq, const float *logits) {
    insert(pc, key, key_len, ids, n, seq, logits, 1, NULL);
}

serve_pcache_stats serve_pcache_get_stats(serve_pcache *pc) {
    pthread_mutex_lock(&pc->mu);
    serve_pcache_stats s = pc->st;
    pthread_mutex_unlock(&pc->mu);
    return s;
}
