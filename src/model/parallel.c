/* parallel.c — tensor/pipeline-parallel state of a loaded model (see parallel.h). */
#include "model/parallel.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "base/mem.h"
#include "model/tp.h"

void k3_pp_range(int n_layers, int N, int rank, int *start, int *end) {
    int base = n_layers / N, extra = n_layers % N, seg = N - rank - 1;
    *start = seg * base + (seg < extra ? seg : extra);
    *end = *start + base + (seg < extra ? 1 : 0);
}

int k3_par_init(k3_model *m, const k3_load_opts *o) {
    const k3_config *c = &m->ck.cfg;
    int tr = o ? o->tp_rank : 0, ts = o && o->tp_size > 0 ? o->tp_size : 1;
    int pr = o ? o->pp_rank : 0, ps = o && o->pp_size > 0 ? o->pp_size : 1;
    if (tr < 0 || tr >= ts) return k3_seterr("tensor-parallel rank %d outside [0, %d)", tr, ts);
    if (pr < 0 || pr >= ps) return k3_seterr("pipeline rank %d outside [0, %d)", pr, ps);
    if (ts > 1 && k3_tp_check_config(c, ts)) return -1;
    /* more stages than layers is allowed (spec 5.2): the surplus stages hold no
     * layers and hand the stream on unchanged */
    m->tp_rank = tr, m->tp_size = ts, m->pp_rank = pr, m->pp_size = ps;
    m->layer0 = 0, m->layer1 = c->num_hidden_layers;
    if (ps > 1) k3_pp_range(c->num_hidden_layers, ps, pr, &m->layer0, &m->layer1);
    return 0;
}

int k3_par_slice_layer(k3_model *m, int i) {
    if (m->tp_size == 1) return 0;
    return k3_tp_slice_layer(&m->ck.cfg, i, &m->L[i], m->tp_rank, m->tp_size);
}

/* Layer index of a tensor name "...model.layers.<i>.", or -1. */
static int layer_of(const char *name) {
    const char *p = strstr(name, "model.layers.");
    return p ? atoi(p + 13) : -1;
}

void k3_par_skip_foreign_layers(k3_model *m) {
    if (m->pp_size == 1) return;
    const k3_st *st = m->ck.st;
    for (int k = 0; k < st->n; k++) {
        int i = layer_of(st->t[k].name);
        if (i >= 0 && (i < m->layer0 || i >= m->layer1)) m->ck.used[k] = 1;
    }
}

void k3_par_finish(k3_model *m) {
    if (m->tp_size == 1) return;
    k3_tp_local_config(&m->ck.cfg, m->tp_size, &m->local_cfg);
    m->c = &m->local_cfg;
}

static void comm_reduce(float *buf, int64_t n, void *ctx) {
    const k3_comm *c = ctx;
    if (c->allreduce_sum(c->ctx, buf, (size_t)n))
        fprintf(stderr, "k3: tensor-parallel all-reduce failed: %s\n", k3_errmsg());
}

int k3_model_set_comm(k3_model *m, const k3_comm *comm) {
    if (comm && m->tp_size > 1 && m->pp_size > 1)
        return k3_seterr("a TP %d x PP %d slice needs two groups (k3_model_set_comms)", m->tp_size,
                         m->pp_size);
    int size = m->tp_size > 1 ? m->tp_size : m->pp_size;
    int rank = m->tp_size > 1 ? m->tp_rank : m->pp_rank;
    if (comm && (comm->size != size || comm->rank != rank))
        return k3_seterr("the process group (rank %d of %d) does not match the model's slice "
                         "(rank %d of %d)",
                         comm->rank, comm->size, rank, size);
    m->comm = comm;
    m->reduce = comm && m->tp_size > 1 ? comm_reduce : NULL;
    m->reduce_ctx = (void *)comm;
    return 0;
}

int k3_model_set_comms(k3_model *m, const k3_comm *tp, const k3_comm *pp) {
    if (!tp || !pp || tp->size != m->tp_size || tp->rank != m->tp_rank || pp->size != m->pp_size ||
        pp->rank != m->pp_rank)
        return k3_seterr("the TP group (rank %d of %d) and pipeline group (rank %d of %d) do not "
                         "match the model's slice (TP %d of %d, stage %d of %d)",
                         tp ? tp->rank : -1, tp ? tp->size : 0, pp ? pp->rank : -1,
                         pp ? pp->size : 0, m->tp_rank, m->tp_size, m->pp_rank, m->pp_size);
    m->comm = pp; /* stage-to-stage hand-off */
    m->reduce = m->tp_size > 1 ? comm_reduce : NULL;
    m->reduce_ctx = (void *)tp; /* partial sums inside the stage */
    return 0;
}

