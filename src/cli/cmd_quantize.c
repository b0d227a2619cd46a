/* cmd_quantize.c — `k3 quantize`: options, then quant/qconvert.c does the conversion.
 *
 * The conversion (HF release -> MLX quantized layout, streamed expert by
 * expert into ~5 GB shards, resumable) and the check of its output against
 * the input (sampled rows re-quantized, headers, checksums) are described in
 * quant/qconvert.h. Here: argument parsing, and a last check by reloading the
 * output with the engine and running one token through it with the weight
 * pages released after every layer (so the check's memory is about one
 * layer's weights, not the model's). */
#include "cli/cli.h"

#include "k3.h"

#include "base/err.h"
#include "base/mem.h"
#include "quant/qconvert.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void quantize_usage(FILE *f) {
    fprintf(
        f,
        "usage: k3 quantize --model IN --out OUT --bits B [--group-size G] [--mode affine|mxfp4]\n"
        "                   [--keep-experts-mxfp4] [--recipe uniform|mixed] [--shard-mb N]\n"
        "                   [--quantize-router] [--force | --resume | --check]\n"
        "\n"
        "Writes an MLX-layout checkpoint (loadable by k3 and mlx-lm) and checks it: sampled\n"
        "rows of every tensor re-quantized from IN must equal the stored bytes, and the\n"
        "engine reloads it and runs one token. Memory stays at a few weight matrices\n"
        "whatever the model size: stacked experts are quantized and written expert by\n"
        "expert.\n"
        "  --bits B              2, 3, 4, 5, 6 or 8 (affine); ignored for --mode mxfp4\n"
        "  --group-size G        32, 64 (default) or 128\n"
        "  --mode mxfp4          E2M1 codes with E8M0 scales per 32 (MLX mxfp4 mode)\n"
        "  --keep-experts-mxfp4  copy MXFP4 routed experts unchanged (no requantization)\n"
        "  --recipe mixed        experts at B bits, embeddings/lm_head 6, the rest max(B,4)\n"
        "  --shard-mb N          start a new shard past N MiB (default 5120, as MLX)\n"
        "  --quantize-router     routers (*.mlp.gate) 8-bit group 64 instead of their\n"
        "                        source dtype: saves ~6 MB per MoE layer of the real model\n"
        "                        (896 x 7168: 12.8 MB bf16 -> 6.8 MB) but changes expert\n"
        "                        choices: 1 and 16 of 576 top-16 choices on the two real\n"
        "                        slices (bench/notes/quantization.md)\n"
        "  --force               OUT may exist: its shards, index and manifest are removed\n"
        "  --resume              continue an interrupted run into OUT: shards that run\n"
        "                        finished and that verify (OUT/k3-manifest.json) are kept\n"
        "  --check               only check an existing OUT against IN (give the options\n"
        "                        it was made with): also the SHA-256 of every shard and\n"
        "                        tensor against OUT/k3-manifest.json (integrity against\n"
        "                        that manifest, not authenticity: docs/performance.md)\n"
        "*_res_proj are never quantized. Progress (bytes, ETA) on stderr.\n");
}

static int parse_long(const char *s, const char *opt, long *out) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (!*s || *end || errno || v <= 0) {
        fprintf(stderr, "k3 quantize: %s expects a positive integer, got '%s'\n", opt, s);
        return -1;
    }
    *out = v;
    return 0;
}

