/* spec.c — verify passes for speculative decoding, and keeping a prefix of
 * them (k3.h: k3_forward_spec, k3_seq_spec_commit).
 *
 * A verify pass feeds [last token + k drafts] with logits for every row;
 * afterwards only a prefix of those rows may belong to the sequence. The
 * MLA layers append every row to their latent cache, and keeping a prefix
 * is a truncation. The KDA layers' state cannot be truncated: the pass runs
 * their conv and recurrence on copies (kda.c) and records what each row fed
 * the recurrence (the pre-conv inputs, the normalized q and k, v, the decay
 * and the beta logit). The commit then advances the real state over the
 * kept rows with the same steps, bit for bit what the pass computed.
 *
 * Why not keep a state per row, or snapshot and recompute: at K3's width
 * one sequence's KDA state is 465 MB, so k+1 copies per step would be
 * gigabytes of writes, and recomputing the kept rows by a second forward
 * reads every weight again. The record is a few rows of activations per
 * layer, and the replay touches each layer's state once (a head's 64 KB
 * stays in cache while its kept rows step through it): one more read of
 * the state per verify step than plain decoding, no more weight reads. */
#include "base/err.h"
#include "base/mem.h"
#include "kernels/kernels.h"
#include "model/model.h"
#include "model/ops.h"

#include <stdlib.h>
#include <string.h>

/* Most rows one verify pass may bring: the last token and up to 31 drafts. */
#define K3_SPEC_MAX_ROWS 32

struct k3_spec_rec {
    int64_t cap;   /* rows each layer's record holds */
    k3_kda_rec *L; /* [layers]; used for the KDA layers */
    float *S;      /* one layer's state, the copy the heads run on */
    float *rows;   /* every record's rows, one block */
    int64_t len0;  /* the sequence's length before the pass */
    int64_t n;     /* rows of the pass awaiting a commit; 0: none */
};

static int64_t kda_P(const k3_config *c) {
    return (int64_t)c->kda_heads * c->kda_head_dim;
}

void k3_spec_rec_free(k3_seq *s) {
    if (!s->spec) return;
    free(s->spec->L);
    k3_big_free(s->spec->S);
    k3_big_free(s->spec->rows);
    free(s->spec);
    s->spec = NULL;
}

/* Floats of one layer's record of cap rows. */
static int64_t rec_floats(const k3_config *c, int64_t cap) {
    int64_t P = kda_P(c), conv = (int64_t)(c->kda_conv_kernel - 1) * 3 * P;
    return cap * (7 * P + c->kda_heads) + conv;
}

/* Records of at least cap rows for every KDA layer of s. */
static int spec_reserve(k3_seq *s, int64_t cap) {
    const k3_config *c = s->m->c;
    if (s->spec && s->spec->cap >= cap) return 0;
    k3_spec_rec_free(s);
    struct k3_spec_rec *r = k3_xcalloc(1, sizeof *r);
    int nl = c->num_hidden_layers;
    int64_t P = kda_P(c), per = rec_floats(c, cap);
    r->cap = cap;
    r->L = k3_xcalloc((size_t)nl, sizeof *r->L);
    r->S = k3_big_calloc(sizeof(float) * (size_t)(k3_kda_S_floats(c) ? k3_kda_S_floats(c) : 1));
    r->rows = k3_big_calloc(sizeof(float) * (size_t)(per * nl));
    s->spec = r;
    if (!r->S || !r->rows) {
        k3_spec_rec_free(s);
        return k3_seterr("speculative decoding: out of memory for %lld verify rows",
                         (long long)cap);
    }
    for (int i = 0; i < nl; i++) {
        k3_kda_rec *l = &r->L[i];
        float *p = r->rows + per * i;
        l->cap = cap;
        l->zq = p, l->zk = p + cap * P, l->zv = p + 2 * cap * P;
        l->q = p + 3 * cap * P, l->k = p + 4 * cap * P, l->v = p + 5 * cap * P;
        l->a = p + 6 * cap * P, l->beta = p + 7 * cap * P;
        l->conv = l->beta + cap * c->kda_heads;
        l->S = r->S;
    }
    return 0;
}

/* Point (arm = 1) or unpoint the KDA layer caches of s at their records. */
static void spec_arm(k3_seq *s, int arm) {
    for (int i = 0; i < s->m->c->num_hidden_layers; i++)
        if (s->m->L[i].is_kda) s->lc[i].rec = arm ? &s->spec->L[i] : NULL;
}

