/* cmd_logits.c — `k3 logits`: float32 logits [T, vocab] (row-major) for a token list.
 *
 *   k3 logits --model DIR --tokens 1,2,3 --out FILE [--mode prefill|decode|chunked:N]
 *             [--threads N] [--pipeline | --pipeline-stages S] [--act-int8]
 *             [--cache-type f32|bf16]
 *
 * Under `mpirun -np N` the model is split N ways (tensor parallel, layer
 * ranges with --pipeline, or S stages of N/S-way tensor parallel groups with
 * --pipeline-stages S; src/dist/launch.h) and rank 0 writes FILE.
 *
 * prefill feeds all tokens in one call, decode one token per call, chunked:N
 * N tokens per call; all three must give the same logits (the caches carry the
 * state between calls). Errors go to stderr with a non-zero exit. */
#include "cli/cli.h"
#include "dist/dist.h"
#include "dist/launch.h"
#include "k3.h"
#include "kernels/kernels.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *f) {
    fprintf(f, "usage: k3 logits --model DIR --tokens 1,2,3 --out FILE\n"
               "                 [--mode prefill|decode|chunked:N] [--threads N] [--pipeline]\n"
               "                 [--pipeline-stages S] [--act-int8] [--cache-type f32|bf16]\n"
               "writes float32 logits [T, vocab], row-major, to FILE\n"
               "under mpirun -np N: tensor parallel over N ranks (--pipeline: layer ranges;\n"
               "--pipeline-stages S: S stages, each an N/S-way tensor-parallel group),\n"
               "rank 0 writes FILE\n"
               "--act-int8: int8 activations in quantized one-token (decode) products\n"
               "(AVX-512 VNNI; lossy, off by default)\n"
               "--cache-type f32|bf16: the MLA latent cache's element (default f32, exact;\n"
               "bf16 halves its bytes per token, docs/performance.md gives its accuracy)\n");
}

/* Strict comma-separated non-negative integers. */
static int32_t *parse_tokens(const char *s, int64_t *n) {
    int64_t cap = 16, k = 0;
    int32_t *t = malloc(sizeof *t * (size_t)cap);
    const char *p = s;
    while (t && *p) {
        char *end;
        errno = 0;
        long v = strtol(p, &end, 10);
        if (end == p || errno || v < 0 || v > INT32_MAX || (*end && *end != ',')) {
            fprintf(stderr, "k3 logits: --tokens: expected comma-separated token ids, got \"%s\"\n",
                    s);
            free(t);
            return NULL;
        }
        if (k == cap) t = realloc(t, sizeof *t * (size_t)(cap *= 2));
        if (!t) break;
        t[k++] = (int32_t)v;
        p = *end ? end + 1 : end;
        if (*end == ',' && !*p) break; /* trailing comma */
    }
    if (t && !k) {
        fprintf(stderr, "k3 logits: --tokens: no token ids given\n");
        free(t);
        return NULL;
    }
    *n = k;
    return t;
}

/* prefill → n, decode → 1, chunked:N → N; 0 on error. */
static int64_t parse_mode(const char *m, int64_t n) {
    if (!strcmp(m, "prefill")) return n;
    if (!strcmp(m, "decode")) return 1;
    if (!strncmp(m, "chunked:", 8)) {
        char *end;
        long v = strtol(m + 8, &end, 10);
        if (end != m + 8 && !*end && v > 0) return v;
    }
    fprintf(stderr, "k3 logits: --mode must be prefill, decode or chunked:N (N >= 1), got \"%s\"\n",
            m);
    return 0;
}

