/* launch.c — model slice loading with group-wide failure agreement (see launch.h). */
#include "dist/launch.h"

#include <stdio.h>

#include "base/err.h"
#include "dist/dist.h"
#include "model/parallel.h"

int k3_dist_is_root(void) {
    return k3_dist_rank() == 0;
}

k3_model *k3_dist_model_load(const char *dir, const k3_load_opts *opts, int pipeline) {
    if (k3_dist_init()) return NULL;
    int N = k3_dist_size(), r = k3_dist_rank();
    k3_load_opts o = opts ? *opts : (k3_load_opts){0};
    o.tp_rank = o.pp_rank = 0;
    o.tp_size = o.pp_size = 1;
    if (N > 1 && pipeline)
        o.pp_rank = r, o.pp_size = N;
    else if (N > 1)
        o.tp_rank = r, o.tp_size = N;
    k3_model *m = k3_model_load(dir, &o);
    if (m && N > 1 && k3_model_set_comm(m, k3_dist_comm())) {
        k3_model_free(m);
        m = NULL;
    }
    if (!m) k3_preferr("loading %s", dir);
    if (k3_dist_all_ok(m != NULL)) { /* every rank learns the first failure */
        k3_model_free(m);
        return NULL;
    }
    if (N > 1) {
        char what[512];
        k3_model_describe_slice(m, what, sizeof what);
        fprintf(stderr, "k3 %s%s, %.2f MB of weights mapped\n", k3_dist_tag(), what,
                (double)k3_model_weight_bytes(m) / 1e6);
    }
    return m;
}