static int parse_args(int argc, char **argv, k3_qconv_opts *a) {
    memset(a, 0, sizeof *a);
    a->group = 64;
    a->shard_bytes = 5120ull << 20;
    long v;
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(o, "--help") || !strcmp(o, "-h")) {
            quantize_usage(stdout);
            exit(0);
        } else if (!strcmp(o, "--keep-experts-mxfp4")) {
            a->keep_mxfp4 = 1;
        } else if (!strcmp(o, "--quantize-router")) {
            a->quant_router = 1;
        } else if (!strcmp(o, "--force")) {
            a->force = 1;
        } else if (!strcmp(o, "--resume")) {
            a->resume = 1;
        } else if (!strcmp(o, "--check")) {
            a->check_only = 1;
        } else if (!val) {
            fprintf(stderr,
                    "k3 quantize: unknown or incomplete option '%s' (k3 quantize --help "
                    "lists the options)\n",
                    o);
            return -2;
        } else if (!strcmp(o, "--model")) {
            a->in = argv[++i];
        } else if (!strcmp(o, "--out")) {
            a->out = argv[++i];
        } else if (!strcmp(o, "--bits") || !strcmp(o, "--group-size") || !strcmp(o, "--shard-mb")) {
            if (parse_long(argv[++i], o, &v) < 0) return -1;
            if (o[2] == 'b')
                a->bits = (int)v;
            else if (o[2] == 'g')
                a->group = (int)v;
            else
                a->shard_bytes = (uint64_t)v << 20;
        } else if (!strcmp(o, "--mode") && (!strcmp(val, "affine") || !strcmp(val, "mxfp4"))) {
            a->mxfp4 = !strcmp(argv[++i], "mxfp4");
        } else if (!strcmp(o, "--recipe") && (!strcmp(val, "uniform") || !strcmp(val, "mixed"))) {
            a->mixed = !strcmp(argv[++i], "mixed");
        } else {
            fprintf(stderr,
                    "k3 quantize: bad option '%s %s' (k3 quantize --help lists the "
                    "options)\n",
                    o, val);
            return -2;
        }
    }
    if (!a->in || !a->out)
        return fprintf(stderr, "k3 quantize: --model and --out are required\n"), -1;
    if (a->force + a->resume + a->check_only > 1)
        return fprintf(stderr, "k3 quantize: --force, --resume and --check exclude each other\n"),
               -1;
    if (a->mxfp4) a->bits = 4;
    if (a->bits < 2 || a->bits > 8 || a->bits == 7)
        return fprintf(stderr, "k3 quantize: --bits must be 2, 3, 4, 5, 6 or 8\n"), -1;
    if (a->group != 32 && a->group != 64 && a->group != 128)
        return fprintf(stderr, "k3 quantize: --group-size must be 32, 64 or 128\n"), -1;
    return 0;
}

/* Reload the output with the engine and run one token through it, the
 * weight pages released after every layer. */
static int validate(const char *dir) {
    k3_model *m = k3_model_load(dir, NULL);
    if (!m) return k3_preferr("reloading %s", dir);
    k3_model_set_drop_pages(m, 1);
    k3_seq *s = k3_seq_new(m);
    float *logits = k3_xmalloc(sizeof(float) * (size_t)k3_model_vocab(m));
    int32_t tok = 1;
    int rc = k3_forward(s, &tok, 1, logits, 0);
    for (int i = 0; rc == 0 && i < k3_model_vocab(m); i++)
        if (!isfinite(logits[i])) rc = k3_seterr("reloaded %s gives a non-finite logit", dir);
    free(logits);
    k3_seq_free(s);
    k3_model_free(m);
    return rc;
}

int cmd_quantize(int argc, char **argv) {
    k3_qconv_opts o;
    int prc = parse_args(argc, argv, &o);
    if (prc < 0) {
        if (prc == -1) quantize_usage(stderr); /* -2: a one-line error was printed */
        return 2;
    }
    o.progress = isatty(2);
    double t0 = k3_now();
    k3_qconv_stats st;
    int rc = k3_qconvert(&o, &st);
    double t_conv = k3_now() - t0;
    uint64_t rss_conv = k3_peak_rss();
    if (!rc) rc = validate(o.out);
    if (rc) {
        fprintf(stderr, "k3 quantize: %s\n", k3_errmsg());
        return 1;
    }
    if (o.check_only) {
        printf("checked %s against %s: %d shard%s (sizes, headers, SHA-256 of every shard and "
               "tensor), %lld tensors, "
               "%lld rows re-quantized, %.1f MB compared; reloaded, one token run; %.1f s, "
               "peak RSS %.0f MB\n",
               o.out, o.in, st.nshards, st.nshards == 1 ? "" : "s", (long long)st.tensors_checked,
               (long long)st.rows_checked, (double)st.bytes_checked / 1e6, k3_now() - t0,
               (double)k3_peak_rss() / 1e6);
        return 0;
    }
    printf("wrote %s (%s, %d shard%s, %d kept from an earlier run, %.2f GB; routers %s, %.1f MB) "
           "in %.1f s (conversion %.1f s, peak RSS %.0f MB); checked: %lld tensors, %lld rows "
           "re-quantized, reloaded, one token run; peak RSS %.0f MB\n",
           o.out,
           o.mxfp4        ? "mxfp4"
           : o.mixed      ? "mixed affine"
           : o.keep_mxfp4 ? "affine, routed experts kept mxfp4"
                          : "affine",
           st.nshards, st.nshards == 1 ? "" : "s", st.kept, (double)st.out_bytes / 1e9,
           o.quant_router ? "8-bit" : "in source dtype", (double)st.router_bytes / 1e6,
           k3_now() - t0, t_conv, (double)rss_conv / 1e6, (long long)st.tensors_checked,
           (long long)st.rows_checked, (double)k3_peak_rss() / 1e6);
    return 0;
}
