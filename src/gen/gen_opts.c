/* gen_opts.c — parsing the generation flags (see gen_opts.h). */
#include "gen/gen_opts.h"

#include "base/err.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

void k3_gen_opts_usage(FILE *f, const char *cmd) {
    int gen = !strcmp(cmd, "generate");
    fprintf(f, "usage: k3 %s [--model DIR]%s [options]\n\n", cmd, gen ? " [--prompt TEXT|-]" : "");
    fprintf(f, "  --model DIR                  checkpoint directory (default: the built-in tiny\n"
               "                               model with random weights)\n");
    if (gen)
        fprintf(
            f, "  -p, --prompt TEXT            the prompt; '-' reads stdin (default: \"Hello\")\n");
    fprintf(f,
            "  -m, --max-tokens N           tokens to generate (default 256)\n"
            "  --temp T                     temperature; 0 = greedy (default 0)\n"
            "  --top-p P                    nucleus sampling mass (default 1 = off)\n"
            "  --top-k K                    keep the K most likely tokens (default 0 = off)\n"
            "  --min-p P                    drop tokens below P x the top probability (0 = off)\n"
            "  --repetition-penalty R       penalise recent tokens (default 1 = off)\n"
            "  --repetition-context-size N  how many recent tokens (default 20)\n"
            "  --seed N                     sampling seed (default 0)\n"
            "  --stop STRING                stop when STRING appears (repeatable)\n"
            "  --system TEXT                system message\n"
            "  --thinking on|off            open the think channel (default on)\n"
            "  --no-chat-template           %s\n"
            "  --threads N                  worker threads (default: all cores)\n"
            "  --act-int8                   int8 activations for quantized decode (AVX-512\n"
            "                               VNNI; faster, lossy, off by default)\n"
            "  --verbose                    token ids and prefill counts on stderr\n",
            gen ? "use the prompt as raw text (control token spellings allowed)"
                : "(not available in chat)");
}

static int bad(const char *cmd, const char *flag, const char *val, const char *want) {
    fprintf(stderr, "k3 %s: %s expects %s, got '%s'\n", cmd, flag, want, val);
    return 2;
}

static int to_int(const char *s, int *out) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (!*s || *end || errno || v < -2147483647L || v > 2147483647L) return -1;
    *out = (int)v;
    return 0;
}

static int to_float(const char *s, float *out) {
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (!*s || *end || errno || !isfinite(v)) return -1;
    *out = (float)v;
    return 0;
}

static int to_u64(const char *s, uint64_t *out) {
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (!*s || *end || errno || *s == '-') return -1;
    *out = v;
    return 0;
}

/* Flags that take a value; returns 0, or 2 after an error message. */
static int take_value(k3_gen_opts *o, const char *cmd, const char *a, const char *v) {
    if (!strcmp(a, "--model"))
        o->model = v;
    else if (!strcmp(a, "--prompt") || !strcmp(a, "-p"))
        o->prompt = v;
    else if (!strcmp(a, "--system"))
        o->system = v;
    else if (!strcmp(a, "-m") || !strcmp(a, "--max-tokens")) {
        if (to_int(v, &o->max_tokens) || o->max_tokens < 0)
            return bad(cmd, a, v, "an integer >= 0");
    } else if (!strcmp(a, "--temp") || !strcmp(a, "--temperature")) {
        if (to_float(v, &o->sp.temp)) return bad(cmd, a, v, "a number");
    } else if (!strcmp(a, "--top-p")) {
        if (to_float(v, &o->sp.top_p)) return bad(cmd, a, v, "a number");
    } else if (!strcmp(a, "--min-p")) {
        if (to_float(v, &o->sp.min_p)) return bad(cmd, a, v, "a number");
    } else if (!strcmp(a, "--top-k")) {
        if (to_int(v, &o->sp.top_k)) return bad(cmd, a, v, "an integer");
    } else if (!strcmp(a, "--repetition-penalty")) {
        if (to_float(v, &o->sp.rep_penalty)) return bad(cmd, a, v, "a number");
    } else if (!strcmp(a, "--repetition-context-size")) {
        if (to_int(v, &o->sp.rep_context)) return bad(cmd, a, v, "an integer");
    } else if (!strcmp(a, "--seed")) {
        if (to_u64(v, &o->sp.seed)) return bad(cmd, a, v, "a non-negative integer");
    } else if (!strcmp(a, "--threads")) {
        if (to_int(v, &o->threads) || o->threads < 0) return bad(cmd, a, v, "an integer >= 0");
    } else if (!strcmp(a, "--thinking")) {
        if (strcmp(v, "on") && strcmp(v, "off")) return bad(cmd, a, v, "on or off");
        o->thinking = !strcmp(v, "on");
    } else if (!strcmp(a, "--stop")) {
        if (o->n_stops == K3_GEN_MAX_STOPS) return bad(cmd, a, v, "at most 16 stop strings");
        if (!*v) return bad(cmd, a, v, "a non-empty string");
        o->stops[o->n_stops++] = v;
    } else {
        return -1; /* not a value flag */
    }
    return 0;
}

int k3_gen_opts_parse(int argc, char **argv, const char *cmd, k3_gen_opts *o) {
    memset(o, 0, sizeof *o);
    o->max_tokens = 256;
    o->sp = k3_sampler_defaults();
    o->thinking = 1;
    o->chat_template = 1;
    int gen = !strcmp(cmd, "generate");
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            k3_gen_opts_usage(stdout, cmd);
            return 1;
        }
        if (!strcmp(a, "--verbose") || !strcmp(a, "-v")) {
            o->verbose = 1;
            continue;
        }
        if (!strcmp(a, "--act-int8")) {
            /* the same as K3_ACT=int8, which kernels/matvec_i8.c reads at the first product
             * (parsing comes before any model work); setting the variable keeps this file
             * free of kernel dependencies (the options fuzzer links it alone) */
            o->act_int8 = 1;
            setenv("K3_ACT", "int8", 1);
            continue;
        }
        if (!strcmp(a, "--no-chat-template") && gen) {
            o->chat_template = 0;
            continue;
        }
        if (!gen && (!strcmp(a, "--prompt") || !strcmp(a, "-p"))) {
            fprintf(stderr,
                    "k3 chat: --prompt is for k3 generate; chat reads its turns from stdin\n");
            return 2;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "k3 %s: %s: unknown flag or missing value\n", cmd, a);
            k3_gen_opts_usage(stderr, cmd);
            return 2;
        }
        int rc = take_value(o, cmd, a, argv[i + 1]);
        if (rc == -1) {
            fprintf(stderr, "k3 %s: unknown flag %s\n", cmd, a);
            k3_gen_opts_usage(stderr, cmd);
            return 2;
        }
        if (rc) return rc;
        i++;
    }
    if (k3_sampler_check(&o->sp)) {
        fprintf(stderr, "k3 %s: %s\n", cmd, k3_errmsg());
        return 2;
    }
    return 0;
}
