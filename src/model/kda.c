/* kda.c — one Kimi Delta Attention layer (spec §2.4): projections, causal
 * short conv with its state, SiLU, L2-normalised q/k, per-channel forget gate,
 * beta, the gated delta-rule recurrence in fp32, gated output RMSNorm, o_proj.
 *
 * After the projections everything per token and head (norms, decay, beta,
 * the step, the gated norm) runs in one parallel pass over heads, so no
 * serial elementwise loop leaves a thread waiting. Activations live in a
 * grow-only per-thread scratch buffer: no allocation per call. */
#include "base/par.h"
#include "kernels/kernels.h"
#include "model/model.h"
#include "model/ops.h"
#include "model/rowpar.h"

#include <math.h>
#include <string.h>

/* Below this many conv outputs (tokens x channels) the conv and SiLU run on
 * the calling thread: one decode token of K3 (3 x 12288 channels) is ~10 us
 * of work, less than a region's start, its barriers and their futex calls
 * cost. Every channel and row is computed the same way either way. */
#define CONV_PAR_MIN 65536

/* k3_kda_conv's work, shared by a region's threads or, called outside one,
 * all on the calling thread (its `omp for` loops are orphaned). */
static void conv_silu(float *z, int64_t T, int64_t ld, int64_t col0, int64_t C, const float *w,
                      int K, float *state, int64_t sld) {
    const int64_t items = (C + 7) / 8;
#pragma omp for schedule(static)
    for (int64_t it = 0; it < items; it++) {
        int64_t c0 = it * 8, n = C - c0 < 8 ? C - c0 : 8;
        k3_conv_channels(z + col0 + c0, T, ld, n, w + c0 * K, K, state + col0 + c0, sld);
    }
#pragma omp for schedule(static)
    for (int64_t t = 0; t < T; t++) k3_vsilu(z + t * ld + col0, z + t * ld + col0, C);
}

/* Causal depthwise conv over [state; z] for C channels, then SiLU, in place on z.
 * state holds the last K-1 pre-conv inputs (oldest first) and is updated.
 * z is [T, ld] with this block's channels at column offset col0. */
void k3_kda_conv(float *z, int64_t T, int64_t ld, int64_t col0, int64_t C, const float *w, int K,
                 float *state, int64_t sld) {
    if (k3_par_direct(T * C >= CONV_PAR_MIN)) { /* no region of one thread (base/par.h) */
        conv_silu(z, T, ld, col0, C, w, K, state, sld);
        return;
    }
#pragma omp parallel
    conv_silu(z, T, ld, col0, C, w, K, state, sld);
}

/* Channels [c0, c0+n) of a conv history (K-1 rows, sld apart) into to. */
static void copy_conv_state(float *to, const float *from, int64_t c0, int64_t n, int K,
                            int64_t sld) {
    for (int j = 0; j < K - 1; j++)
        memcpy(to + j * sld + c0, from + j * sld + c0, sizeof(float) * (size_t)n);
}

/* kda_conv3's work for the calling thread (all of it outside a region). A
 * sequence with a snapshot convolves its rows in two calls, split where the
 * snapshot is taken: the history carries over, so the bits are the same. */
static void conv3_silu(float *const zb[3], const k3_segs *sg, int64_t T, int64_t P, const float *w,
                       int K) {
    const int64_t per = (P + 7) / 8, items = 3 * per; /* items per buffer and per sequence */
#pragma omp for schedule(static)
    for (int64_t it = 0; it < sg->n * items; it++) {
        int64_t s = it / items, r = it % items;
        int64_t b = r / per, c0 = (r % per) * 8, n = P - c0 < 8 ? P - c0 : 8;
        int64_t t0 = sg->off[s], ts = sg->off[s + 1] - t0, at = k3_segs_snap_at(sg, (int)s);
        const k3_kda_rec *rec = sg->c[s]->rec; /* a verify pass convolves with a copy */
        float *z = zb[b] + t0 * P, *state = (rec ? rec->conv : sg->c[s]->conv) + b * P;
        const float *wb = w + b * P * K;
        if (!at) {
            k3_conv_channels(z + c0, ts, P, n, wb + c0 * K, K, state + c0, 3 * P);
            continue;
        }
        k3_conv_channels(z + c0, at, P, n, wb + c0 * K, K, state + c0, 3 * P);
        copy_conv_state(sg->snap[s]->conv + b * P, state, c0, n, K, 3 * P);
        if (at < ts)
            k3_conv_channels(z + at * P + c0, ts - at, P, n, wb + c0 * K, K, state + c0, 3 * P);
    }
#pragma omp for schedule(static)
    for (int64_t r = 0; r < 3 * T; r++) {
        float *row = zb[r % 3] + (r / 3) * P;
        k3_vsilu(row, row, P);
    }
}

