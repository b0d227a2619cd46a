/* cmd_synth.c — `k3 synth`: write a random checkpoint in the release layout. */
#include "cli/cli.h"

#include "base/err.h"
#include "gen/synth.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void synth_usage(FILE *f) {
    fprintf(f, "usage: k3 synth --out DIR [--preset tiny|bench|real-slice|real-slice-v32k]\n"
               "                [--config FILE.json] [--vocab N] [--seed N]\n"
               "                [--dtype bf16|f32] [--experts mxfp4|dense] [--shard-mb N]\n"
               "\n"
               "Writes config.json, random weights (safetensors; sharded above --shard-mb,\n"
               "default 4096) and a tokenizer (tiktoken.model + tokenizer_config.json).\n"
               "  --preset tiny    the shape of the test fixtures (default)\n"
               "  --preset bench   hidden 1024, 8 layers, 64 experts top-8 (~267M parameters)\n"
               "  --preset real-slice\n"
               "                   K3 at its real per-layer shapes (hidden 7168, 96 heads,\n"
               "                   dense MLP 33792, latent MoE 3584->3072, vocabulary 163840)\n"
               "                   cut to 3 KDA + 1 MLA layers and 64 experts top-16; MXFP4\n"
               "                   experts unless --experts dense (13.1 GB)\n"
               "  --preset real-slice-v32k\n"
               "                   the same with a 32768-token vocabulary (9.3 GB)\n"
               "  --config FILE    JSON merged over the preset: a config.json with text_config,\n"
               "                   or a flat text config\n"
               "  --vocab N        vocabulary size N (257..16777216) over preset and config\n"
               "  --experts mxfp4  routed experts as compressed-tensors MXFP4\n");
}

static int parse_u64(const char *s, const char *opt, unsigned long long *out) {
    char *end;
    *out = strtoull(s, &end, 10);
    if (!*s || *end || *s == '-') {
        fprintf(stderr, "k3 synth: %s expects a non-negative integer, got '%s'\n", opt, s);
        return -1;
    }
    return 0;
}

int cmd_synth(int argc, char **argv) {
    const char *out = NULL, *preset = NULL, *config = NULL;
    k3_synth_opts o = {.progress = 1};
    unsigned long long v;
    int experts_set = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            synth_usage(stdout);
            return 0;
        }
        if (!val) {
            fprintf(stderr,
                    "k3 synth: %s needs a value or is unknown (k3 synth --help lists the "
                    "options)\n",
                    a);
            return 2;
        }
        i++;
        if (!strcmp(a, "--out"))
            out = val;
        else if (!strcmp(a, "--preset"))
            preset = val;
        else if (!strcmp(a, "--config"))
            config = val;
        else if (!strcmp(a, "--seed")) {
            if (parse_u64(val, a, &v)) return 2;
            o.seed = v;
        } else if (!strcmp(a, "--shard-mb")) {
            if (parse_u64(val, a, &v) || !v) return 2;
            o.shard_bytes = v << 20;
        } else if (!strcmp(a, "--dtype")) {
            if (strcmp(val, "bf16") && strcmp(val, "f32")) {
                fprintf(stderr, "k3 synth: --dtype must be bf16 or f32, got '%s'\n", val);
                return 2;
            }
            o.f32 = !strcmp(val, "f32");
        } else if (!strcmp(a, "--experts")) {
            if (strcmp(val, "mxfp4") && strcmp(val, "dense")) {
                fprintf(stderr, "k3 synth: --experts must be mxfp4 or dense, got '%s'\n", val);
                return 2;
            }
            o.mxfp4 = !strcmp(val, "mxfp4");
            experts_set = 1;
        } else if (!strcmp(a, "--vocab")) {
            if (parse_u64(val, a, &v)) return 2;
            if (v < 257 || v > (1u << 24)) {
                fprintf(stderr, "k3 synth: --vocab must be in 257..16777216, got %s\n", val);
                return 2;
            }
            o.vocab = (int64_t)v;
        } else {
            fprintf(stderr, "k3 synth: unknown option '%s' (k3 synth --help lists the options)\n",
                    a);
            return 2;
        }
    }
    if (!out) {
        fprintf(stderr, "k3 synth: --out DIR is required\n");
        synth_usage(stderr);
        return 2;
    }
    if (!k3_synth_preset_known(preset)) {
        fprintf(stderr,
                "k3 synth: unknown preset '%s' (expected tiny, bench, real-slice or "
                "real-slice-v32k)\n",
                preset);
        return 2;
    }
    /* The release ships its routed experts as MXFP4; the real-shape presets follow it. */
    if (preset && !strncmp(preset, "real-slice", 10) && !experts_set) o.mxfp4 = 1;
    json_t *user = NULL;
    if (config) {
        json_error_t e;
        user = json_load_file(config, 0, &e);
        if (!user) k3_die("%s:%d:%d: %s", config, e.line, e.column, e.text);
    }
    json_t *cfg = k3_synth_config(preset, user, &o);
    json_decref(user);
    if (!cfg) k3_die("%s%s%s", config ? config : "", config ? ": " : "", k3_errmsg());
    int rc = k3_synth_write(out, cfg, &o);
    json_decref(cfg);
    if (rc) k3_die("%s", k3_errmsg());
    return 0;
}
