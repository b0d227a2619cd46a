/* model.h — internal structures of a loaded Kimi K3 model and of a sequence.
 *
 * Per-layer weights are k3_wmat views (so a tensor-parallel rank can hold row
 * or column slices made with k3_wmat_rows/cols) plus small owned f32 vectors.
 * Every row-parallel output (o_proj, down projections, the latent MoE sum
 * before its norm) passes through model->reduce, the single place where a
 * distributed build sums partial results across ranks; for one process it is
 * a no-op. The block implementations live in kda.c, mla.c, moe.c and
 * attnres.c; model_load.c loads the weights, forward.c runs the layers in
 * order and api.c holds the entry points of k3.h. */
#ifndef K3_MODEL_MODEL_H
#define K3_MODEL_MODEL_H

#include "quant/checkpoint.h"
#include "k3.h"
#include "model/comm.h"
#include "model/hooks.h"
#include "model/workspace.h"
#include "quant/wmat.h"

#include <pthread.h>
#include <stdatomic.h>

/* Sum buf[0..n) over all tensor-parallel ranks, in place. */
typedef void (*k3_reduce_fn)(float *buf, int64_t n, void *ctx);

typedef struct {
    k3_wmat q, k, v;   /* [P, D] each (views of a fused qkv_proj when present) */
    float *conv;       /* [3P, K] taps, q then k then v channels */
    k3_wmat fa, fb;    /* forget gate low rank: [hd, D], [P, hd] */
    k3_wmat b;         /* beta [H, D] */
    k3_wmat g, ga, gb; /* output gate: full [P, D], or low rank [hd, D] + [P, hd] */
    float *A;          /* exp(A_log[h]), [H] */
    float *dt_bias;    /* [P] */
    float *o_norm;     /* [hd] */
    k3_wmat o;         /* [D, P] */
} k3_kda_w;

typedef struct {
    k3_wmat qa, qb, q; /* q-LoRA [ql, D] + [nh*(nope+rope), ql], or q [nh*(nope+rope), D] */
    float *qa_norm;    /* [ql] */
    k3_wmat kva;       /* [r + rope, D] */
    float *kva_norm;   /* [r] */
    int uk_transposed; /* 1: uk[h] is W_UK^T [r, nope] (MLX embed_q), 0: W_UK [nope, r] */
    k3_wmat *uk, *uv;  /* [nh] per-head views; uv[h] = W_UV [vd, r] */
    k3_wmat g;         /* output gate [nh*vd, D] (if mla_use_output_gate) */
    k3_wmat o;         /* [D, nh*vd] */
} k3_mla_w;

typedef struct {
    k3_wmat gate, up, down; /* [I, D], [I, D], [D, I] */
} k3_mlp_w;

typedef struct k3_moe_w {
    k3_wmat router;           /* [E, D] */
    float *bias;              /* e_score_correction_bias [E] */
    k3_wmat lat_down, lat_up; /* [L, D], [D, L] when routed_expert_hidden_size */
    float *lat_norm;          /* [L] when latent_moe_use_norm */
    k3_wmat *eg, *eu, *ed;    /* [E] experts: gate/up [mi, X], down [X, mi] */
    k3_mlp_w shared;          /* width mi * num_shared_experts */
} k3_moe_w;

typedef struct {
    int is_kda, is_moe;
    float *in_norm, *post_norm; /* [D] */
    float *w_attn, *w_mlp;      /* AttnRes folded norm ⊙ proj [D] */
    k3_kda_w kda;
    k3_mla_w mla;
    k3_mlp_w mlp;
    k3_moe_w moe;
} k3_layer;

/* At most this many freed sequence state blocks are kept for reuse, and
 * K3_SPARE_BYTES of them in all, unless a reserve asks for more (states.c). */
#define K3_SPARE_STATES 4
#define K3_SPARE_BYTES ((size_t)1 << 30)

