/* model.c — the public API (include/k3.h): load a checkpoint, create sequences,
 * and the forward pass in the order it runs (spec §2.1–2.2):
 *   embed → for each layer { AttnRes mix → norm → KDA|MLA → AttnRes mix → norm →
 *   dense MLP|MoE } → final AttnRes mix → final norm → lm_head. */
#include "base/err.h"
#include "base/mem.h"
#include "base/par.h"
#include "base/progress.h"
#include "kernels/matmul.h"
#include "model/model.h"
#include "model/ops.h"
#include "model/follow.h"
#include "model/parallel.h"

#include <omp.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static int load_globals(k3_model *m) {
    k3_ckpt *ck = &m->ck;
    const k3_config *c = m->c;
    int64_t D = c->hidden_size, V = c->vocab_size;
    if (k3_ckpt_linear(ck, "model.embed_tokens", V, D, &m->embed)) return -1;
    if (c->tie_word_embeddings)
        m->head = m->embed;
    else if (k3_ckpt_linear(ck, "lm_head", V, D, &m->head))
        return -1;
    m->final_norm = k3_xcalloc((size_t)D, sizeof(float));
    if (k3_ckpt_vec(ck, "model.norm.weight", D, m->final_norm)) return -1;
    if (!c->attn_res_block_size) return 0;
    m->w_out = k3_xcalloc((size_t)D, sizeof(float));
    float *p = k3_xcalloc((size_t)D, sizeof(float));
    int rc = k3_ckpt_vec(ck, "model.output_attn_res_norm.weight", D, m->w_out) ||
             k3_ckpt_vec(ck, "model.output_attn_res_proj.weight", D, p);
    for (int64_t d = 0; d < D; d++) m->w_out[d] *= p[d];
    free(p);
    return rc ? -1 : 0;
}

/* Bytes of every Linear, and of what one decoded token reads (top-k experts only). */
static void count_bytes(k3_model *m) {
    uint64_t all =
        k3_wmat_bytes(&m->embed) + (m->c->tie_word_embeddings ? 0 : k3_wmat_bytes(&m->head));
    uint64_t act = k3_wmat_bytes(&m->head);
    for (int i = 0; i < m->c->num_hidden_layers; i++) {
        const k3_layer *l = &m->L[i];
        const k3_wmat *ws[] = {
            &l->kda.q,          &l->kda.k,      &l->kda.v,           &l->kda.fa,
            &l->kda.fb,         &l->kda.b,      &l->kda.g,           &l->kda.ga,
            &l->kda.gb,         &l->kda.o,      &l->mla.qa,          &l->mla.qb,
            &l->mla.q,          &l->mla.kva,    &l->mla.g,           &l->mla.o,
            &l->mlp.gate,       &l->mlp.up,     &l->mlp.down,        &l->moe.router,
            &l->moe.lat_down,   &l->moe.lat_up, &l->moe.shared.gate, &l->moe.shared.up,
            &l->moe.shared.down};
        uint64_t b = 0;
        for (size_t k = 0; k < sizeof ws / sizeof ws[0]; k++) b += k3_wmat_bytes(ws[k]);
        for (int h = 0; !l->is_kda && l->mla.uk && h < m->c->num_attention_heads; h++)
            b += k3_wmat_bytes(&l->mla.uk[h]) + k3_wmat_bytes(&l->mla.uv[h]);
        uint64_t e1 = 0;
        if (l->is_moe) {
            e1 = k3_wmat_bytes(&l->moe.eg[0]) + k3_wmat_bytes(&l->moe.eu[0]) +
                 k3_wmat_bytes(&l->moe.ed[0]);
            all += e1 * (uint64_t)m->c->num_experts;
        }
        all += b;
        act += b + e1 * (uint64_t)m->c->num_experts_per_token;
    }
    m->weight_bytes = all;
    m->active_bytes = act;
}

