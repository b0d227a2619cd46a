/* workspace.h — the forward pass's scratch memory: grow-only buffers, sized by
 * the first pass of a given batch size and reused by every later one, so the
 * token loop allocates nothing. A leaf: it knows no model type. */
#ifndef K3_MODEL_WORKSPACE_H
#define K3_MODEL_WORKSPACE_H

#include <stddef.h>
#include <stdint.h>

/* A grow-only buffer: reallocated only when a call needs more than it holds,
 * so after the first call of a given size the forward pass does not allocate. */
typedef struct {
    void *p;
    size_t cap;
} k3_grow_buf;

/* At least `bytes` of b (64-byte aligned, contents undefined after a grow);
 * dies on out-of-memory like k3_xmalloc. */
void *k3_grow(k3_grow_buf *b, size_t bytes);
/* How many times a workspace buffer or an MLA cache grew in this process
 * (tests use it to check that the token loop does not allocate). */
uint64_t k3_workspace_grows(void);
/* Count one growth (the MLA cache counts its reallocations here too). */
void k3_workspace_count_grow(void);

/* mla.c's temporaries (see k3_mla_forward). */
enum {
    K3_MLA_Q,   /* queries [T, nh*(nope+rope)] */
    K3_MLA_O,   /* attention output [T, nh*vd] */
    K3_MLA_G,   /* output gate [T, nh*vd] */
    K3_MLA_CQ,  /* q-LoRA latent [T, ql] */
    K3_MLA_CKV, /* kv_a output [T, r+rope] */
    K3_MLA_QN,  /* no-RoPE query parts [nh, T, nope] */
    K3_MLA_QA,  /* absorbed queries [nh, T, r] */
    K3_MLA_OL,  /* attended latents [nh, T, r] */
    K3_MLA_KV,  /* path A keys and values of one head [N, nope + vd], or W_UV output */
    K3_MLA_THR, /* the tiled attention's scratch (kernels/mla_tile.h) */
    K3_MLA_LAT, /* path A over a bf16 cache: latents and k_pe widened [N, r + rope] */
    K3_MLA_WS_N
};

/* Every scratch buffer of one forward pass: used by one pass at a time
 * (k3_model.ws_busy), grow-only. */
typedef struct {
    k3_grow_buf act;              /* the [T, D] buffers of forward.c, one block */
    k3_grow_buf blocks;           /* the AttnRes block list (pointers) */
    k3_grow_buf head;             /* the head's [rows, vocab] logits of a batch */
    k3_grow_buf batch;            /* a batch's per-sequence lists (forward.c) */
    k3_grow_buf mla[K3_MLA_WS_N]; /* mla.c */
} k3_workspace;

/* Free a workspace's buffers (k3_model_free). */
void k3_workspace_free(k3_workspace *ws);

#endif