static int run(const char *model, const int32_t *tok, int64_t n, int64_t chunk, int threads,
               const char *out, int pipeline, int cache_type) {
    k3_load_opts o = {.threads = threads, .tp_size = 1, .pp_size = 1, .cache_type = cache_type};
    /* this rank's slice under mpirun: pipeline < 0 = one stage per rank, 0 = TP only */
    k3_model *m = k3_dist_init() ? NULL
                                 : k3_dist_model_load_stages(model, &o,
                                                             pipeline < 0 ? k3_dist_size()
                                                             : pipeline   ? pipeline
                                                                          : 1);
    if (!m) {
        fprintf(stderr, "k3 logits: %s%s\n", k3_dist_tag(), k3_errmsg());
        return 1;
    }
    int64_t V = k3_model_vocab(m);
    float *logits = malloc(sizeof(float) * (size_t)(n * V));
    k3_seq *s = k3_seq_new(m);
    int rc = logits ? 0 : -1;
    for (int64_t t = 0; !rc && t < n; t += chunk) {
        int64_t k = n - t < chunk ? n - t : chunk;
        rc = k3_forward(s, tok + t, k, logits + t * V, 1);
    }
    if (rc) fprintf(stderr, "k3 logits: %s\n", logits ? k3_errmsg() : "out of memory");
    int writer = k3_dist_is_root(); /* rank 0 writes; the other ranks only compute */
    FILE *f = rc || !writer ? NULL : fopen(out, "wb");
    if (!rc && writer &&
        (!f || fwrite(logits, sizeof(float), (size_t)(n * V), f) != (size_t)(n * V))) {
        fprintf(stderr, "k3 logits: cannot write %s: %s\n", out, strerror(errno));
        rc = -1;
    }
    if (f && fclose(f) && !rc) {
        fprintf(stderr, "k3 logits: cannot write %s: %s\n", out, strerror(errno));
        rc = -1;
    }
    k3_seq_free(s);
    k3_model_free(m);
    free(logits);
    return rc ? 1 : 0;
}

int cmd_logits(int argc, char **argv) {
    const char *model = NULL, *tokens = NULL, *out = NULL, *mode = "prefill";
    int threads = 0, pipeline = 0, cache_type = K3_CACHE_F32;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        }
        if (!strcmp(a, "--pipeline")) {
            pipeline = -1;
            continue;
        }
        if (!strcmp(a, "--pipeline-stages") && i + 1 < argc) {
            char *end;
            long v = strtol(argv[++i], &end, 10);
            if (*end || v < 1 || v > 4096) {
                fprintf(stderr, "k3 logits: --pipeline-stages must be a positive integer\n");
                return 2;
            }
            pipeline = (int)v;
            continue;
        }
        if (!strcmp(a, "--act-int8")) {
            k3_act_int8_set(1);
            continue;
        }
        if (i + 1 >= argc) {
            fprintf(stderr,
                    "k3 logits: %s needs a value or is unknown (k3 logits --help lists the "
                    "options)\n",
                    a);
            return 2;
        }
        const char *v = argv[++i];
        if (!strcmp(a, "--model"))
            model = v;
        else if (!strcmp(a, "--tokens"))
            tokens = v;
        else if (!strcmp(a, "--out"))
            out = v;
        else if (!strcmp(a, "--mode"))
            mode = v;
        else if (!strcmp(a, "--cache-type")) {
            if (k3_cache_type_parse(v, &cache_type)) {
                fprintf(stderr, "k3 logits: %s\n", k3_errmsg());
                return 2;
            }
        } else if (!strcmp(a, "--threads")) {
            char *end;
            long t = strtol(v, &end, 10);
            if (*end || t < 1 || t > 4096) {
                fprintf(stderr, "k3 logits: --threads must be a positive integer\n");
                return 2;
            }
            threads = (int)t;
        } else {
            fprintf(stderr, "k3 logits: unknown option '%s' (k3 logits --help lists the options)\n",
                    a);
            return 2;
        }
    }
    if (!model || !tokens || !out) {
        fprintf(stderr, "k3 logits: --model, --tokens and --out are required\n");
        usage(stderr);
        return 2;
    }
    int64_t n = 0;
    int32_t *tok = parse_tokens(tokens, &n);
    if (!tok) return 2;
    int64_t chunk = parse_mode(mode, n);
    int rc = chunk ? run(model, tok, n, chunk, threads, out, pipeline, cache_type) : 2;
    k3_dist_finalize();
    free(tok);
    return rc;
}
