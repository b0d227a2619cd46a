/* test_model_logits.c — every oracle fixture (../shared/fixtures and tests/fixtures)
 * in every mode against expected/logits.f32: max|Δ| <= 1e-4 · max|ref| and the same
 * argmax at every position.
 *
 * Modes through the C API: prefill (one call), decode (one token per call),
 * chunked:3, prefill with the absorbed MLA path forced (path B for T > 1) and
 * decode with the expanded path forced (path A for T = 1) — the last two check
 * that the two MLA paths agree. Through the CLI ($K3 logits): prefill, decode and
 * chunked:5, checking the output file byte layout too. */
#include "k3.h"
#include "helpers.h"
#include "t.h"

#include <dirent.h>
#include <stdint.h>
#include <sys/stat.h>
#include <unistd.h>

int k3_forward_path(k3_seq *s, const int32_t *tokens, int64_t n, float *logits, int all, int path);

static const char *g_dir;
static int32_t g_tok[4096];
static int64_t g_T;
static float *g_ref;
static int64_t g_V;
static char g_mode[64];

static int read_tokens(const char *dir) {
    char path[1024];
    snprintf(path, sizeof path, "%s/expected/tokens.txt", dir);
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    g_T = 0;
    long v;
    while (g_T < 4096 && fscanf(f, "%ld", &v) == 1) {
        g_tok[g_T++] = (int32_t)v;
        if (fgetc(f) != ',') break;
    }
    fclose(f);
    return g_T > 0 ? 0 : -1;
}

/* max|a-ref| / max|ref| and whether the argmax agrees at every position. */
static void compare(const float *got, const char *what) {
    double dmax = 0, rmax = 0;
    int argmax_ok = 1;
    for (int64_t t = 0; t < g_T; t++) {
        int64_t ag = 0, ar = 0;
        for (int64_t v = 0; v < g_V; v++) {
            const float a = got[t * g_V + v], r = g_ref[t * g_V + v];
            double d = fabs((double)a - r);
            if (!(d <= dmax)) dmax = d; /* NaN propagates as a failure */
            if (fabs(r) > rmax) rmax = fabs(r);
            if (a > got[t * g_V + ag]) ag = v;
            if (r > g_ref[t * g_V + ar]) ar = v;
        }
        if (ag != ar) argmax_ok = 0;
    }
    double rel = dmax / (rmax > 0 ? rmax : 1);
    printf("  %-44s %-12s max|d|/max|ref| = %.3e\n", g_dir, what, rel);
    CHECK(rel <= 1e-4, "%s %s: relative error %.3e", g_dir, what, rel);
    CHECK(argmax_ok, "%s %s: argmax differs", g_dir, what);
}

/* Feed the tokens `chunk` at a time with MLA path `path`; compare all rows. */
static void api_mode(int64_t chunk, int path) {
    k3_model *m = k3_model_load(g_dir, NULL);
    CHECK(m, "load %s: %s", g_dir, k3_errmsg());
    if (!m) return;
    CHECK(k3_model_vocab(m) == g_V, "vocab %d vs %lld", k3_model_vocab(m), (long long)g_V);
    float *out = calloc((size_t)(g_T * g_V), sizeof(float));
    k3_seq *s = k3_seq_new(m);
    for (int64_t t = 0; t < g_T; t += chunk) {
        int64_t k = g_T - t < chunk ? g_T - t : chunk;
        CHECK(k3_forward_path(s, g_tok + t, k, out + t * g_V, 1, path) == 0, "%s", k3_errmsg());
    }
    CHECK(k3_seq_len(s) == g_T);
    compare(out, g_mode);
    k3_seq_free(s);
    k3_model_free(m);
    free(out);
}

static void t_prefill(void) {
    api_mode(g_T, 0);
}
static void t_decode(void) {
    api_mode(1, 0);
}
static void t_chunked3(void) {
    api_mode(3, 0);
}
static void t_prefill_absorbed(void) {
    api_mode(g_T, 'B');
}
static void t_decode_expanded(void) {
    api_mode(1, 'A');
}

