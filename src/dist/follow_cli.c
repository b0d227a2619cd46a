/* follow_cli.c — driver/follower start-up of the k3 command (see follow_cli.h). */
#include "dist/follow_cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "dist/dist.h"
#include "dist/replay.h"

/* This process's driver/follower group (one per process: the MPI world). */
static k3_dist_replay *replay;

/* Rank 0 at exit: release the followers, then leave MPI together with them. */
static void driver_exit(int status, void *arg) {
    (void)status, (void)arg;
    k3_dist_replay_release(replay);
    k3_dist_finalize();
}

int k3_dist_main(int argc, char **argv) {
    if (!k3_dist_launched() || argc < 2 || !strcmp(argv[1], "logits")) return -1;
    if (k3_dist_init()) {
        fprintf(stderr, "k3: %s\n", k3_errmsg());
        return 1;
    }
    if (k3_dist_size() == 1) return -1;
    const char *pp = getenv("K3_PIPELINE"), *st = getenv("K3_PIPELINE_STAGES");
    int stages = st && *st ? atoi(st) : 0, N = k3_dist_size();
    const k3_comm *tpc, *ppc;
    if (stages > 1 && stages < N) { /* TP groups of N / stages inside each stage */
        if (N % stages || k3_dist_grid(N / stages, &tpc, &ppc)) {
            if (k3_dist_rank() == 0)
                fprintf(stderr, "k3: K3_PIPELINE_STAGES=%d over %d ranks: %s\n", stages, N,
                        N % stages ? "the stage count must divide the rank count" : k3_errmsg());
            k3_dist_finalize();
            return 2;
        }
        replay = k3_dist_replay_grid(k3_dist_comm(), tpc, ppc);
    } else {
        replay = k3_dist_replay_new(k3_dist_comm(), stages == N || (pp && *pp && strcmp(pp, "0")));
    }
    if (k3_dist_rank() == 0) {
        on_exit(driver_exit, NULL);
        return -1;
    }
    int rc = k3_dist_replay_follow(replay);
    k3_dist_replay_free(replay);
    k3_dist_finalize();
    return rc;
}
