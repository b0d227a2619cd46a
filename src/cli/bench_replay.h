/* bench_replay.h — `k3 bench --replay FILE.jsonl` (bench_replay.c). */
#ifndef K3_CLI_BENCH_REPLAY_H
#define K3_CLI_BENCH_REPLAY_H

/* 1 if argv asks for a replay (--replay or --verify-cost). */
int k3_bench_is_replay(int argc, char **argv);
/* The whole replay command: parse, run, print. Exit status 0, 1 or 2. */
int k3_bench_replay(int argc, char **argv);

#endif
