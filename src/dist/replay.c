/* replay.c — "rank 0 drives, the other ranks follow" (replay.h): the driver's
 * model calls, told through the model's hooks table (model/hooks.h), are
 * broadcast over a k3_comm; the followers' loop executes them in order. All
 * state is one k3_dist_replay. */
#include "dist/replay.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "base/mem.h"
#include "model/hooks.h"
#include "model/model.h"
#include "model/parallel.h"

enum {
    OP_EXIT = 1,
    OP_LOAD,
    OP_FREE,
    OP_SEQ_NEW,
    OP_SEQ_FREE,
    OP_SEQ_CLONE,
    OP_SEQ_RESET,
    OP_FORWARD,
    OP_FORWARD_BATCH,
    OP_SPEC_COMMIT
};

struct k3_dist_replay {
    k3_model_hooks hooks; /* installed in the model while the group is set */
    const k3_comm *comm;  /* the group commands go over */
    int pipeline;
    const k3_comm *tp, *pp; /* TP x PP grid: the two groups (else NULL) */
    int following;          /* 1 while a follower executes a command (no re-broadcast) */
    int loading;            /* driver inside k3_model_load: its internal frees stay local */
    int64_t next_id;        /* driver: ids of sequences, in creation order */
    int released;           /* driver: the followers have left; nothing more is sent */
};

typedef struct {
    int64_t op, a, b, c, d;
} command;

static int driving(const k3_dist_replay *r) {
    return r->comm->rank == 0 && !r->following && !r->loading && !r->released;
}

static void bcast(const k3_dist_replay *r, void *buf, size_t bytes) {
    r->comm->bcast(r->comm->ctx, buf, bytes, 0);
}

static void send_cmd(const k3_dist_replay *r, int64_t op, int64_t a, int64_t b, int64_t c,
                     int64_t d) {
    command k = {op, a, b, c, d};
    bcast(r, &k, sizeof k);
}

static const k3_load_opts *hook_load(void *ctx, const char *dir, const k3_load_opts *opts,
                                     k3_load_opts *tmp) {
    k3_dist_replay *r = ctx;
    *tmp = opts ? *opts : (k3_load_opts){0};
    if (driving(r)) {
        send_cmd(r, OP_LOAD, (int64_t)strlen(dir) + 1, tmp->threads, tmp->cache_type, 0);
        bcast(r, (void *)dir, strlen(dir) + 1);
        r->loading = 1;
    }
    int rank = r->comm->rank, N = r->comm->size;
    tmp->tp_rank = r->pipeline ? 0 : rank, tmp->tp_size = r->pipeline ? 1 : N;
    tmp->pp_rank = r->pipeline ? rank : 0, tmp->pp_size = r->pipeline ? N : 1;
    if (r->tp) {
        tmp->tp_rank = r->tp->rank, tmp->tp_size = r->tp->size;
        tmp->pp_rank = r->pp->rank, tmp->pp_size = r->pp->size;
    }
    return tmp;
}

static k3_model *hook_loaded(void *ctx, k3_model *m) {
    k3_dist_replay *r = ctx;
    r->loading = 0;
    if (m && (r->tp ? k3_model_set_comms(m, r->tp, r->pp) : k3_model_set_comm(m, r->comm))) {
        k3_model_free(m);
        m = NULL;
    }
    /* agreement: number of ranks that failed; the failing ones print their reason */
    if (!m) fprintf(stderr, "k3 [rank %d/%d] %s\n", r->comm->rank, r->comm->size, k3_errmsg());
    float failed = m ? 0.0f : 1.0f;
    r->comm->allreduce_sum(r->comm->ctx, &failed, 1);
    if (failed > 0 && m) {
        r->loading = 1; /* the others free theirs themselves */
        k3_model_free(m);
        r->loading = 0;
        m = NULL;
        k3_seterr("%d of %d ranks failed to load their slice (see their messages)", (int)failed,
                  r->comm->size);
    }
    if (m) {
        char what[512];
        k3_model_describe_slice(m, what, sizeof what);
        fprintf(stderr, "k3 [rank %d/%d] %s, %.2f MB of weights mapped\n", r->comm->rank,
                r->comm->size, what, (double)k3_model_weight_bytes(m) / 1e6);
    }
    return m;
}

static void hook_free(void *ctx, k3_model *m) {
    k3_dist_replay *r = ctx;
    if (driving(r)) send_cmd(r, OP_FREE, 0, 0, 0, 0);
    (void)m;
}

static void hook_seq_new(void *ctx, k3_seq *s) {
    k3_dist_replay *r = ctx;
    if (driving(r)) {
        s->par_id = r->next_id++;
        send_cmd(r, OP_SEQ_NEW, s->par_id, 0, 0, 0);
    }
}

