/* api.c — the model's entry points of include/k3.h: load a checkpoint (this
 * process's slice of it), the model's facts, and sequences (create, clone,
 * reset, free). The forward pass is forward.c. Every call is first told to
 * the hooks table the model was loaded with (hooks.h), which under mpirun
 * replays it on the follower ranks. */
#include "base/err.h"
#include "base/mem.h"
#include "base/progress.h"
#include "model/hooks.h"
#include "model/model.h"
#include "model/parallel.h"

#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The table for the next load: a process setting, since the load hook decides
 * the slice before any model exists. */
static const k3_model_hooks *g_hooks;

void k3_model_set_hooks(const k3_model_hooks *h) {
    g_hooks = h;
}

/* Tell the table of model m (or of the next load) about a call. */
#define HOOK(h, fn, ...)                                                                           \
    do {                                                                                           \
        if ((h) && (h)->fn) (h)->fn((h)->ctx, __VA_ARGS__);                                        \
    } while (0)

static int check_opts(const k3_load_opts *o) {
    if (!o) return 0;
    if (o->threads < 0) return k3_seterr("threads must be >= 0");
    if (o->cache_type != K3_CACHE_F32 && o->cache_type != K3_CACHE_BF16)
        return k3_seterr("cache_type %d is neither K3_CACHE_F32 nor K3_CACHE_BF16", o->cache_type);
    return 0; /* tp_* / pp_* are checked against the config by k3_par_init */
}

static k3_model *load_model(const char *dir, const k3_load_opts *opts,
                            const k3_model_hooks *hooks) {
    if (check_opts(opts)) return NULL;
    if (opts && opts->threads > 0) omp_set_num_threads(opts->threads);
    int progress = opts && opts->progress && isatty(2); /* bars only on a terminal */
    k3_model *m = k3_xcalloc(1, sizeof *m);
    m->hooks = hooks;
    pthread_mutex_init(&m->spare_mu, NULL);
    if (k3_ckpt_open_progress(dir, progress, &m->ck)) {
        pthread_mutex_destroy(&m->spare_mu);
        free(m);
        return NULL;
    }
    m->c = &m->ck.cfg;
    m->cache_bf16 = opts && opts->cache_type == K3_CACHE_BF16;
    m->L = k3_xcalloc((size_t)m->c->num_hidden_layers, sizeof(k3_layer));
    int rc = k3_par_init(m, opts) || k3_load_globals(m); /* this process's slice (parallel.h) */
    k3_progress bar;
    k3_progress_start(&bar, progress && !rc, "mapping tensors", (uint64_t)(m->layer1 - m->layer0),
                      "layers", 1);
    for (int i = m->layer0; !rc && i < m->layer1; i++) {
        rc = k3_layer_load(m, i, &m->L[i]) || k3_par_slice_layer(m, i);
        k3_progress_update(&bar, (uint64_t)(i + 1 - m->layer0), NULL);
    }
    if (!rc)
        k3_progress_finish(&bar);
    else if (bar.on)
        fputc('\n', stderr);
    if (!rc) k3_par_skip_foreign_layers(m);
    if (!rc) rc = k3_ckpt_check_unused(&m->ck);
    if (rc) {
        k3_model_free(m);
        return NULL;
    }
    k3_par_finish(m);
    k3_count_bytes(m);
    return m;
}

/* Under mpirun's driver/follower mode (dist/replay.h) the hooks tell the other
 * ranks to do the same and give this rank its slice. */
k3_model *k3_model_load(const char *dir, const k3_load_opts *opts) {
    const k3_model_hooks *h = g_hooks;
    if (!h) return load_model(dir, opts, NULL);
    k3_load_opts slice;
    return h->loaded(h->ctx, load_model(dir, h->load(h->ctx, dir, opts, &slice), h));
}

void k3_model_free(k3_model *m) {
    if (!m) return;
    HOOK(m->hooks, free, m);
    for (int i = 0; m->L && i < m->c->num_hidden_layers; i++) k3_layer_free(&m->L[i]);
    free(m->L);
    free(m->final_norm);
    free(m->w_out);
    k3_workspace_free(&m->ws);
    k3_state_blocks_free(m);
    pthread_mutex_destroy(&m->spare_mu);
    k3_ckpt_close(&m->ck);
    free(m);
}