static int check_opts(const k3_load_opts *o) {
    if (!o) return 0;
    if (o->threads < 0) return k3_seterr("threads must be >= 0");
    return 0; /* tp_* / pp_* are checked against the config by k3_par_init */
}

static k3_model *load_model(const char *dir, const k3_load_opts *opts) {
    if (check_opts(opts)) return NULL;
    if (opts && opts->threads > 0) omp_set_num_threads(opts->threads);
    int progress = opts && opts->progress && isatty(2); /* bars only on a terminal */
    k3_model *m = k3_xcalloc(1, sizeof *m);
    pthread_mutex_init(&m->spare_mu, NULL);
    if (k3_ckpt_open_progress(dir, progress, &m->ck)) {
        pthread_mutex_destroy(&m->spare_mu);
        free(m);
        return NULL;
    }
    m->c = &m->ck.cfg;
    m->L = k3_xcalloc((size_t)m->c->num_hidden_layers, sizeof(k3_layer));
    int rc = k3_par_init(m, opts) || load_globals(m); /* this process's slice (parallel.h) */
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
    count_bytes(m);
    return m;
}

/* Under mpirun's driver/follower mode (follow.h) the hooks tell the other ranks
 * to do the same and give this rank its slice; otherwise they do nothing. */
k3_model *k3_model_load(const char *dir, const k3_load_opts *opts) {
    k3_load_opts slice;
    return k3_par_hook_loaded(load_model(dir, k3_par_hook_load(dir, opts, &slice)));
}

void k3_model_free(k3_model *m) {
    if (!m) return;
    k3_par_hook_free(m);
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
    k3_par_hook_seq_new(s);
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
    k3_par_hook_seq_free(s);
    free_mla_caches(s);
    k3_spec_rec_free(s);
    k3_state_block_give(s->m, s->state, s->state_bytes);
    free(s->lc);
    free(s);
}

/* A buffer of cap floats holding a copy of the first n of p (NULL if p is). */
static void *dup_floats(const float *p, int64_t cap, int64_t n) {
    if (!p) return NULL;
    float *q = k3_big_calloc(sizeof(float) * (size_t)(cap ? cap : 1));
    if (!q) k3_die("k3_seq_clone: %s", k3_errmsg());
    memcpy(q, p, sizeof(float) * (size_t)n);
    return q;
}

k3_seq *k3_seq_clone_begin(const k3_seq *s) {
    k3_seq *d = seq_make(s->m, 0); /* k3_seq_clone_copy fills the whole block */
    k3_par_hook_seq_clone(s, d);
    return d;
}

/* Pieces of a state block copied per OpenMP work item. */
#define CLONE_PIECE ((size_t)1 << 20)

static void clone_layer_cache(const k3_config *c, k3_layer_cache *b, const k3_layer_cache *a) {
    b->lat = dup_floats(a->lat, a->cap * c->kv_lora_rank, a->n * c->kv_lora_rank);
    b->kpe = dup_floats(a->kpe, a->cap * (c->qk_rope_head_dim ? c->qk_rope_head_dim : 1),
                        a->n * c->qk_rope_head_dim);
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
            clone_layer_cache(c, &d->lc[i - pieces], &s->lc[i - pieces]);
        }
    }
}

k3_seq *k3_seq_clone(const k3_seq *s) {
    k3_seq *d = k3_seq_clone_begin(s);
    k3_seq_clone_copy(d, s);
    return d;
}

void k3_seq_reset(k3_seq *s) {
    k3_par_hook_seq_reset(s);
    free_mla_caches(s);
    memset(s->state, 0, s->state_bytes);
    place_state(s);
    s->len = 0;
}

int64_t k3_seq_len(const k3_seq *s) {
    return s->len;
}

/* ---- workspace ------------------------------------------------------------ */

static atomic_uint_fast64_t g_grows;

void k3_workspace_count_grow(void) {
    atomic_fetch_add(&g_grows, 1);
}