static void hook_seq_free(void *ctx, k3_seq *s) {
    k3_dist_replay *r = ctx;
    if (driving(r)) send_cmd(r, OP_SEQ_FREE, s->par_id, 0, 0, 0);
}

static void hook_seq_clone(void *ctx, const k3_seq *src, k3_seq *dst) {
    k3_dist_replay *r = ctx;
    if (driving(r)) send_cmd(r, OP_SEQ_CLONE, src->par_id, dst->par_id, 0, 0);
}

static void hook_seq_reset(void *ctx, k3_seq *s) {
    k3_dist_replay *r = ctx;
    if (driving(r)) send_cmd(r, OP_SEQ_RESET, s->par_id, 0, 0, 0);
}

static void hook_forward(void *ctx, k3_seq *s, const int32_t *tokens, int64_t n, int path) {
    k3_dist_replay *r = ctx;
    if (!driving(r)) return;
    send_cmd(r, OP_FORWARD, s->par_id, n, path, 0);
    bcast(r, (void *)tokens, sizeof(int32_t) * (size_t)n);
}

/* A batch: command (count, total tokens, path), then per item its sequence
 * id, token count, snapshot id (-1: none), snap_at and whether it is a
 * verify pass (k3_batch_item.verify), then all the tokens. */
enum { BATCH_HDR = 5 };

static void hook_forward_batch(void *ctx, const k3_batch_item *items, int n, int path) {
    k3_dist_replay *r = ctx;
    if (!driving(r)) return;
    int64_t total = 0;
    int64_t *hdr = k3_xmalloc(sizeof *hdr * (size_t)(BATCH_HDR * n));
    for (int i = 0; i < n; i++) {
        int64_t *h = hdr + BATCH_HDR * i;
        h[0] = items[i].seq->par_id, h[1] = items[i].n;
        h[2] = items[i].snap ? items[i].snap->par_id : -1, h[3] = items[i].snap_at;
        h[4] = items[i].verify;
        total += items[i].n;
    }
    int32_t *tok = k3_xmalloc(sizeof *tok * (size_t)total);
    for (int i = 0, at = 0; i < n; at += (int)items[i].n, i++)
        memcpy(tok + at, items[i].tokens, sizeof *tok * (size_t)items[i].n);
    send_cmd(r, OP_FORWARD_BATCH, n, total, path, 0);
    bcast(r, hdr, sizeof *hdr * (size_t)(BATCH_HDR * n));
    bcast(r, tok, sizeof *tok * (size_t)total);
    free(hdr);
    free(tok);
}

/* k3_seq_spec_commit: the followers keep the same rows of their verify pass. */
static void hook_spec_commit(void *ctx, k3_seq *s, int64_t keep) {
    k3_dist_replay *r = ctx;
    if (driving(r)) send_cmd(r, OP_SPEC_COMMIT, s->par_id, keep, 0, 0);
}

k3_dist_replay *k3_dist_replay_new(const k3_comm *comm, int pipeline) {
    if (!comm || comm->size <= 1) return NULL;
    k3_dist_replay *r = k3_xcalloc(1, sizeof *r);
    r->comm = comm, r->pipeline = pipeline, r->next_id = 1;
    r->hooks = (k3_model_hooks){r,
                                hook_load,
                                hook_loaded,
                                hook_free,
                                hook_seq_new,
                                hook_seq_free,
                                hook_seq_clone,
                                hook_seq_reset,
                                hook_forward,
                                hook_forward_batch,
                                hook_spec_commit};
    k3_model_set_hooks(&r->hooks);
    return r;
}

k3_dist_replay *k3_dist_replay_grid(const k3_comm *world, const k3_comm *tp, const k3_comm *pp) {
    k3_dist_replay *r = k3_dist_replay_new(world, 0);
    if (r) r->tp = tp, r->pp = pp;
    return r;
}

void k3_dist_replay_release(k3_dist_replay *r) {
    if (!r) return;
    if (driving(r)) send_cmd(r, OP_EXIT, 0, 0, 0, 0);
    r->released = 1; /* models still open keep this table: it stays, doing nothing */
    k3_model_set_hooks(NULL);
}

void k3_dist_replay_free(k3_dist_replay *r) {
    if (!r) return;
    k3_model_set_hooks(NULL);
    free(r);
}

/* ---- the follower ---- */

typedef struct {
    k3_dist_replay *r;
    k3_model *m;
    k3_seq **seq; /* by driver id */
    int64_t cap;
} follower;

static k3_seq **seq_slot(follower *f, int64_t id) {
    if (id >= f->cap) {
        int64_t cap = f->cap ? f->cap : 64;
        while (cap <= id) cap *= 2;
        f->seq = k3_xrealloc(f->seq, sizeof *f->seq * (size_t)cap);
        memset(f->seq + f->cap, 0, sizeof *f->seq * (size_t)(cap - f->cap));
        f->cap = cap;
    }
    return &f->seq[id];
}

