/* follow_cli.h — the k3 command under mpirun: rank 0 runs the subcommand, the others follow.
 *
 * main() calls k3_dist_main first. Outside mpirun, with one rank, or for
 * `k3 logits` (which runs the same program on every rank and splits the model
 * itself, see cmd_logits.c) it returns -1 and main dispatches as usual. With
 * N > 1 ranks and any other subcommand, rank 0 returns -1 too and runs the
 * subcommand as the driver (dist/replay.h), while ranks 1..N-1 never run it:
 * they follow the driver's model calls and k3_dist_main returns their exit
 * code. K3_PIPELINE=1 splits by layer ranges instead of tensor slices. */
#ifndef K3_DIST_FOLLOW_CLI_H
#define K3_DIST_FOLLOW_CLI_H

int k3_dist_main(int argc, char **argv);

#endif