uint64_t k3_workspace_grows(void) {
    return (uint64_t)atomic_load(&g_grows);
}

void *k3_grow(k3_grow_buf *b, size_t bytes) {
    if (bytes <= b->cap && b->p) return b->p;
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < bytes) cap *= 2; /* doubling: a few grows, then none */
    free(b->p);
    b->p = aligned_alloc(64, cap);
    if (!b->p) {
        fprintf(stderr, "k3: out of memory (workspace of %zu bytes)\n", cap);
        abort();
    }
    b->cap = cap;
    k3_workspace_count_grow();
    return b->p;
}

void k3_workspace_free(k3_workspace *ws) {
    free(ws->act.p);
    free(ws->blocks.p);
    for (int i = 0; i < K3_MLA_WS_N; i++) free(ws->mla[i].p);
    memset(ws, 0, sizeof *ws);
}

/* The model's workspace, or (when another thread's pass holds it) a fresh
 * one for this pass alone. */
static k3_workspace *ws_acquire(k3_model *m) {
    if (!atomic_exchange(&m->ws_busy, 1)) return &m->ws;
    return k3_xcalloc(1, sizeof(k3_workspace));
}

static void ws_release(k3_model *m, k3_workspace *ws) {
    if (ws == &m->ws) {
        atomic_store(&m->ws_busy, 0);
        return;
    }
    k3_workspace_free(ws);
    free(ws);
}

/* ---- forward -------------------------------------------------------------- */

/* Below this many floats the element-wise loops stay on one thread. */
#define PAR_MIN_FLOATS 32768

/* The [T, D] buffers of one pass: x (residual stream), h (mixer/FFN input),
 * a (block output), and free ones that become AttnRes block snapshots. */
typedef struct {
    float *x, *h, *a;
    float **spare;
    int nspare;
} fwd_bufs;

/* x += a over n floats. */
static void add_into(float *x, const float *a, int64_t n) {
    if (!k3_par_worth(n >= PAR_MIN_FLOATS)) { /* no region of one thread (base/par.h) */
        for (int64_t j = 0; j < n; j++) x[j] += a[j];
        return;
    }
#pragma omp parallel for schedule(static)
    for (int64_t j = 0; j < n; j++) x[j] += a[j];
}

/* The input of a mixer or FFN: the AttnRes mix of the blocks and x, normalized. */
static void block_input(const k3_config *c, float *const *R, int nR, const float *x,
                        const float *w_res, const float *norm, int64_t T, float *h) {
    int64_t D = c->hidden_size;
    if (c->attn_res_block_size > 0) {
        k3_attnres_mix(R, nR, x, w_res, T, D, c->rms_norm_eps, h);
        k3_rmsnorm_rows(h, T, D, norm, c->rms_norm_eps, h);
    } else {
        k3_rmsnorm_rows(x, T, D, norm, c->rms_norm_eps, h);
    }
}

/* The caches of layer i of the pass's sequences, as the mixers take them. */
typedef struct {
    k3_seq *const *seq; /* [n] */
    const int64_t *off; /* [n + 1] row offsets */
    int n;
    k3_layer_cache **lc; /* [n] scratch: layer i's caches */
    k3_seq *const *snap; /* NULL, or [n]: snapshots taken inside the pass (k3_batch_item) */
    const int64_t *snap_at;
    k3_layer_cache **snap_lc; /* [n] scratch when snap: layer i's caches of the snapshots */
} fwd_seqs;

static k3_segs layer_segs(const fwd_seqs *fs, int i) {
    for (int s = 0; s < fs->n; s++) fs->lc[s] = &fs->seq[s]->lc[i];
    if (!fs->snap) return (k3_segs){fs->n, fs->lc, fs->off, NULL, NULL};
    for (int s = 0; s < fs->n; s++) fs->snap_lc[s] = fs->snap[s] ? &fs->snap[s]->lc[i] : NULL;
    return (k3_segs){fs->n, fs->lc, fs->off, fs->snap_lc, fs->snap_at};
}

