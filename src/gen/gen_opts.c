/* gen_opts.c — parsing the generation flags (see gen_opts.h). */
#include "gen/gen_opts.h"

#include "base/err.h"
#include "gen/spec_cost.h"
#include "k3.h"
#include "model/plan.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

void k3_gen_opts_usage(FILE *f, const char *cmd) {
    int gen = !strcmp(cmd, "generate");
    fprintf(f, "usage: k3 %s [--model DIR]%s [options]\n\n", cmd, gen ? " [--prompt TEXT|-]" : "");
    fprintf(f, "  --model DIR                  checkpoint directory (default: the built-in tiny\n"
               "                               model with random weights)\n");
    if (gen)
        fprintf(f,
                "  -p, --prompt TEXT            the prompt; '-' reads stdin (default: \"Hello\")\n"
                "  -f, --file FILE              the prompt is the text of FILE\n");
    fprintf(f,
            "  -m, -n, --max-tokens N       tokens to generate (default 256)\n"
            "  -c, --ctx-size N             prompt + answer tokens at most, 1..1048576 (default:\n"
            "                               no limit); the memory for one sequence at N (state\n"
            "                               + MLA latents) is checked against RAM at start\n"
            "  --cache-type f32|bf16        the MLA latent cache's element (default f32, exact;\n"
            "                               bf16 halves its bytes, ~1e-3 of the logit scale)\n"
            "  --temp T                     temperature; 0 = greedy (default 0)\n"
            "  --top-p P                    nucleus sampling mass (default 1 = off)\n"
            "  --top-k K                    keep the K most likely tokens (default 0 = off)\n"
            "  --min-p P                    drop tokens below P x the top probability (0 = off)\n"
            "  --repetition-penalty R       penalise recent tokens (default 1 = off;\n"
            "                               also --repeat-penalty)\n"
            "  --repetition-context-size N  how many recent tokens, 0..%d (default 20;\n"
            "                               also --repeat-last-n)\n"
            "  -s, --seed N                 sampling seed (default 0)\n"
            "  --stop STRING                stop when STRING appears (repeatable)\n"
            "  --system TEXT                system message (also --system-prompt)\n"
            "  --thinking on|off            open the think channel (default on)\n"
            "  --no-chat-template           %s\n"
            "  -t, --threads N              worker threads (default: all cores)\n"
            "  --byte-tokenizer             one id per byte, for a test checkpoint without\n"
            "                               tiktoken.model\n"
            "  --act-int8                   int8 activations for quantized decode (AVX-512\n"
            "                               VNNI; faster, lossy, off by default)\n"
            "  --spec ngram|off             speculative decoding: drafts from the context's\n"
            "                               own n-grams, verified in one pass (default ngram)\n"
            "  --spec-max K                 drafts per step at most, 1..16 (default 8)\n"
            "  --spec-cost c1,...,cK        the cost of verifying 1..K drafts in plain steps\n"
            "                               (k3 bench --verify-cost K measures it; default:\n"
            "                               the model's estimate); no more than K drafts\n"
            "  --verbose                    token ids and prefill counts on stderr\n"
            "Underscores work as dashes (--max_tokens).\n",
            K3_SAMPLER_MAX_REP_CONTEXT,
            gen ? "use the prompt as raw text (control token spellings allowed;\n"
                  "                               also --ignore-chat-template)"
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

static int is_dir(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

static int is(const char *a, const char *x, const char *y) {
    return !strcmp(a, x) || (y && !strcmp(a, y));
}

/* Flags that take a value; returns 0, -1 if a is not one, or 2 after an error message. */
static int take_value(k3_gen_opts *o, const char *cmd, const char *a, const char *v) {
    int gen = !strcmp(cmd, "generate");
    if (!strcmp(a, "--model"))
        o->model = v;
    else if (gen && is(a, "--prompt", "-p"))
        o->prompt = v;
    else if (gen && is(a, "--file", "-f"))
        o->prompt_file = v;
    else if (is(a, "--system", "--system-prompt"))
        o->system = v;
    else if (is(a, "-m", NULL) && to_int(v, &o->max_tokens) && is_dir(v)) {
        /* llama-cli's -m MODEL: unambiguous, since a directory is no token count */
        fprintf(stderr,
                "[k3] -m %s: taking the directory as --model (in k3, -m N is "
                "--max-tokens)\n",
                v);
        o->model = v;
        o->max_tokens = 256;
    } else if (is(a, "-m", "--max-tokens") || is(a, "-n", "--n-predict")) {
        if (to_int(v, &o->max_tokens) || o->max_tokens < 0)
            return bad(cmd, a, v, "an integer >= 0 (the model directory is --model DIR)");
    } else if (is(a, "-c", "--ctx-size")) {
        if (to_int(v, &o->ctx_size) || o->ctx_size < 0 || o->ctx_size > K3_CTX_MAX)
            return bad(cmd, a, v, "an integer 0..1048576");
    } else if (!strcmp(a, "--cache-type")) {
        if (k3_cache_type_parse(v, &o->cache_type)) return bad(cmd, a, v, "f32 or bf16");
    } else if (is(a, "--temp", "--temperature")) {
        if (to_float(v, &o->sp.temp)) return bad(cmd, a, v, "a number");
    } else if (!strcmp(a, "--top-p")) {
        if (to_float(v, &o->sp.top_p)) return bad(cmd, a, v, "a number");
    } else if (!strcmp(a, "--min-p")) {
        if (to_float(v, &o->sp.min_p)) return bad(cmd, a, v, "a number");
    } else if (!strcmp(a, "--top-k")) {
        if (to_int(v, &o->sp.top_k)) return bad(cmd, a, v, "an integer");
    } else if (is(a, "--repetition-penalty", "--repeat-penalty")) {
        if (to_float(v, &o->sp.rep_penalty)) return bad(cmd, a, v, "a number");
    } else if (is(a, "--repetition-context-size", "--repeat-last-n")) {
        if (to_int(v, &o->sp.rep_context)) return bad(cmd, a, v, "an integer");
    } else if (is(a, "--seed", "-s")) {
        if (to_u64(v, &o->sp.seed)) return bad(cmd, a, v, "a non-negative integer");
    } else if (is(a, "--threads", "-t")) {
        if (to_int(v, &o->threads) || o->threads < 0) return bad(cmd, a, v, "an integer >= 0");
    } else if (!strcmp(a, "--thinking")) {
        if (strcmp(v, "on") && strcmp(v, "off")) return bad(cmd, a, v, "on or off");
        o->thinking = !strcmp(v, "on");
    } else if (!strcmp(a, "--spec")) {
        if (strcmp(v, "ngram") && strcmp(v, "off")) return bad(cmd, a, v, "ngram or off");
        o->spec = !strcmp(v, "ngram");
    } else if (!strcmp(a, "--spec-max")) {
        if (to_int(v, &o->spec_max) || o->spec_max < 1 || o->spec_max > 16)
            return bad(cmd, a, v, "an integer 1..16");
    } else if (!strcmp(a, "--spec-cost")) {
        if (k3_spec_cost_parse(v, o->spec_cost)) {
            fprintf(stderr, "k3 %s: %s\n", cmd, k3_errmsg());
            return 2;
        }
        o->has_spec_cost = 1;
    } else if (!strcmp(a, "--stop")) {
        if (o->n_stops == K3_GEN_MAX_STOPS) return bad(cmd, a, v, "at most 16 stop strings");
        if (!*v) return bad(cmd, a, v, "a non-empty string");
        o->stops[o->n_stops++] = v;
    } else {
        return -1; /* not a value flag */
    }
    return 0;
}

static const char *const value_flags[] = {"--model",
                                          "--prompt",
                                          "-p",
                                          "--file",
                                          "-f",
                                          "--system",
                                          "--system-prompt",
                                          "-m",
                                          "--max-tokens",
                                          "-n",
                                          "--n-predict",
                                          "-c",
                                          "--ctx-size",
                                          "--cache-type",
                                          "--temp",
                                          "--temperature",
                                          "--top-p",
                                          "--min-p",
                                          "--top-k",
                                          "--repetition-penalty",
                                          "--repeat-penalty",
                                          "--repetition-context-size",
                                          "--repeat-last-n",
                                          "--seed",
                                          "-s",
                                          "--threads",
                                          "-t",
                                          "--thinking",
                                          "--spec",
                                          "--spec-max",
                                          "--spec-cost",
                                          "--stop"};

static int unknown(const char *cmd, const char *a) {
    fprintf(stderr, "k3 %s: unknown option '%s' (k3 %s --help lists the options)\n", cmd, a, cmd);
    return 2;
}

int k3_gen_opts_parse(int argc, char **argv, const char *cmd, k3_gen_opts *o) {
    memset(o, 0, sizeof *o);
    o->max_tokens = 256;
    o->sp = k3_sampler_defaults();
    o->thinking = 1;
    o->chat_template = 1;
    o->spec = 1;
    o->spec_max = K3_GEN_SPEC_MAX;
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
        if (!strcmp(a, "--byte-tokenizer")) { /* (main.c takes it out of argv first) */
            setenv("K3_BYTE_TOKENIZER", "1", 1);
            continue;
        }
        if (gen && (!strcmp(a, "--no-chat-template") || !strcmp(a, "--ignore-chat-template"))) {
            o->chat_template = 0;
            continue;
        }
        if (!gen && (is(a, "--prompt", "-p") || is(a, "--file", "-f"))) {
            fprintf(stderr,
                    "k3 chat: %s is for k3 generate; chat reads its turns from stdin "
                    "(k3 chat < FILE)\n",
                    a);
            return 2;
        }
        int known = 0;
        for (size_t k = 0; k < sizeof value_flags / sizeof value_flags[0]; k++)
            known |= !strcmp(a, value_flags[k]);
        if (!known) return unknown(cmd, a);
        if (i + 1 >= argc) {
            fprintf(stderr, "k3 %s: %s needs a value\n", cmd, a);
            return 2;
        }
        int rc = take_value(o, cmd, a, argv[i + 1]);
        if (rc == -1) return unknown(cmd, a);
        if (rc) return rc;
        i++;
    }
    if (gen && o->prompt && o->prompt_file) {
        fprintf(stderr, "k3 generate: give the prompt with --prompt or --file, not both\n");
        return 2;
    }
    if (k3_sampler_check(&o->sp)) {
        fprintf(stderr, "k3 %s: %s\n", cmd, k3_errmsg());
        return 2;
    }
    return 0;
}