/* The conv + SiLU of the separate q, k, v buffers ([T, P] each); the conv
 * weights and state are laid out for the 3P channels q | k | v. Each
 * sequence of sg convolves its own rows with its own state; the work items
 * (sequence, buffer, 8 channels) split over the threads. */
static void kda_conv3(float *const zb[3], const k3_segs *sg, int64_t T, int64_t P, const float *w,
                      int K) {
    for (int s = 0; s < sg->n; s++)
        if (sg->c[s]->rec)
            k3_kda_rec_begin(sg->c[s], zb, sg->off[s], sg->off[s + 1] - sg->off[s], P, K);
    if (k3_par_direct(3 * T * P >= CONV_PAR_MIN)) { /* no region of one thread (base/par.h) */
        conv3_silu(zb, sg, T, P, w, K);
        return;
    }
#pragma omp parallel
    conv3_silu(zb, sg, T, P, w, K);
}

/* Decay alpha[d] of head h from the gate logits a (in place, hd channels). */
static void kda_decay_head(const k3_config *c, const k3_kda_w *w, int h, float *a) {
    int hd = c->kda_head_dim;
    const float *bias = w->dt_bias + (int64_t)h * hd;
    float A = w->A[h];
    if (c->kda_has_lower_bound) {
        float lb = (float)c->kda_gate_lower_bound;
        for (int d = 0; d < hd; d++) a[d] = A * (a[d] + bias[d]);
        k3_vsigmoid(a, a, hd);
        for (int d = 0; d < hd; d++) a[d] = lb * a[d];
    } else {
        for (int d = 0; d < hd; d++) a[d] = -A * k3_softplus(a[d] + bias[d]);
    }
    k3_vexp(a, a, hd);
}

/* y <- RMSNorm(y; o_norm) * sigmoid(g) for one head (g is overwritten). */
static void kda_gate_out(const k3_config *c, const k3_kda_w *w, float *y, float *g) {
    int hd = c->kda_head_dim;
    k3_rmsnorm(y, hd, w->o_norm, c->rms_norm_eps, y);
    k3_vsigmoid(g, g, hd);
    for (int d = 0; d < hd; d++) y[d] *= g[d];
}

/* One layer's activations: [T, P] each except beta [T, H] and low, low2 [T, hd]. */
typedef struct {
    float *q, *k, *v, *a, *g, *y, *beta, *low, *low2;
} kda_bufs;

static kda_bufs kda_scratch(int64_t T, int64_t P, int H, int hd) {
    size_t tp = ((size_t)(T * P) + 15) & ~(size_t)15, th = ((size_t)(T * H) + 15) & ~(size_t)15;
    size_t tl = ((size_t)(T * hd) + 15) & ~(size_t)15;
    float *p = k3_scratch(K3_SCRATCH_KDA, sizeof(float) * (6 * tp + th + 2 * tl));
    kda_bufs b = {p,          p + tp,     p + 2 * tp, p + 3 * tp, p + 4 * tp,
                  p + 5 * tp, p + 6 * tp, NULL,       NULL};
    b.low = b.beta + th;
    b.low2 = b.low + tl;
    return b;
}

/* One head of one sequence, token by token: L2-normalise q and k, decay,
 * beta, the step, the gated output norm. */
static void kda_head(const k3_config *cf, const k3_kda_w *w, const k3_segs *sg, const kda_bufs *b,
                     int64_t sh, float qscale) {
    int H = cf->kda_heads, hd = cf->kda_head_dim;
    int64_t P = (int64_t)H * hd, s = sh / H;
    int h = (int)(sh % H);
    float *S = sg->c[s]->S + (int64_t)h * hd * hd;
    if (sg->c[s]->rec) { /* a verify pass: the steps run on a copy (spec.c commits) */
        float *copy = sg->c[s]->rec->S + (int64_t)h * hd * hd;
        memcpy(copy, S, sizeof(float) * (size_t)hd * hd);
        S = copy;
    }
    const int64_t at = k3_segs_snap_at(sg, (int)s), snap_t = sg->off[s] + at - 1;
    for (int64_t t = sg->off[s]; t < sg->off[s + 1]; t++) {
        int64_t o = t * P + (int64_t)h * hd;
        float *q = b->q + o, *k = b->k + o, *a = b->a + o;
        k3_l2norm_scaled(q, hd, 1e-6, qscale);
        k3_l2norm_scaled(k, hd, 1e-6, 1.0f);
        kda_decay_head(cf, w, h, a);
        float beta = k3_sigmoid(b->beta[t * H + h]);
        k3_kda_step(S, hd, hd, q, k, b->v + o, a, beta, b->y + o);
        kda_gate_out(cf, w, b->y + o, b->g + o);
        if (at && t == snap_t) /* the state after the snapshot's last row */
            memcpy(sg->snap[s]->S + (int64_t)h * hd * hd, S, sizeof(float) * (size_t)hd * hd);
    }
}