struct k3_model {
    k3_ckpt ck;
    const k3_config *c; /* = &ck.cfg */
    k3_layer *L;
    k3_wmat embed, head;
    float *final_norm, *w_out; /* [D] each; w_out only with AttnRes */
    k3_reduce_fn reduce;
    void *reduce_ctx;
    int cache_bf16; /* the MLA caches hold bf16, not f32 (k3_load_opts.cache_type) */
    /* tensor / pipeline parallelism (model/parallel.c): this process's slice */
    int tp_rank, tp_size, pp_rank, pp_size;
    int layer0, layer1;  /* the layers this process runs: [layer0, layer1) */
    k3_config local_cfg; /* per-rank head counts and widths (m->c) when tp_size > 1 */
    const k3_comm *comm; /* the group; NULL for a single process */
    uint64_t weight_bytes, active_bytes;
    const k3_model_hooks *hooks; /* told of every public call (hooks.h); NULL: none */
    k3_workspace ws;             /* the forward pass's buffers (forward.c) */
    atomic_int ws_busy;          /* 1 while a pass uses ws; a concurrent pass makes its own */
    int drop_pages; /* 1: after each layer and the head, unmap the weight pages from this
                       process (page cache kept): bounded RSS, e.g. k3 quantize's check */
    /* state blocks kept for the next sequences: freed ones, and the reserve
       k3_model_state_refill faults in (states.c) */
    pthread_mutex_t spare_mu;
    float **spare;
    int n_spare, cap_spare;
    int reserve;        /* blocks to keep ready (k3_model_state_reserve) */
    float *filling;     /* the block k3_model_state_refill is faulting in (its caller's thread) */
    size_t filled;      /* bytes of it faulted in so far */
    size_t refill_step; /* bytes faulted in per refill call (0: 8 MiB) */
};

/* A KDA layer's record of a speculative verify pass (spec.c): the pass
 * leaves the layer's conv and S as they were (it runs on copies) and keeps
 * what the recurrence consumed per row, so k3_seq_spec_commit can advance
 * the state over any prefix of the rows without another forward. */
typedef struct k3_kda_rec {
    int64_t n, cap;       /* rows recorded, room */
    float *zq, *zk, *zv;  /* [cap, P] pre-conv inputs (the conv history) */
    float *q, *k, *v, *a; /* [cap, P] normalized q, k, v and decay: the steps' inputs */
    float *beta;          /* [cap, H] beta logits */
    float *conv;          /* the conv history the pass convolves with (a copy) */
    float *S;             /* [H, hd, hd] the state the pass runs on (a copy, shared
                             by the layers of one sequence: one layer at a time) */
} k3_kda_rec;

typedef struct {
    float *conv; /* KDA: [K-1, 3P], oldest row first */
    float *S;    /* KDA: [H, hd(v), hd(k)] */
    void *lat;   /* MLA: [cap, r] normalized latents, f32 or bf16 (k3_model.cache_bf16) */
    void *kpe;   /* MLA: [cap, rope], the same type */
    int64_t n, cap;
    k3_kda_rec *rec; /* KDA, during a verify pass only: run dry and record (spec.c) */
} k3_layer_cache;

struct k3_seq {
    k3_model *m;
    int64_t par_id; /* driver/follower mode (dist/replay.h): the id the followers know it by */
    int64_t len;
    k3_layer_cache *lc;
    float *state;             /* every KDA layer's conv and S, one k3_big_calloc block */
    size_t state_bytes;       /* its size */
    struct k3_spec_rec *spec; /* speculative verify records (spec.c), NULL until one */
};

/* Free a sequence's verify records (spec.c; k3_seq_free). */
void k3_spec_rec_free(k3_seq *s);
/* A verify pass of n rows on s (spec.c), for k3_forward_spec and the verify
 * items of k3_forward_batch: check may it run (0 or -1 + k3_errmsg); begin
 * also reserves the records and points the KDA layers at them; end, after
 * the pass, leaves n rows awaiting k3_seq_spec_commit, or none if it failed. */
int k3_spec_check(const k3_seq *s, int64_t n);
int k3_spec_begin(k3_seq *s, int64_t n);
void k3_spec_end(k3_seq *s, int64_t n, int failed);
/* Called by k3_kda_forward on a layer cache with a record (kda_rec.c): save the
 * pre-conv rows and the conv history copy before the conv ... */
void k3_kda_rec_begin(k3_layer_cache *lc, float *const zb[3], int64_t t0, int64_t n, int64_t P,
                      int K);
/* ... and the steps' inputs after the heads ran. */
void k3_kda_rec_end(k3_layer_cache *lc, const float *const qkva[4], const float *beta, int64_t t0,
                    int64_t n, int64_t P, int H);

/* Bytes of one element of the MLA caches: 2 (bf16) or 4 (f32). */
static inline size_t k3_cache_elem_bytes(const k3_model *m) {
    return m->cache_bf16 ? 2 : 4;
}

/* Apply the all-reduce hook (no-op for a single process). */
static inline void k3_model_reduce(const k3_model *m, float *buf, int64_t n) {
    if (m->reduce) m->reduce(buf, n, m->reduce_ctx);
}

