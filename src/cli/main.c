/* main.c — the k3 command-line tool: dispatches to one subcommand. */
#include "cli/cli.h"
#include "dist/follow_cli.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

typedef struct {
    const char *name;
    int (*fn)(int, char **);
    const char *help;
} command;

static const command commands[] = {
    {"generate", cmd_generate, "generate text from a prompt (default: built-in random model)"},
    {"chat", cmd_chat, "interactive multi-turn chat in the terminal"},
    {"serve", cmd_serve, "OpenAI-compatible HTTP server"},
    {"logits", cmd_logits, "write float32 logits [T, vocab] for a token list"},
    {"tokenize", cmd_tokenize, "text on stdin -> comma-separated token ids"},
    {"detokenize", cmd_detokenize, "token ids on stdin -> text"},
    {"render", cmd_render, "OpenAI chat request JSON on stdin -> prompt string"},
    {"bench", cmd_bench, "prefill/decode tokens/s against the memory-bandwidth roofline"},
    {"quantize", cmd_quantize, "write an MLX-layout quantized checkpoint"},
    {"synth", cmd_synth, "write a random checkpoint in the release layout"},
};

static void usage(FILE *f) {
    fprintf(f, "usage: k3 COMMAND [options]   (k3 COMMAND --help for details)\n\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(f, "  %-11s %s\n", commands[i].name, commands[i].help);
    fprintf(f, "\noptions every command takes:\n"
               "  --byte-tokenizer  use a byte-level tokenizer (one id per byte) for a test\n"
               "                    checkpoint without tiktoken.model\n"
               "  --version         print the version\n"
               "Flags may be spelled with underscores (--max_tokens = --max-tokens).\n");
}

/* `k3 serve` shares the cores between HTTP threads, the clients it may run
 * beside, and the model's OpenMP threads. libgomp's default (spin 300000
 * PAUSEs, ~5.6 ms on Zen 5, before sleeping) and OMP_WAIT_POLICY=active
 * starve the others: one stream fell from 27.8 to 1.0 tok/s on a loaded
 * 2-core machine, and a 50-client round took 35 s instead of 3.3 (docs/serve.md).
 * Waiting passively (sleep at once) costs a futex wake-up at every region and
 * barrier of a decode step: 30% of bench-preset decode at 2 threads. So serve
 * spins a short, bounded while and then sleeps: K3_SERVE_SPINCOUNT PAUSEs
 * (~19 us on Zen 5). Measured (bench/notes/batching-and-serving.md, "Bounded spin"):
 * k3 bench decode at 2 threads 176-179 tok/s against 129-142 passive and
 * 183-190 with libgomp's default; beside a CPU hog 66 against 68-75 passive
 * and 31-37 default (3000 PAUSEs: 45). libgomp reads its settings when the
 * program starts, so set GOMP_SPINCOUNT and re-execute once, also over an
 * explicit OMP_WAIT_POLICY=active (with a note). An explicit GOMP_SPINCOUNT or
 * OMP_WAIT_POLICY=passive is kept; K3_SERVE_SPIN=1 keeps libgomp's own
 * spinning on purpose. */
#define K3_SERVE_SPINCOUNT "1000"

static void serve_bounds_spin_waits(int argc, char **argv) {
    if (argc < 2 || strcmp(argv[1], "serve")) return;
    if (getenv("GOMP_SPINCOUNT") || getenv("K3_SERVE_SPIN")) return;
    const char *p = getenv("OMP_WAIT_POLICY");
    if (p && *p && strcasecmp(p, "active")) return; /* passive (or another value) is kept */
    if (p && *p)
        fprintf(stderr, "k3 serve: OMP_WAIT_POLICY=active ignored: spinning OpenMP workers starve "
                        "the HTTP threads (bounded spin, GOMP_SPINCOUNT=" K3_SERVE_SPINCOUNT
                        "; K3_SERVE_SPIN=1 keeps spinning)\n");
    if (p) unsetenv("OMP_WAIT_POLICY"); /* active, or empty: libgomp's default spin */
    setenv("GOMP_SPINCOUNT", K3_SERVE_SPINCOUNT, 1);
    execv("/proc/self/exe", argv); /* returns only on failure: run on as we are */
}

#ifndef K3_GIT
#define K3_GIT "unknown"
#endif

/* What every command shares: "--max_tokens" is "--max-tokens" (mlx_lm and
 * llama.cpp users type both), and --byte-tokenizer is taken out of argv and
 * becomes K3_BYTE_TOKENIZER=1 (read where a tokenizer is opened). Only the
 * flag name is rewritten, never a value after '='. */
static int common_flags(int argc, char **argv) {
    int out = 0;
    for (int i = 0; i < argc; i++) {
        char *a = argv[i];
        if (a[0] == '-' && a[1] == '-' && a[2] && i > 0)
            for (char *p = a + 2; *p && *p != '='; p++)
                if (*p == '_') *p = '-';
        if (i > 1 && !strcmp(a, "--byte-tokenizer")) {
            setenv("K3_BYTE_TOKENIZER", "1", 1);
            continue;
        }
        argv[out++] = a;
    }
    argv[out] = NULL;
    return out;
}

static const char *command_name = "k3";

/* At exit (a return from main or any exit()): output that could not be
 * written — a full disk, a closed pipe — makes the run a failure. */
static void check_stdout(void) {
    errno = 0;
    if (fflush(stdout) == 0 && !ferror(stdout)) return;
    fprintf(stderr, "%s: writing the output failed%s%s\n", command_name, errno ? ": " : "",
            errno ? strerror(errno) : "");
    _exit(1);
}

int main(int argc, char **argv) {
    atexit(check_stdout);
    argc = common_flags(argc, argv);
    if (argc >= 2 && (!strcmp(argv[1], "--version") || !strcmp(argv[1], "version"))) {
        printf("k3 0.1 (git %s)\n", K3_GIT);
        return 0;
    }
    serve_bounds_spin_waits(argc, argv);
    int follower = k3_dist_main(argc, argv); /* under mpirun: ranks > 0 follow rank 0 */
    if (follower >= 0) return follower;
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (!strcmp(argv[1], commands[i].name)) {
            static char name[32];
            snprintf(name, sizeof name, "k3 %s", commands[i].name);
            command_name = name;
            return commands[i].fn(argc - 1, argv + 1);
        }
    fprintf(stderr, "k3: unknown command '%s' (k3 --help lists the commands)\n", argv[1]);
    return 2;
}