/* Mixer then FFN of layer i on b->x [T, D], with AttnRes block list R. At a
 * block start the raw x becomes a snapshot and the mixer output the new x
 * (buffers change hands, nothing is copied). */
static int run_layer(const k3_model *m, const fwd_seqs *fs, int i, fwd_bufs *b, int64_t T,
                     float **R, int *nR, int mla_path, k3_workspace *ws) {
    const k3_config *c = m->c;
    const k3_layer *l = &m->L[i];
    int64_t TD = T * c->hidden_size;
    k3_segs sg = layer_segs(fs, i);
    block_input(c, R, *nR, b->x, l->w_attn, l->in_norm, T, b->h);
    int rc = 0;
    if (l->is_kda)
        k3_kda_forward(m, l, &sg, b->h, T, b->a);
    else
        rc = k3_mla_forward(m, l, &sg, b->h, T, b->a, mla_path, ws);
    if (c->attn_res_block_size > 0 && i % c->attn_res_block_size == 0) {
        R[(*nR)++] = b->x; /* block start: snapshot the raw x_in, the partial restarts at a */
        b->x = b->a;
        b->a = b->spare[--b->nspare];
    } else {
        add_into(b->x, b->a, TD);
    }
    block_input(c, R, *nR, b->x, l->w_mlp, l->post_norm, T, b->h);
    if (l->is_moe)
        k3_moe_forward(m, &l->moe, b->h, T, b->a);
    else
        k3_mlp_forward(m, &l->mlp, b->h, T, b->a);
    add_into(b->x, b->a, TD);
    return rc;
}

static int check_tokens(const k3_model *m, const int32_t *tok, int64_t n) {
    if (n < 1) return k3_seterr("k3_forward: need at least one token");
    for (int64_t t = 0; t < n; t++)
        if (tok[t] < 0 || tok[t] >= m->c->vocab_size)
            return k3_seterr("token id %d at position %lld is out of range [0, %d)", tok[t],
                             (long long)t, m->c->vocab_size);
    return 0;
}

static void embed_tokens(const k3_model *m, const int32_t *tokens, int64_t n, float *x) {
    int64_t D = m->c->hidden_size;
    if (!k3_par_worth(n * D >= PAR_MIN_FLOATS)) {
        for (int64_t t = 0; t < n; t++) k3_wmat_row(&m->embed, tokens[t], 0, D, x + t * D);
        return;
    }
#pragma omp parallel for schedule(static)
    for (int64_t t = 0; t < n; t++) k3_wmat_row(&m->embed, tokens[t], 0, D, x + t * D);
}

/* Most AttnRes blocks a pass can hold (pipeline stages receive theirs). */
static int max_blocks(const k3_config *c) {
    return c->attn_res_block_size ? c->num_hidden_layers / c->attn_res_block_size + 2 : 1;
}

/* Carve the pass's [n, D] buffers out of the workspace: x, h, a and one spare per block. */
static float **setup_bufs(const k3_config *c, k3_workspace *ws, int64_t n, fwd_bufs *b) {
    int nb = max_blocks(c), nbuf = nb + 3;
    int64_t TD = n * c->hidden_size;
    float *pool = k3_grow(&ws->act, sizeof(float) * (size_t)(nbuf * TD));
    float **ptrs = k3_grow(&ws->blocks, sizeof(float *) * (size_t)(2 * nb + 1));
    float **R = ptrs, **spare = ptrs + nb;
    for (int j = 0; j < nb; j++) spare[j] = pool + (int64_t)(3 + j) * TD;
    *b = (fwd_bufs){pool, pool + TD, pool + 2 * TD, spare, nb};
    return R;
}