/* The sequences of one pass (k3_forward: one; k3_forward_batch: many): the
 * pass's T rows are the sequences' tokens one after the other, sequence i
 * owning rows [off[i], off[i+1]). Row-wise work (projections, norms, MLP,
 * MoE, AttnRes, the head) runs on all T rows at once, so every weight is read
 * once per pass; only the KDA recurrence/conv and MLA attention use c[i]. */
typedef struct {
    int n;                    /* sequences */
    k3_layer_cache *const *c; /* [n] this layer's caches */
    const int64_t *off;       /* [n + 1], off[0] = 0, off[n] = T */
    /* NULL, or [n]: the layer caches of sequence i's snapshot (NULL: none),
       which get its state after its first snap_at[i] rows (k3_batch_item) */
    k3_layer_cache *const *snap;
    const int64_t *snap_at;
} k3_segs;

/* Rows of segment s after which its snapshot is taken; 0 when it has none. */
static inline int64_t k3_segs_snap_at(const k3_segs *sg, int s) {
    return sg->snap && sg->snap[s] ? sg->snap_at[s] : 0;
}

/* Blocks. x is the normalized input [T, D]; out is [T, D]. 0 or -1 + k3_errmsg. */
void k3_kda_forward(const k3_model *m, const k3_layer *l, const k3_segs *sg, const float *x,
                    int64_t T, float *out);
/* path: 0 = automatic per sequence (absorbed for decode and short chunks,
 * expanded otherwise), 'A' or 'B' to force one. Temporaries come from ws. */
int k3_mla_forward(const k3_model *m, const k3_layer *l, const k3_segs *sg, const float *x,
                   int64_t T, float *out, int path, k3_workspace *ws);

void k3_mlp_forward(const k3_model *m, const k3_mlp_w *w, const float *x, int64_t T, float *out);
/* The same without the all-reduce (this rank's partial sum; the MoE reduces it with the latent). */
void k3_mlp_partial(const k3_model *m, const k3_mlp_w *w, const float *x, int64_t T, float *out);
void k3_moe_forward(const k3_model *m, const k3_moe_w *w, const float *x, int64_t T, float *out);
/* Router selection for one token: sel idx/weights [top_k] from logits [E]. */
void k3_moe_select(const k3_config *c, const float *logits, const float *bias, int *idx,
                   float *wts);
/* AttnRes: out[t] = sum_j softmax_j(c_j[t].w / rms(c_j[t])) c_j[t] over R[0..n) and p.
 * Vectorized; a single token is split over threads in fixed chunks of D, so
 * the result does not depend on the thread count. K3_KERNELS=ref runs
 * k3_attnres_mix_ref. */
void k3_attnres_mix(float *const *R, int n, const float *p, const float *w, int64_t T, int64_t D,
                    double eps, float *out);
/* The scalar double reference (tests compare the fast mix with it). */
void k3_attnres_mix_ref(float *const *R, int n, const float *p, const float *w, int64_t T,
                        int64_t D, double eps, float *out);

/* k3_forward_batch with a forced MLA path (dist/replay.c, tests). */
int k3_forward_batch_path(k3_batch_item *items, int n, int path);
/* k3_forward with a forced MLA path ('A' expanded, 'B' absorbed, 0 automatic); for tests. */
int k3_forward_path(k3_seq *s, const int32_t *tokens, int64_t n, float *logits, int all, int path);
/* KDA's conv over [state; z] + SiLU, exposed for unit tests (its recurrence
 * step is k3_kda_step, kernels/kda_ops.h). */
void k3_kda_conv(float *z, int64_t T, int64_t ld, int64_t col0, int64_t C, const float *w, int K,
                 float *state, int64_t sld);

/* Sequence state blocks (states.c; a block's bytes: k3_model_state_bytes):
 * the floats of a KDA layer's conv and S (each rounded up to 64 bytes), and
 * the kept list: take returns a kept block or NULL, give keeps or frees one. */
int64_t k3_kda_conv_floats(const k3_config *c);
int64_t k3_kda_S_floats(const k3_config *c);
float *k3_state_block_take(k3_model *m);
void k3_state_block_give(k3_model *m, float *p, size_t bytes);
void k3_state_blocks_free(k3_model *m);

/* Loader of one layer's weights (model_load.c), of the model-wide tensors,
 * and the weight byte counts (weight_bytes, active_bytes). */
int k3_layer_load(k3_model *m, int i, k3_layer *l);
int k3_load_globals(k3_model *m);
void k3_count_bytes(k3_model *m);
void k3_layer_free(k3_layer *l);

#endif
