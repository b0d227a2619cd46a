/* pcache.c — prompt-cache snapshots with LRU eviction (pcache.h).
 *
 * A handful of entries at most (each is a whole sequence state), so lookups
 * are a linear scan comparing id prefixes; the LRU order is a use counter. */
#include "serve/pcache.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "base/mem.h"
#include "model/model.h"

typedef struct {
    int32_t *ids;
    int64_t n;
    k3_seq *seq;
    size_t bytes;
    uint64_t last_use;
} entry;

struct serve_pcache {
    pthread_mutex_t mu; /* guards everything below (stats readers are other threads) */
    entry *e;
    int n, cap;
    uint64_t clock;
    serve_pcache_stats st;
};

serve_pcache *serve_pcache_new(size_t budget_bytes) {
    serve_pcache *pc = k3_xcalloc(1, sizeof *pc);
    pthread_mutex_init(&pc->mu, NULL);
    pc->st.budget = budget_bytes;
    return pc;
}

static void drop(serve_pcache *pc, int i) {
    pc->st.bytes -= pc->e[i].bytes;
    k3_seq_free(pc->e[i].seq);
    free(pc->e[i].ids);
    pc->e[i] = pc->e[--pc->n];
    pc->st.entries = pc->n;
}

void serve_pcache_free(serve_pcache *pc) {
    if (!pc) return;
    while (pc->n) drop(pc, pc->n - 1);
    free(pc->e);
    pthread_mutex_destroy(&pc->mu);
    free(pc);
}

static int is_prefix(const entry *en, const int32_t *ids, int64_t n) {
    return en->n < n && !memcmp(en->ids, ids, (size_t)en->n * sizeof *ids);
}

k3_seq *serve_pcache_lookup(serve_pcache *pc, const int32_t *ids, int64_t n, int64_t *matched) {
    pthread_mutex_lock(&pc->mu);
    pc->st.lookups++;
    int best = -1;
    for (int i = 0; i < pc->n; i++)
        if (is_prefix(&pc->e[i], ids, n) && (best < 0 || pc->e[i].n > pc->e[best].n)) best = i;
    k3_seq *s = NULL;
    *matched = 0;
    if (best >= 0) {
        s = k3_seq_clone(pc->e[best].seq);
        if (s) {
            pc->e[best].last_use = ++pc->clock;
            *matched = pc->e[best].n;
            pc->st.hits++;
            pc->st.tokens_reused += (uint64_t)pc->e[best].n;
        } else {
            *matched = -1;
        }
    }
    pthread_mutex_unlock(&pc->mu);
    return s;
}

/* Bytes a sequence's caches hold: KDA conv + recurrent state, MLA latent
 * and rope-key rows at their allocated capacity. Read from the engine's
 * internal layout (model/model.h) until k3.h offers a k3_seq_bytes. */
static size_t seq_bytes(const k3_seq *s) {
    const k3_config *c = s->m->c;
    int64_t P = (int64_t)c->kda_heads * c->kda_head_dim, hd = c->kda_head_dim;
    int64_t rope = c->qk_rope_head_dim ? c->qk_rope_head_dim : 1;
    size_t floats = 0;
    for (int i = 0; i < c->num_hidden_layers; i++) {
        const k3_layer_cache *l = &s->lc[i];
        if (l->conv) floats += (size_t)((c->kda_conv_kernel - 1) * 3 * P + 1);
        if (l->S) floats += (size_t)(c->kda_heads * hd * hd);
        if (l->lat) floats += (size_t)(l->cap * c->kv_lora_rank);
        if (l->kpe) floats += (size_t)(l->cap * rope);
    }
    return sizeof *s + (size_t)c->num_hidden_layers * sizeof *s->lc + floats * sizeof(float);
}

static void evict_to_fit(serve_pcache *pc, size_t need) {
    while (pc->n && pc->st.bytes + need > pc->st.budget) {
        int lru = 0;
        for (int i = 1; i < pc->n; i++)
            if (pc->e[i].last_use < pc->e[lru].last_use) lru = i;
        drop(pc, lru);
        pc->st.evictions++;
    }
}

int serve_pcache_insert(serve_pcache *pc, const int32_t *ids, int64_t n, const k3_seq *seq) {
    if (pc->st.budget == 0 || n <= 0) return 0;
    k3_seq *snap = k3_seq_clone(seq);
    if (!snap) return -1;
    size_t bytes = seq_bytes(snap) + (size_t)n * sizeof *ids;
    pthread_mutex_lock(&pc->mu);
    for (int i = 0; i < pc->n; i++)
        if (pc->e[i].n == n && !memcmp(pc->e[i].ids, ids, (size_t)n * sizeof *ids)) {
            drop(pc, i);
            break;
        }
    if (bytes > pc->st.budget) {
        pthread_mutex_unlock(&pc->mu);
        k3_seq_free(snap);
        return 0;
    }
    evict_to_fit(pc, bytes);
    if (pc->n == pc->cap) {
        pc->cap = pc->cap ? pc->cap * 2 : 8;
        pc->e = k3_xrealloc(pc->e, (size_t)pc->cap * sizeof *pc->e);
    }
    entry *en = &pc->e[pc->n++];
    en->ids = k3_xmalloc((size_t)n * sizeof *ids);
    memcpy(en->ids, ids, (size_t)n * sizeof *ids);
    en->n = n;
    en->seq = snap;
    en->bytes = bytes;
    en->last_use = ++pc->clock;
    pc->st.bytes += bytes;
    pc->st.entries = pc->n;
    pthread_mutex_unlock(&pc->mu);
    return 0;
}

serve_pcache_stats serve_pcache_get_stats(serve_pcache *pc) {
    pthread_mutex_lock(&pc->mu);
    serve_pcache_stats s = pc->st;
    pthread_mutex_unlock(&pc->mu);
    return s;
}