/* Output stage: final AttnRes mix, final norm, lm_head on the rows wanted:
 * every row (all = 1), the last one, or with rows != NULL the nrows rows
 * rows[k] whose logits go to out[k]. */
static void forward_head(const k3_model *m, fwd_bufs *b, float *const *R, int nR, int64_t n,
                         float *logits, int all, const int64_t *rows, float *const *out,
                         int nrows) {
    const k3_config *c = m->c;
    int64_t D = c->hidden_size, V = c->vocab_size;
    float *x = b->x;
    if (c->attn_res_block_size) {
        k3_attnres_mix(R, nR, b->x, m->w_out, n, D, c->rms_norm_eps, b->h);
        x = b->h;
    }
    if (rows) {
        if (nrows == 0) return;
        float *g = x == b->h ? b->a : b->h; /* a free [n, D] buffer for the gathered rows */
        for (int k = 0; k < nrows; k++)
            memcpy(g + k * D, x + rows[k] * D, sizeof(float) * (size_t)D);
        k3_rmsnorm_rows(g, nrows, D, m->final_norm, c->rms_norm_eps, g);
        if (nrows == 1) {
            k3_matmul(&m->head, g, 1, out[0]);
            return;
        }
        float *lg = k3_xmalloc(sizeof(float) * (size_t)(nrows * V));
        k3_matmul(&m->head, g, nrows, lg);
        for (int k = 0; k < nrows; k++) memcpy(out[k], lg + k * V, sizeof(float) * (size_t)V);
        free(lg);
        return;
    }
    int64_t first = all ? 0 : n - 1;
    k3_rmsnorm_rows(x + first * D, n - first, D, m->final_norm, c->rms_norm_eps, x + first * D);
    if (logits) k3_matmul(&m->head, x + first * D, n - first, logits);
}

/* k3_model.drop_pages: the mapped weight files' pages leave this process
 * (k3_st_drop_pages: the page cache keeps them, a later access maps them
 * again; anonymous copies stay). */
static void drop_weight_pages(const k3_model *m) {
    k3_st_drop_pages(m->ck.st);
}

/* One pass over the sequences of fs (n rows in all). The head: as in
 * forward_head. */
static int forward_ws(const k3_model *m, const fwd_seqs *fs, const int32_t *tokens, int64_t n,
                      float *logits, int all, const int64_t *rows, float *const *out, int nrows,
                      int path, k3_workspace *ws) {
    const k3_config *c = m->c;
    fwd_bufs b;
    float **R = setup_bufs(c, ws, n, &b);
    int nR = 0, nrecv = 0, rc = 0;
    if (m->layer0 == 0) /* first pipeline stage (or the whole model): embed */
        embed_tokens(m, tokens, n, b.x);
    else
        rc = k3_pp_recv(m, n, b.x, R, &nR); /* its blocks are heap copies: freed below */
    nrecv = rc ? 0 : nR;
    for (int i = m->layer0; !rc && i < m->layer1; i++) {
        rc = run_layer(m, fs, i, &b, n, R, &nR, path, ws);
        if (m->drop_pages) drop_weight_pages(m);
    }
    int last = m->layer1 == c->num_hidden_layers;
    if (!rc && !last) rc = k3_pp_send(m, n, b.x, R, nR); /* earlier stage: hand on, no logits */
    if (!rc && last) forward_head(m, &b, R, nR, n, logits, all, rows, out, nrows);
    if (m->drop_pages) drop_weight_pages(m);
    for (int j = 0; j < nrecv; j++) free(R[j]);
    for (int s = 0; !rc && s < fs->n; s++) {
        if (fs->snap && fs->snap[s]) fs->snap[s]->len = fs->seq[s]->len + fs->snap_at[s];
        fs->seq[s]->len += fs->off[s + 1] - fs->off[s];
    }
    return rc;
}

