/* hooks.h — the table through which the model tells a layer above it about
 * each public call, before running it.
 *
 * Under mpirun the driver rank runs the program and the follower ranks repeat
 * its model calls (dist/replay.h), so that the all-reduces and pipeline
 * hand-offs inside each call meet. The model does not know MPI: it calls these
 * functions, which dist fills in, as it calls the k3_comm of comm.h. With no
 * table installed (a plain process) nothing is called. */
#ifndef K3_MODEL_HOOKS_H
#define K3_MODEL_HOOKS_H

#include "k3.h"

typedef struct k3_model_hooks {
    void *ctx; /* the first argument of every function; load and loaded are
                  required, the others may be NULL */
    /* Before loading: return the opts to load with (this rank's slice, in *tmp). */
    const k3_load_opts *(*load)(void *ctx, const char *dir, const k3_load_opts *opts,
                                k3_load_opts *tmp);
    /* After loading (m NULL on failure here): the model every rank agreed on, or NULL. */
    k3_model *(*loaded)(void *ctx, k3_model *m);
    void (*free)(void *ctx, k3_model *m);
    void (*seq_new)(void *ctx, k3_seq *s);
    void (*seq_free)(void *ctx, k3_seq *s);
    void (*seq_clone)(void *ctx, const k3_seq *src, k3_seq *dst);
    void (*seq_reset)(void *ctx, k3_seq *s);
    void (*forward)(void *ctx, k3_seq *s, const int32_t *tokens, int64_t n, int path);
    void (*forward_batch)(void *ctx, const k3_batch_item *items, int n, int path);
    /* k3_seq_spec_commit(s, keep): the followers keep the same rows. */
    void (*spec_commit)(void *ctx, k3_seq *s, int64_t keep);
} k3_model_hooks;

/* Install the table for the models loaded from now on (NULL: none). A model
 * keeps the table it was loaded with. Call before any model is loaded. */
void k3_model_set_hooks(const k3_model_hooks *h);

#endif