int k3_model_vocab(const k3_model *m) {
    return m->c->vocab_size;
}
int k3_model_eos(const k3_model *m) {
    return m->c->eos_token_id;
}
int k3_model_eos_ids(const k3_model *m, const int **ids) {
    *ids = m->c->eos_ids;
    return m->c->n_eos;
}
int k3_model_bos(const k3_model *m) {
    return m->c->bos_token_id;
}
uint64_t k3_model_weight_bytes(const k3_model *m) {
    return m->weight_bytes;
}
uint64_t k3_model_active_bytes(const k3_model *m) {
    return m->active_bytes;
}

/* Bytes of one routed expert of every MoE layer this process holds, summed. */
static uint64_t expert_bytes(const k3_model *m) {
    uint64_t b = 0;
    for (int i = m->layer0; i < m->layer1; i++) {
        const k3_layer *l = &m->L[i];
        if (l->is_moe)
            b += k3_wmat_bytes(&l->moe.eg[0]) + k3_wmat_bytes(&l->moe.eu[0]) +
                 k3_wmat_bytes(&l->moe.ed[0]);
    }
    return b;
}

void k3_model_get_info(const k3_model *m, k3_model_info *info) {
    *info = (k3_model_info){.ctx_train = m->c->max_position_embeddings,
                            .experts = m->c->num_experts,
                            .experts_per_token = m->c->num_experts_per_token,
                            .expert_bytes = expert_bytes(m)};
}

void k3_model_set_drop_pages(k3_model *m, int on) {
    m->drop_pages = on;
}

/* ---- sequences ---------------------------------------------------------- */

/* Point every KDA layer's conv and S into the state block (zeroed), and
 * empty every MLA cache. */
static void place_state(k3_seq *s) {
    const k3_config *c = s->m->c;
    float *p = s->state;
    for (int i = 0; i < c->num_hidden_layers; i++) {
        k3_layer_cache *lc = &s->lc[i];
        memset(lc, 0, sizeof *lc);
        if (!s->m->L[i].is_kda) continue;
        lc->conv = p, p += k3_kda_conv_floats(c);
        lc->S = p, p += k3_kda_S_floats(c);
    }
}

/* A sequence whose state block is zeroed (zero) or left as it was, for a
 * clone's copy to overwrite. */
static k3_seq *seq_make(k3_model *m, int zero) {
    const k3_config *c = m->c;
    k3_seq *s = k3_xcalloc(1, sizeof *s);
    s->m = m;
    s->lc = k3_xcalloc((size_t)c->num_hidden_layers, sizeof *s->lc);
    s->state_bytes = k3_model_state_bytes(m);
    s->state = k3_state_block_take(m); /* a kept block (states.c), or a fresh one */
    if (s->state && zero) memset(s->state, 0, s->state_bytes);
    if (!s->state) s->state = k3_big_calloc(s->state_bytes);
    if (!s->state) k3_die("k3_seq_new: %s", k3_errmsg());
    place_state(s);
    HOOK(m->hooks, seq_new, s);
    return s;
}

k3_seq *k3_seq_new(k3_model *m) {
    return seq_make(m, 1);
}

static void free_mla_caches(k3_seq *s) {
    for (int i = 0; i < s->m->c->num_hidden_layers; i++) {
        k3_big_free(s->lc[i].lat);
        k3_big_free(s->lc[i].kpe);
    }
}

void k3_seq_free(k3_seq *s) {
    if (!s) return;
    HOOK(s->m->hooks, seq_free, s);
    free_mla_caches(s);
    k3_spec_rec_free(s);
    k3_state_block_give(s->m, s->state, s->state_bytes);
    free(s->lc);
    free(s);
}

