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
    return k3_dist_model_load_stages(dir, opts, pipeline ? k3_dist_size() : 1);
}

k3_model *k3_dist_model_load_stages(const char *dir, const k3_load_opts *opts, int stages) {
    if (k3_dist_init()) return NULL;
    int N = k3_dist_size(), r = k3_dist_rank();
    k3_load_opts o = opts ? *opts : (k3_load_opts){0};
    o.tp_rank = o.pp_rank = 0;
    o.tp_size = o.pp_size = 1;
    const k3_comm *tpc = NULL, *ppc = NULL;
    int bad = stages < 1 || stages > N || N % stages;
    if (bad)
        k3_seterr("%d pipeline stages over %d ranks: the stage count must divide the rank count",
                  stages, N);
    else if (N > 1 && stages > 1 && stages < N && k3_dist_grid(N / stages, &tpc, &ppc))
        bad = 1;
    if (bad) {
        k3_dist_all_ok(0);
        return NULL;
    }
    if (N > 1 && stages > 1) o.pp_rank = r / (N / stages), o.pp_size = stages;
    if (N > 1 && stages < N) o.tp_rank = r % (N / stages), o.tp_size = N / stages;
    k3_model *m = k3_model_load(dir, &o);
    int rc = 0;
    if (m && N > 1)
        rc = tpc ? k3_model_set_comms(m, tpc, ppc) : k3_model_set_comm(m, k3_dist_comm());
    if (rc) {
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
