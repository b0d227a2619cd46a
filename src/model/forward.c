/* forward.c — the forward pass, in the order it runs (spec §2.1–2.2):
 *   embed → for each layer { AttnRes mix → norm → KDA|MLA → AttnRes mix → norm →
 *   dense MLP|MoE } → final AttnRes mix → final norm → lm_head,
 * over the rows of one sequence (k3_forward) or of many (k3_forward_batch).
 * The blocks are kda.c, mla.c, moe.c and attnres.c; every buffer comes from
 * the model's workspace (workspace.h), so a pass allocates nothing once the
 * workspace has grown to its batch size. */
#include "base/err.h"
#include "base/mem.h"
#include "base/par.h"
#include "kernels/kernels.h"
#include "model/hooks.h"
#include "model/model.h"
#include "model/ops.h"
#include "model/parallel.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

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
                         float *logits, int all, const int64_t *rows, float *const *out, int nrows,
                         k3_workspace *ws) {
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
        float *lg = k3_grow(&ws->head, sizeof(float) * (size_t)(nrows * V));
        k3_matmul(&m->head, g, nrows, lg);
        for (int k = 0; k < nrows; k++) memcpy(out[k], lg + k * V, sizeof(float) * (size_t)V);
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
    int last = k3_model_makes_logits(m); /* stage 0, not "holds the last layer": a surplus
                                            stage with no layers may hold it too */
    if (!rc && !last) rc = k3_pp_send(m, n, b.x, R, nR); /* earlier stage: hand on, no logits */
    if (!rc && last) forward_head(m, &b, R, nR, n, logits, all, rows, out, nrows, ws);
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
    if (m->hooks && m->hooks->forward) m->hooks->forward(m->hooks->ctx, s, tokens, n, path);
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

/* The items are one model's distinct sequences with valid tokens and snaps;
 * their token count and snapshot count go to *total and *snaps. */
static int check_batch(const k3_batch_item *items, int n, const k3_model *m, int64_t *total,
                       int *snaps) {
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
        *snaps += it->snap != NULL;
        *total += it->n;
    }
    if ((m->tp_size > 1 || m->pp_size > 1) && !m->comm)
        return k3_seterr("k3_forward_batch: this model is one slice of a parallel group and has "
                         "no process group attached (k3_model_set_comm)");
    return 0;
}

/* A batch's lists, carved out of the workspace: a step allocates nothing.
 * Logit rows (rows, out) number up to the batch's tokens: a verify item
 * asks for every row's. */
typedef struct {
    k3_seq **seq, **snap;
    k3_layer_cache **lc, **snap_lc;
    float **out;
    int64_t *off, *rows, *snap_at;
    int32_t *tok;
} batch_lists;

static void carve_batch(k3_workspace *ws, int n, int64_t total, batch_lists *bl) {
    size_t np = (size_t)n, nt = (size_t)total;
    void **p = k3_grow(&ws->batch, sizeof(void *) * (4 * np + nt) +
                                       sizeof(int64_t) * (2 * np + 1 + nt) + sizeof(int32_t) * nt);
    bl->seq = (k3_seq **)p, bl->snap = (k3_seq **)(p + np);
    bl->lc = (k3_layer_cache **)(p + 2 * np), bl->snap_lc = (k3_layer_cache **)(p + 3 * np);
    bl->out = (float **)(p + 4 * np);
    bl->off = (int64_t *)(p + 4 * np + nt), bl->rows = bl->off + np + 1;
    bl->snap_at = bl->rows + nt;
    bl->tok = (int32_t *)(bl->snap_at + np);
}

int k3_forward_batch_path(k3_batch_item *items, int n, int path) {
    if (n < 1) return k3_seterr("k3_forward_batch: need at least one sequence");
    k3_model *m = items[0].seq ? items[0].seq->m : NULL;
    int64_t total = 0;
    int snaps = 0;
    if (check_batch(items, n, m, &total, &snaps) || verify_begin(items, n)) return -1;
    if (m->hooks && m->hooks->forward_batch) m->hooks->forward_batch(m->hooks->ctx, items, n, path);
    k3_workspace *ws = ws_acquire(m);
    batch_lists bl;
    carve_batch(ws, n, total, &bl);
    const int64_t V = m->c->vocab_size;
    int nrows = 0;
    bl.off[0] = 0;
    for (int i = 0; i < n; i++) {
        bl.snap[i] = items[i].snap, bl.snap_at[i] = items[i].snap_at;
        bl.seq[i] = items[i].seq;
        memcpy(bl.tok + bl.off[i], items[i].tokens, sizeof *bl.tok * (size_t)items[i].n);
        bl.off[i + 1] = bl.off[i] + items[i].n;
        if (items[i].logits && items[i].verify) /* a verify pass: every row's */
            for (int64_t r = 0; r < items[i].n; r++)
                bl.rows[nrows] = bl.off[i] + r, bl.out[nrows++] = items[i].logits + r * V;
        else if (items[i].logits)
            bl.rows[nrows] = bl.off[i + 1] - 1, bl.out[nrows++] = items[i].logits;
    }
    fwd_seqs fs = {bl.seq, bl.off, n, bl.lc, snaps ? bl.snap : NULL, bl.snap_at, bl.snap_lc};
    int rc = forward_ws(m, &fs, bl.tok, total, NULL, 0, bl.rows, bl.out, nrows, path, ws);
    ws_release(m, ws);
    for (int i = 0; i < n; i++)
        if (items[i].verify) k3_spec_end(items[i].seq, items[i].n, rc != 0);
    return rc;
}

int k3_forward_batch(k3_batch_item *items, int n) {
    return k3_forward_batch_path(items, n, 0);
}

/* One verify item of a batch: under tensor parallelism the followers learn
 * from the batch that it is a verify pass (dist/replay.c). */
int k3_forward_spec(k3_seq *s, const int32_t *tokens, int64_t n, float *logits) {
    if (k3_spec_check(s, n)) return -1; /* before reading n tokens */
    k3_batch_item it = {.seq = s, .tokens = tokens, .n = n, .logits = logits, .verify = 1};
    return k3_forward_batch_path(&it, 1, 0);
}