/* Every head of every sequence of sg. Heads are independent, so they split
 * over threads and every head runs the same instructions whatever the thread
 * count or batch. */
static void kda_heads(const k3_config *cf, const k3_kda_w *w, const k3_segs *sg,
                      const kda_bufs *b) {
    const int64_t n = (int64_t)sg->n * cf->kda_heads;
    const float qscale = 1.0f / sqrtf((float)cf->kda_head_dim);
    if (!k3_par_worth(1)) { /* no region of one thread (base/par.h) */
        for (int64_t sh = 0; sh < n; sh++) kda_head(cf, w, sg, b, sh, qscale);
        return;
    }
#pragma omp parallel for schedule(dynamic, 1) /* a preempted thread's heads go to the other */
    for (int64_t sh = 0; sh < n; sh++) kda_head(cf, w, sg, b, sh, qscale);
}

static void kda_products(const k3_config *cf, const k3_kda_w *w, const k3_segs *sg, const float *x,
                         int64_t T, int64_t P, const kda_bufs *bp);

void k3_kda_forward(const k3_model *m, const k3_layer *l, const k3_segs *sg, const float *x,
                    int64_t T, float *out) {
    const k3_config *cf = m->c;
    const k3_kda_w *w = &l->kda;
    int H = cf->kda_heads, hd = cf->kda_head_dim;
    int64_t P = (int64_t)H * hd, D = cf->hidden_size;
    kda_bufs b = kda_scratch(T, P, H, hd);
    if (T == 1) { /* decode: the products of x in one region, then those of the low ranks */
        const int full = cf->kda_full_rank_gate;
        k3_mv px[6] = {{&w->q, x, b.q},    {&w->k, x, b.k},
                       {&w->v, x, b.v},    {&w->fa, x, b.low},
                       {&w->b, x, b.beta}, {full ? &w->g : &w->ga, x, full ? b.g : b.low2}};
        k3_mvset_run(px, 6);
        float *zb[3] = {b.q, b.k, b.v};
        kda_conv3(zb, sg, T, P, w->conv, cf->kda_conv_kernel);
        k3_mv pl[2] = {{&w->fb, b.low, b.a}, {&w->gb, b.low2, b.g}};
        k3_mvset_run(pl, full ? 1 : 2);
    } else {
        kda_products(cf, w, sg, x, T, P, &b);
    }
    kda_heads(cf, w, sg, &b);
    const float *qkva[4] = {b.q, b.k, b.v, b.a};
    for (int s = 0; s < sg->n; s++)
        if (sg->c[s]->rec)
            k3_kda_rec_end(sg->c[s], qkva, b.beta, sg->off[s], sg->off[s + 1] - sg->off[s], P, H);
    k3_rowpar_matmul(m, &w->o, b.y, T, out); /* canonical block order (rowpar.h) */
    k3_model_reduce(m, out, T * D);
}

/* The products of k3_kda_forward for T tokens, one by one (prefill). */
static void kda_products(const k3_config *cf, const k3_kda_w *w, const k3_segs *sg, const float *x,
                         int64_t T, int64_t P, const kda_bufs *bp) {
    kda_bufs b = *bp;
    k3_matmul(&w->q, x, T, b.q);
    k3_matmul(&w->k, x, T, b.k);
    k3_matmul(&w->v, x, T, b.v);
    float *zb[3] = {b.q, b.k, b.v};
    kda_conv3(zb, sg, T, P, w->conv, cf->kda_conv_kernel);
    k3_matmul(&w->fa, x, T, b.low); /* forget gate, low rank */
    k3_matmul(&w->fb, b.low, T, b.a);
    k3_matmul(&w->b, x, T, b.beta);
    if (cf->kda_full_rank_gate) {
        k3_matmul(&w->g, x, T, b.g);
    } else {
        k3_matmul(&w->ga, x, T, b.low);
        k3_matmul(&w->gb, b.low, T, b.g);
    }
}