/* k3_forward with a forced MLA path ('A', 'B' or 0 = automatic); used by tests. */
int k3_forward_path(k3_seq *s, const int32_t *tokens, int64_t n, float *logits, int all, int path) {
    k3_model *m = s->m;
    if (check_tokens(m, tokens, n)) return -1;
    if ((m->tp_size > 1 || m->pp_size > 1) && !m->comm)
        return k3_seterr("k3_forward: this model is one slice of a parallel group and has no "
                         "process group attached (k3_model_set_comm)");
    k3_par_hook_forward(s, tokens, n, path);
    k3_workspace *ws = ws_acquire(m);
    int64_t off[2] = {0, n};
    k3_layer_cache *lc[1];
    fwd_seqs fs = {&s, off, 1, lc, NULL, NULL, NULL};
    int rc = forward_ws(m, &fs, tokens, n, logits, all, NULL, NULL, 0, path, ws);
    ws_release(m, ws);
    return rc;
}

/* Longest run of tokens one pass handles: longer inputs are fed in chunks, which
 * gives the same logits (the caches carry the state) and bounds the activation
 * memory to about (AttnRes blocks + 8) x chunk x hidden floats. */
#define K3_FORWARD_CHUNK 512

int k3_forward(k3_seq *s, const int32_t *tokens, int64_t n, float *logits, int all) {
    if (check_tokens(s->m, tokens, n)) return -1; /* refuse before consuming any token */
    int64_t V = s->m->c->vocab_size;
    for (int64_t t = 0; t < n; t += K3_FORWARD_CHUNK) {
        int64_t k = n - t < K3_FORWARD_CHUNK ? n - t : K3_FORWARD_CHUNK;
        float *out = !logits ? NULL : all ? logits + t * V : t + k == n ? logits : NULL;
        if (k3_forward_path(s, tokens + t, k, out, all, 0)) return -1;
    }
    return 0;
}

/* ---- batched passes ------------------------------------------------------- */

/* Item i's snap, if any, is a fresh sequence of the model that no other item
 * uses, taken at 0 < snap_at <= n. */
static int check_snap(const k3_batch_item *items, int n, int i, const k3_model *m) {
    const k3_batch_item *it = &items[i];
    if (!it->snap) return 0;
    if (it->snap->m != m)
        return k3_seterr("k3_forward_batch: sequence %d's snap is of another model", i);
    if (it->snap->len != 0)
        return k3_seterr("k3_forward_batch: sequence %d's snap has been fed (it must be new)", i);
    if (it->snap_at < 1 || it->snap_at > it->n)
        return k3_seterr("k3_forward_batch: sequence %d's snap_at %lld is outside [1, %lld]", i,
                         (long long)it->snap_at, (long long)it->n);
    for (int j = 0; j < n; j++)
        if (items[j].seq == it->snap || (j != i && items[j].snap == it->snap))
            return k3_seterr("k3_forward_batch: sequence %d's snap is used by item %d too", i, j);
    return 0;
}

/* A verify item (k3_batch_item.verify) is a verify pass the sequence can
 * take (spec.c), without a snapshot. */
static int check_verify(const k3_batch_item *it, int i) {
    if (!it->verify) return 0;
    if (it->snap)
        return k3_seterr("k3_forward_batch: sequence %d is a verify pass and takes no snap", i);
    return k3_spec_check(it->seq, it->n) ? k3_preferr("k3_forward_batch: sequence %d", i) : 0;
}

/* Point the verify items' KDA layers at their records; all or none. */
static int verify_begin(k3_batch_item *items, int n) {
    for (int i = 0; i < n; i++) {
        if (!items[i].verify || !k3_spec_begin(items[i].seq, items[i].n)) continue;
        while (i--)
            if (items[i].verify) k3_spec_end(items[i].seq, 0, 1);
        return -1;
    }
    return 0;
}