int k3_model_can_speculate(const k3_model *m) {
    return m->pp_size <= 1; /* a stage holds some layers: the records assume all */
}

int k3_spec_check(const k3_seq *s, int64_t n) {
    if (!k3_model_can_speculate(s->m))
        return k3_seterr("k3_forward_spec: not available on a pipeline-parallel model");
    if (n < 1 || n > K3_SPEC_MAX_ROWS)
        return k3_seterr("k3_forward_spec: %lld rows; a verify pass takes 1 to %d", (long long)n,
                         K3_SPEC_MAX_ROWS);
    if (s->spec && s->spec->n)
        return k3_seterr("k3_forward_spec: the previous verify pass was not committed");
    return 0;
}

int k3_spec_begin(k3_seq *s, int64_t n) {
    if (k3_spec_check(s, n) || spec_reserve(s, n)) return -1;
    s->spec->len0 = s->len;
    spec_arm(s, 1);
    return 0;
}

void k3_spec_end(k3_seq *s, int64_t n, int failed) {
    spec_arm(s, 0);
    s->spec->n = n;
    if (!failed) return;
    /* keep nothing: a refused pass consumed nothing, a failed one is undone */
    if (s->len != s->spec->len0)
        k3_seq_spec_commit(s, 0);
    else
        s->spec->n = 0;
}

/* The conv history of layer cache lc after the first keep rows of its record:
 * the last K-1 rows of [history; kept rows], oldest first, in place. */
static void conv_advance(k3_layer_cache *lc, int64_t keep, int64_t P, int K) {
    const k3_kda_rec *r = lc->rec;
    for (int64_t j = 0; j < K - 1; j++) {
        int64_t i = keep + j; /* row i of [history (K-1 rows); kept rows] */
        float *to = lc->conv + j * 3 * P;
        if (i < K - 1) {
            memmove(to, lc->conv + i * 3 * P, sizeof(float) * (size_t)(3 * P));
            continue;
        }
        int64_t t = i - (K - 1);
        memcpy(to, r->zq + t * P, sizeof(float) * (size_t)P);
        memcpy(to + P, r->zk + t * P, sizeof(float) * (size_t)P);
        memcpy(to + 2 * P, r->zv + t * P, sizeof(float) * (size_t)P);
    }
}

/* Head h of layer cache lc through the first keep rows of its record. */
static void head_advance(const k3_config *c, k3_layer_cache *lc, int h, int64_t keep) {
    const k3_kda_rec *r = lc->rec;
    int H = c->kda_heads, hd = c->kda_head_dim;
    int64_t P = kda_P(c), o = (int64_t)h * hd;
    float *S = lc->S + o * hd, y[512];
    float *yb = hd <= 512 ? y : k3_xmalloc(sizeof(float) * (size_t)hd);
    for (int64_t t = 0; t < keep; t++)
        k3_kda_step(S, hd, hd, r->q + t * P + o, r->k + t * P + o, r->v + t * P + o,
                    r->a + t * P + o, k3_sigmoid(r->beta[t * H + h]), yb);
    if (yb != y) free(yb);
}

int k3_seq_spec_commit(k3_seq *s, int64_t keep) {
    struct k3_spec_rec *sp = s->spec;
    if (!sp || !sp->n) return k3_seterr("k3_seq_spec_commit: no verify pass to commit");
    if (keep < 0 || keep > sp->n)
        return k3_seterr("k3_seq_spec_commit: keep %lld is outside [0, %lld]", (long long)keep,
                         (long long)sp->n);
    const k3_model_hooks *h = s->m->hooks;
    if (h && h->spec_commit) h->spec_commit(h->ctx, s, keep);
    const k3_config *c = s->m->c;
    const int nl = c->num_hidden_layers, H = c->kda_heads;
    int64_t drop = sp->n - keep;
    spec_arm(s, 1);
#pragma omp parallel for schedule(dynamic, 1)
    for (int64_t it = 0; it < (int64_t)nl * (H + 1); it++) {
        int i = (int)(it / (H + 1)), h = (int)(it % (H + 1));
        k3_layer_cache *lc = &s->lc[i];
        if (!s->m->L[i].is_kda) {
            if (h == 0) lc->n -= lc->n >= drop ? drop : lc->n; /* MLA: truncate the cache */
        } else if (h == H) {
            conv_advance(lc, keep, kda_P(c), c->kda_conv_kernel);
        } else {
            head_advance(c, lc, h, keep);
        }
    }
    spec_arm(s, 0);
    s->len = sp->len0 + keep;
    sp->n = 0;
    return 0;
}
