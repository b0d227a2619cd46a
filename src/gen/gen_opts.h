/* gen_opts.h — the command-line flags shared by `k3 generate` and `k3 chat`
 * (names as in mlx_lm.generate / llama-cli), parsed into one struct. */
#ifndef K3_GEN_GEN_OPTS_H
#define K3_GEN_GEN_OPTS_H

#include <stdio.h>

#include "gen/draft.h"
#include "gen/sampler.h"

#define K3_GEN_MAX_STOPS 16

typedef struct k3_gen_opts {
    const char *model;       /* NULL: the built-in random model */
    const char *prompt;      /* "-": read stdin; NULL: none given */
    const char *prompt_file; /* -f/--file: the prompt is this file's text (generate) */
    int ctx_size;            /* -c/--ctx-size: prompt + answer tokens at most (0 = no limit) */
    int cache_type;          /* --cache-type: K3_CACHE_F32 (default) or K3_CACHE_BF16 */
    const char *system;
    int max_tokens;
    k3_sampler_params sp;
    const char *stops[K3_GEN_MAX_STOPS];
    int n_stops;
    int thinking;      /* 1 (default): think channel opened */
    int chat_template; /* 0: --no-chat-template (raw prompt) */
    int threads;       /* 0: OpenMP default */
    int act_int8;      /* --act-int8: int8 activations in quantized decode (lossy, opt-in) */
    int verbose;
    int spec;          /* --spec ngram|off: speculative decoding from the context */
    int spec_max;      /* --spec-max K: drafts per step at most (1..16) */
    int has_spec_cost; /* --spec-cost given */
    double spec_cost[K3_DRAFT_MAX + 1]; /* its table (gen/spec.h k3_spec_cost_parse) */
} k3_gen_opts;

/* --spec-max's default: the drafts one step verifies at most. */
#define K3_GEN_SPEC_MAX 8

/* The drafts per step these options ask for (0: speculation off). */
static inline int k3_gen_opts_spec(const k3_gen_opts *o) {
    return o->spec ? o->spec_max : 0;
}

/* Parse argv[1..argc) for command `cmd` ("generate" / "chat"; chat has no
 * --prompt). Returns 0, 1 after printing --help, or 2 after printing an
 * error naming the flag (one line; an unknown flag points at --help). The
 * spellings of llama-cli and mlx_lm.generate are accepted too: -n, -t, -c /
 * --ctx-size, -s, -f / --file, --system-prompt, --ignore-chat-template,
 * --repeat-penalty, --repeat-last-n; -m DIR (llama-cli's model flag) is taken
 * as --model when DIR is a directory, since k3's -m N is --max-tokens. --act-int8 also sets
 * K3_ACT=int8 in the environment, which turns on the int8-activation path (kernels/matvec_i8.h)
 * process-wide. */
int k3_gen_opts_parse(int argc, char **argv, const char *cmd, k3_gen_opts *o);
void k3_gen_opts_usage(FILE *f, const char *cmd);

#endif