int k3_forward_batch_path(k3_batch_item *items, int n, int path) {
    if (n < 1) return k3_seterr("k3_forward_batch: need at least one sequence");
    k3_model *m = items[0].seq ? items[0].seq->m : NULL;
    int64_t total = 0;
    int snaps = 0;
    for (int i = 0; i < n; i++) {
        const k3_batch_item *it = &items[i];
        if (!it->seq || it->seq->m != m)
            return k3_seterr("k3_forward_batch: sequence %d is %s", i,
                             it->seq ? "of another model" : "NULL");
        for (int j = 0; j < i; j++)
            if (items[j].seq == it->seq)
                return k3_seterr("k3_forward_batch: sequence %d appears twice (items %d and %d)", i,
                                 j, i);
        if (check_tokens(m, it->tokens, it->n))
            return k3_preferr("k3_forward_batch: sequence %d", i);
        if (it->n > K3_FORWARD_CHUNK)
            return k3_seterr("k3_forward_batch: sequence %d brings %lld tokens; at most %d per "
                             "sequence per step",
                             i, (long long)it->n, K3_FORWARD_CHUNK);
        if (check_snap(items, n, i, m) || check_verify(it, i)) return -1;
        snaps += it->snap != NULL;
        total += it->n;
    }
    if ((m->tp_size > 1 || m->pp_size > 1) && !m->comm)
        return k3_seterr("k3_forward_batch: this model is one slice of a parallel group and has "
                         "no process group attached (k3_model_set_comm)");
    if (verify_begin(items, n)) return -1;
    k3_par_hook_forward_batch(items, n, path);
    k3_seq **seq = k3_xmalloc(sizeof *seq * (size_t)n);
    k3_layer_cache **lc = k3_xmalloc(sizeof *lc * (size_t)n);
    int64_t *off = k3_xmalloc(sizeof *off * (size_t)(n + 1)),
            *rows = k3_xmalloc(sizeof *rows * (size_t)total);
    int32_t *tok = k3_xmalloc(sizeof *tok * (size_t)total);
    float **out = k3_xmalloc(sizeof *out * (size_t)total);
    const int64_t V = m->c->vocab_size;
    k3_seq **snap = snaps ? k3_xmalloc(sizeof *snap * (size_t)n) : NULL;
    int64_t *snap_at = snaps ? k3_xmalloc(sizeof *snap_at * (size_t)n) : NULL;
    k3_layer_cache **snap_lc = snaps ? k3_xmalloc(sizeof *snap_lc * (size_t)n) : NULL;
    int nrows = 0;
    off[0] = 0;
    for (int i = 0; i < n; i++) {
        if (snap) snap[i] = items[i].snap, snap_at[i] = items[i].snap_at;
        seq[i] = items[i].seq;
        memcpy(tok + off[i], items[i].tokens, sizeof *tok * (size_t)items[i].n);
        off[i + 1] = off[i] + items[i].n;
        if (items[i].logits && items[i].verify) /* a verify pass: every row's */
            for (int64_t r = 0; r < items[i].n; r++)
                rows[nrows] = off[i] + r, out[nrows++] = items[i].logits + r * V;
        else if (items[i].logits)
            rows[nrows] = off[i + 1] - 1, out[nrows++] = items[i].logits;
    }
    fwd_seqs fs = {seq, off, n, lc, snap, snap_at, snap_lc};
    k3_workspace *ws = ws_acquire(m);
    int rc = forward_ws(m, &fs, tok, total, NULL, 0, rows, out, nrows, path, ws);
    ws_release(m, ws);
    for (int i = 0; i < n; i++)
        if (items[i].verify) k3_spec_end(items[i].seq, items[i].n, rc != 0);
    free(seq);
    free(lc);
    free(off);
    free(rows);
    free(tok);
    free(out);
    free(snap);
    free(snap_at);
    free(snap_lc);
    return rc;
}

int k3_forward_batch(k3_batch_item *items, int n) {
    return k3_forward_batch_path(items, n, 0);
}