int k3_model_makes_logits(const k3_model *m) {
    return m->pp_size == 1 || m->pp_rank == 0;
}

void k3_model_describe_slice(const k3_model *m, char *buf, size_t len) {
    const k3_config *c = &m->ck.cfg;
    size_t o = 0;
    char layers[64];
    if (m->layer0 < m->layer1)
        snprintf(layers, sizeof layers, "layers %d..%d of %d", m->layer0, m->layer1 - 1,
                 c->num_hidden_layers);
    else
        snprintf(layers, sizeof layers, "no layers (%d stages, %d layers)", m->pp_size,
                 c->num_hidden_layers);
    if (m->pp_size > 1)
        o = (size_t)snprintf(buf, len, "pipeline stage %d of %d: %s%s%s%s", m->pp_rank, m->pp_size,
                             layers, m->layer0 == 0 ? ", embedding" : "",
                             m->pp_rank == 0 ? ", output mix + final norm + lm_head" : "",
                             m->tp_size > 1 ? "; " : "");
    if (o >= len) return;
    if (m->tp_size > 1)
        k3_tp_describe(c, m->tp_rank, m->tp_size, buf + o, len - o);
    else if (m->pp_size == 1)
        snprintf(buf, len, "whole model (%d layers)", c->num_hidden_layers);
}

/* AttnRes blocks stored before layer `start`: one per block start i < start (i % B == 0). */
static int blocks_before(const k3_config *c, int start) {
    int B = c->attn_res_block_size;
    return B ? (start + B - 1) / B : 0;
}

static int need_comm(const k3_model *m, const char *what) {
    if (m->comm) return 0;
    return k3_seterr("%s: pipeline stage %d of %d has no process group attached", what, m->pp_rank,
                     m->pp_size);
}

int k3_pp_recv(const k3_model *m, int64_t T, float *x, float **R, int *nR) {
    if (need_comm(m, "pipeline receive")) return -1;
    int64_t D = m->c->hidden_size, TD = T * D;
    int nb = blocks_before(m->c, m->layer0);
    float *packed = k3_alloc(sizeof(float) * (size_t)((nb + 1) * TD));
    if (!packed) return -1;
    int rc = m->comm->recv(m->comm->ctx, m->pp_rank + 1, packed, (size_t)((nb + 1) * TD));
    if (!rc) {
        for (int j = 0; j < nb; j++) {
            R[j] = k3_xmalloc(sizeof(float) * (size_t)TD);
            memcpy(R[j], packed + j * TD, sizeof(float) * (size_t)TD);
        }
        *nR = nb;
        memcpy(x, packed + nb * TD, sizeof(float) * (size_t)TD);
    }
    k3_free(packed);
    return rc ? k3_preferr("pipeline stage %d receiving from stage %d", m->pp_rank, m->pp_rank + 1)
              : 0;
}

int k3_pp_send(const k3_model *m, int64_t T, const float *x, float *const *R, int nR) {
    if (need_comm(m, "pipeline send")) return -1;
    int64_t D = m->c->hidden_size, TD = T * D;
    if (nR != blocks_before(m->c, m->layer1))
        return k3_seterr("pipeline stage %d: %d AttnRes blocks after layer %d, expected %d",
                         m->pp_rank, nR, m->layer1 - 1, blocks_before(m->c, m->layer1));
    float *packed = k3_alloc(sizeof(float) * (size_t)((nR + 1) * TD));
    if (!packed) return -1;
    for (int j = 0; j < nR; j++) memcpy(packed + j * TD, R[j], sizeof(float) * (size_t)TD);
    memcpy(packed + nR * TD, x, sizeof(float) * (size_t)TD);
    int rc = m->comm->send(m->comm->ctx, m->pp_rank - 1, packed, (size_t)((nR + 1) * TD));
    k3_free(packed);
    return rc ? k3_preferr("pipeline stage %d sending to stage %d", m->pp_rank, m->pp_rank - 1) : 0;
}