static void drop_model(follower *f) {
    for (int64_t i = 0; i < f->cap; i++) {
        k3_seq_free(f->seq[i]);
        f->seq[i] = NULL;
    }
    k3_model_free(f->m);
    f->m = NULL;
}

/* One command; -1 if it failed on this rank. */
static int execute(follower *f, const command *k) {
    const k3_dist_replay *r = f->r;
    switch (k->op) {
    case OP_LOAD: {
        char *dir = k3_xmalloc((size_t)k->a);
        bcast(r, dir, (size_t)k->a);
        dir[k->a - 1] = 0;
        drop_model(f);
        k3_load_opts o = {.threads = (int)k->b, .cache_type = (int)k->c};
        f->m = k3_model_load(dir, &o);
        free(dir);
        return f->m ? 0 : -1;
    }
    case OP_FREE:
        drop_model(f);
        return 0;
    case OP_SEQ_NEW:
        if (!f->m) return k3_seterr("sequence for a model that failed to load");
        *seq_slot(f, k->a) = k3_seq_new(f->m);
        return 0;
    case OP_SEQ_FREE:
        k3_seq_free(*seq_slot(f, k->a));
        *seq_slot(f, k->a) = NULL;
        return 0;
    case OP_SEQ_CLONE: { /* the driver's clone made an empty sequence (OP_SEQ_NEW) first */
        k3_seq *src = *seq_slot(f, k->a);
        if (!src) return k3_seterr("clone of unknown sequence %lld", (long long)k->a);
        k3_seq_free(*seq_slot(f, k->b));
        *seq_slot(f, k->b) = k3_seq_clone(src);
        return 0;
    }
    case OP_SEQ_RESET:
        if (*seq_slot(f, k->a)) k3_seq_reset(*seq_slot(f, k->a));
        return 0;
    case OP_FORWARD: {
        int32_t *tok = k3_xmalloc(sizeof(int32_t) * (size_t)(k->b ? k->b : 1));
        bcast(r, tok, sizeof(int32_t) * (size_t)k->b);
        k3_seq *s = *seq_slot(f, k->a);
        int rc = s ? k3_forward_path(s, tok, k->b, NULL, 0, (int)k->c)
                   : k3_seterr("forward on unknown sequence %lld", (long long)k->a);
        free(tok);
        return rc;
    }
    case OP_FORWARD_BATCH: {
        int n = (int)k->a;
        int64_t *hdr = k3_xmalloc(sizeof *hdr * (size_t)(BATCH_HDR * n));
        int32_t *tok = k3_xmalloc(sizeof *tok * (size_t)(k->b ? k->b : 1));
        k3_batch_item *it = k3_xcalloc((size_t)n, sizeof *it);
        bcast(r, hdr, sizeof *hdr * (size_t)(BATCH_HDR * n));
        bcast(r, tok, sizeof *tok * (size_t)k->b);
        int rc = 0;
        for (int i = 0, at = 0; i < n; at += (int)hdr[BATCH_HDR * i + 1], i++) {
            const int64_t *h = hdr + BATCH_HDR * i;
            it[i] = (k3_batch_item){
                .seq = *seq_slot(f, h[0]), .tokens = tok + at, .n = h[1], .verify = (int)h[4]};
            if (!it[i].seq) rc = k3_seterr("forward on unknown sequence %lld", (long long)h[0]);
            if (h[2] >= 0) {
                it[i].snap = *seq_slot(f, h[2]), it[i].snap_at = h[3];
                if (!it[i].snap)
                    rc = k3_seterr("snapshot to unknown sequence %lld", (long long)h[2]);
            }
        }
        if (!rc) rc = k3_forward_batch_path(it, n, (int)k->c);
        free(hdr);
        free(tok);
        free(it);
        return rc;
    }
    case OP_SPEC_COMMIT: {
        k3_seq *s = *seq_slot(f, k->a);
        return s ? k3_seq_spec_commit(s, k->b)
                 : k3_seterr("commit on unknown sequence %lld", (long long)k->a);
    }
    }
    return k3_seterr("unknown command %lld from the driver", (long long)k->op);
}

int k3_dist_replay_follow(k3_dist_replay *r) {
    if (!r) return 0;
    follower f = {.r = r};
    int failed = 0;
    r->following = 1;
    for (;;) {
        command k;
        if (bcast(r, &k, sizeof k), k.op == OP_EXIT) break;
        if (execute(&f, &k)) {
            failed = 1;
            if (k.op != OP_LOAD) /* load failures were reported by the agreement */
                fprintf(stderr, "k3 [rank %d/%d] %s\n", r->comm->rank, r->comm->size, k3_errmsg());
        }
    }
    drop_model(&f);
    free(f.seq);
    r->following = 0;
    return failed;
}