static void cli_mode(const char *mode) {
    const char *k3 = getenv("K3") ? getenv("K3") : "build/k3";
    char out[256], cmd[8192], toks[4096 * 8] = "";
    snprintf(out, sizeof out, "/tmp/k3_test_logits_%d.f32", (int)getpid());
    size_t o = 0;
    for (int64_t t = 0; t < g_T; t++)
        o += (size_t)snprintf(toks + o, sizeof toks - o, "%s%d", t ? "," : "", g_tok[t]);
    snprintf(cmd, sizeof cmd,
             "%s logits --model '%s' --tokens %.4000s --out %s --mode %s --threads 2", k3, g_dir,
             toks, out, mode);
    int rc = system(cmd);
    CHECK(rc == 0, "%s exited with %d", cmd, rc);
    int64_t n = 0;
    float *got = t_read_floats(out, &n);
    CHECK(got && n == g_T * g_V, "%s: %lld floats, expected %lld", out, (long long)n,
          (long long)(g_T * g_V));
    if (got && n == g_T * g_V) compare(got, g_mode);
    free(got);
    unlink(out);
}

static void t_cli_prefill(void) {
    cli_mode("prefill");
}
static void t_cli_decode(void) {
    cli_mode("decode");
}
static void t_cli_chunked5(void) {
    cli_mode("chunked:5");
}

static int64_t fixture_vocab(int64_t nref) {
    return g_T ? nref / g_T : 0;
}

static void run_fixture(const char *dir) {
    char path[1024];
    snprintf(path, sizeof path, "%s/expected/logits.f32", dir);
    int64_t n = 0;
    g_dir = dir;
    if (read_tokens(dir) || !(g_ref = t_read_floats(path, &n))) return; /* not a logits fixture */
    g_V = fixture_vocab(n);
    static const struct {
        const char *mode;
        void (*fn)(void);
    } modes[] = {{"prefill", t_prefill},          {"decode", t_decode},
                 {"chunked:3", t_chunked3},       {"prefill/B", t_prefill_absorbed},
                 {"decode/A", t_decode_expanded}, {"cli-prefill", t_cli_prefill},
                 {"cli-decode", t_cli_decode},    {"cli-chunked:5", t_cli_chunked5}};
    const char *base = strrchr(dir, '/') ? strrchr(dir, '/') + 1 : dir;
    for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++) {
        char name[256];
        snprintf(g_mode, sizeof g_mode, "%s", modes[i].mode);
        snprintf(name, sizeof name, "logits_%s_%s", base, modes[i].mode);
        t_run(name, modes[i].fn);
    }
    free(g_ref);
    g_ref = NULL;
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Every subdirectory of root holding expected/logits.f32, in name order. */
static int run_root(const char *root) {
    DIR *d = opendir(root);
    if (!d) return 0;
    char *names[256];
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) && n < 256) {
        char p[1024];
        struct stat sb;
        snprintf(p, sizeof p, "%s/%s/expected/logits.f32", root, e->d_name);
        if (e->d_name[0] != '.' && !stat(p, &sb)) {
            snprintf(p, sizeof p, "%s/%s", root, e->d_name);
            names[n++] = strdup(p);
        }
    }
    closedir(d);
    qsort(names, (size_t)n, sizeof *names, cmp_str);
    for (int i = 0; i < n; i++) {
        run_fixture(names[i]);
        free(names[i]);
    }
    return n;
}

int main(void) {
    int n = run_root(t_fixtures());
    int m = run_root("tests/fixtures");
    printf("%d shared fixtures, %d engine fixtures\n", n, m);
    if (n == 0) {
        printf("FAIL logits_fixtures (no fixtures under %s)\n", t_fixtures());
        return 1;
    }
    return t_done();
}