/* A buffer of cap elements of es bytes holding a copy of the first n of p (NULL if p is). */
static void *dup_elems(const void *p, int64_t cap, int64_t n, size_t es) {
    if (!p) return NULL;
    void *q = k3_big_calloc(es * (size_t)(cap ? cap : 1));
    if (!q) k3_die("k3_seq_clone: %s", k3_errmsg());
    memcpy(q, p, es * (size_t)n);
    return q;
}

k3_seq *k3_seq_clone_begin(const k3_seq *s) {
    k3_seq *d = seq_make(s->m, 0); /* k3_seq_clone_copy fills the whole block */
    HOOK(s->m->hooks, seq_clone, s, d);
    return d;
}

/* Pieces of a state block copied per OpenMP work item. */
#define CLONE_PIECE ((size_t)1 << 20)

static void clone_layer_cache(const k3_model *m, k3_layer_cache *b, const k3_layer_cache *a) {
    const k3_config *c = m->c;
    size_t es = k3_cache_elem_bytes(m);
    b->lat = dup_elems(a->lat, a->cap * c->kv_lora_rank, a->n * c->kv_lora_rank, es);
    b->kpe = dup_elems(a->kpe, a->cap * (c->qk_rope_head_dim ? c->qk_rope_head_dim : 1),
                       a->n * c->qk_rope_head_dim, es);
    b->n = a->n;
    b->cap = a->cap;
}

/* On the calling thread's OpenMP threads: 1 MiB pieces of the state block
 * (every KDA conv and S) and each layer's MLA cache are the work items. */
void k3_seq_clone_copy(k3_seq *d, const k3_seq *s) {
    const k3_config *c = s->m->c;
    const int64_t pieces = (int64_t)((s->state_bytes + CLONE_PIECE - 1) / CLONE_PIECE),
                  items = pieces + c->num_hidden_layers;
    d->len = s->len;
#pragma omp parallel for schedule(dynamic, 1)
    for (int64_t i = 0; i < items; i++) {
        if (i < pieces) {
            size_t at = (size_t)i * CLONE_PIECE, n = s->state_bytes - at;
            memcpy((char *)d->state + at, (const char *)s->state + at,
                   n < CLONE_PIECE ? n : CLONE_PIECE);
        } else {
            clone_layer_cache(s->m, &d->lc[i - pieces], &s->lc[i - pieces]);
        }
    }
}

k3_seq *k3_seq_clone(const k3_seq *s) {
    k3_seq *d = k3_seq_clone_begin(s);
    k3_seq_clone_copy(d, s);
    return d;
}

void k3_seq_reset(k3_seq *s) {
    HOOK(s->m->hooks, seq_reset, s);
    free_mla_caches(s);
    memset(s->state, 0, s->state_bytes);
    place_state(s);
    s->len = 0;
}

int64_t k3_seq_len(const k3_seq *s) {
    return s->len;
}

/* Bytes of one snapshot of s: its caches at their capacity, or (at >= 0) at exactly
 * `at` tokens, the least any snapshot of s's model at that length can cost. */
size_t k3_seq_state_bytes(const k3_seq *s, int64_t at) {
    const k3_config *c = s->m->c;
    int64_t P = (int64_t)c->kda_heads * c->kda_head_dim, hd = c->kda_head_dim;
    int64_t rope = c->qk_rope_head_dim ? c->qk_rope_head_dim : 1;
    size_t floats = 0, cached = 0; /* KDA state in f32; MLA cache elements */
    for (int i = 0; i < c->num_hidden_layers; i++) {
        const k3_layer_cache *l = &s->lc[i];
        if (l->conv) floats += (size_t)((c->kda_conv_kernel - 1) * 3 * P + 1);
        if (l->S) floats += (size_t)(c->kda_heads * hd * hd);
        const int64_t cap = at >= 0 ? at : l->cap;
        if (l->lat) cached += (size_t)(cap * c->kv_lora_rank);
        if (l->kpe) cached += (size_t)(cap * rope);
    }
    return sizeof *s + (size_t)c->num_hidden_layers * sizeof *s->lc + floats * sizeof(float) +
           cached * k3_cache_elem_bytes(s->m);
}
