/* test_io_mutate.c — robustness of the whole loader: deterministic random edits
 * of the tiny-bf16 checkpoint's safetensors header (digits, quotes, brackets)
 * and config.json numbers; every variant must either load and run a forward
 * pass or fail with a message — never crash (run under ASan+UBSan too). */
#include "base/err.h"
#include "base/mem.h"
#include "k3.h"
#include "helpers.h"
#include "t.h"

#include <sys/stat.h>
#include <unistd.h>

static char g_dir[256];
static int g_iters = 150; /* env K3_MUTATE_N for longer local runs */
static char *g_st, *g_cfg;
static size_t g_st_len, g_cfg_len, g_hdr_end;

static void write_file(const char *name, const char *buf, size_t len) {
    char p[512];
    snprintf(p, sizeof p, "%s/%s", g_dir, name);
    t_write_file(p, buf, len);
}

/* Load the variant; if it loads, one forward pass of 3 tokens must work. */
static int try_load(int *loaded) {
    k3_model *m = k3_model_load(g_dir, NULL);
    if (!m) {
        CHECK(k3_errmsg()[0] != 0, "rejected without a message");
        return 0;
    }
    (*loaded)++;
    k3_seq *s = k3_seq_new(m);
    int32_t tok[3] = {1, 2, 3};
    float *lg = k3_xmalloc(sizeof(float) * (size_t)k3_model_vocab(m));
    int rc = k3_forward(s, tok, 3, lg, 0);
    CHECK(rc == 0, "forward failed: %s", k3_errmsg());
    free(lg);
    k3_seq_free(s);
    k3_model_free(m);
    return 1;
}

static const char g_repl[] = "0123456789\"[]{},:-";

/* Mutate 1..3 bytes of buf[lo, hi) that are digits or JSON punctuation. */
static void mutate(char *buf, size_t lo, size_t hi) {
    int n = 1 + (int)((t_rand() + 1) * 1.5);
    for (int k = 0; k < n; k++) {
        for (int tries = 0; tries < 64; tries++) {
            size_t i = lo + (size_t)((t_rand() + 1) / 2 * (double)(hi - lo));
            if (i >= hi || !strchr(g_repl, buf[i])) continue;
            buf[i] =
                g_repl[(size_t)((t_rand() + 1) / 2 * (sizeof g_repl - 1)) % (sizeof g_repl - 1)];
            break;
        }
    }
}

TEST(mutated_headers_never_crash) {
    char *b = k3_xmalloc(g_st_len);
    int loaded = 0;
    t_seed(1234);
    for (int it = 0; it < g_iters; it++) {
        memcpy(b, g_st, g_st_len);
        mutate(b, 8, g_hdr_end);
        write_file("model.safetensors", b, g_st_len);
        try_load(&loaded);
    }
    write_file("model.safetensors", g_st, g_st_len);
    printf("  %d of %d header variants loaded\n", loaded, g_iters);
    free(b);
}

TEST(mutated_configs_never_crash) {
    char *b = k3_xmalloc(g_cfg_len);
    int loaded = 0;
    t_seed(99);
    for (int it = 0; it < g_iters; it++) {
        memcpy(b, g_cfg, g_cfg_len);
        mutate(b, 0, g_cfg_len);
        write_file("config.json", b, g_cfg_len);
        try_load(&loaded);
    }
    write_file("config.json", g_cfg, g_cfg_len);
    printf("  %d of %d config variants loaded\n", loaded, g_iters);
    free(b);
}

/* Read fixture root/name into the globals and write its config to g_dir. */
static int setup(const char *root, const char *name) {
    char p[1024];
    free(g_st);
    free(g_cfg);
    snprintf(p, sizeof p, "%s/%s/model.safetensors", root, name);
    g_st = k3_read_file(p, &g_st_len);
    snprintf(p, sizeof p, "%s/%s/config.json", root, name);
    g_cfg = k3_read_file(p, &g_cfg_len);
    if (!g_st || !g_cfg || g_st_len < 8) {
        printf("FAIL io_mutate_setup_%s (%s)\n", name, k3_errmsg());
        return -1;
    }
    uint64_t h = 0;
    for (int i = 7; i >= 0; i--) h = h << 8 | (uint8_t)g_st[i];
    g_hdr_end = 8 + (size_t)h;
    write_file("config.json", g_cfg, g_cfg_len);
    return 0;
}

int main(void) {
    char p[1024];
    if (getenv("K3_MUTATE_N")) g_iters = atoi(getenv("K3_MUTATE_N"));
    snprintf(g_dir, sizeof g_dir, "/tmp/k3_test_mutate_%d", (int)getpid());
    mkdir(g_dir, 0700);
    int rc = setup(t_fixtures(), "tiny-bf16");
    if (!rc) {
        RUN(mutated_headers_never_crash);
        RUN(mutated_configs_never_crash);
    }
    /* the MLX layout: quantized views, stacked experts, per-module quantization */
    if (!rc && !(rc = setup("tests/fixtures", "mlx-mixed"))) {
        t_run("mutated_mlx_headers_never_crash", mutated_headers_never_crash);
        t_run("mutated_mlx_configs_never_crash", mutated_configs_never_crash);
    }
    snprintf(p, sizeof p, "rm -rf '%s'", g_dir);
    if (system(p)) printf("  cleanup failed\n");
    free(g_st);
    free(g_cfg);
    return rc ? 1 : t_done();
}
