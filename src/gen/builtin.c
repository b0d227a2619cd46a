/* builtin.c — writes and finds the built-in random model (see builtin.h). */
#include "gen/builtin.h"

#include "base/err.h"
#include "base/mem.h"
#include "gen/synth.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define BUILTIN_NAME "builtin-tiny-v1"

static char *str_printf2(const char *fmt, const char *a, const char *b) {
    size_t n = strlen(fmt) + strlen(a) + strlen(b) + 32;
    char *s = k3_xmalloc(n);
    snprintf(s, n, fmt, a, b);
    return s;
}

/* mkdir -p for the parents of a cache path. */
static int make_parents(const char *path) {
    char *p = k3_xstrdup(path);
    for (char *c = p + 1; *c; c++) {
        if (*c != '/') continue;
        *c = 0;
        if (mkdir(p, 0755) && errno != EEXIST) {
            k3_seterr("%s: cannot create: %s", p, strerror(errno));
            free(p);
            return -1;
        }
        *c = '/';
    }
    free(p);
    return 0;
}

static char *cache_path(void) {
    const char *e = getenv("K3_BUILTIN_DIR");
    if (e && *e) return k3_xstrdup(e);
    e = getenv("XDG_CACHE_HOME");
    if (e && *e == '/') return str_printf2("%s/k3/%s", e, BUILTIN_NAME);
    e = getenv("HOME");
    if (e && *e == '/') return str_printf2("%s/.cache/k3/%s", e, BUILTIN_NAME);
    char uid[32];
    snprintf(uid, sizeof uid, "%ld", (long)getuid());
    return str_printf2("/tmp/k3-%s-%s", BUILTIN_NAME, uid);
}

static int complete(const char *dir) {
    static const char *files[] = {"config.json", "model.safetensors", "tiktoken.model",
                                  "tokenizer_config.json"};
    for (int i = 0; i < 4; i++) {
        char *p = str_printf2("%s/%s", dir, files[i]);
        int ok = access(p, R_OK) == 0;
        free(p);
        if (!ok) return 0;
    }
    return 1;
}

/* Write into a private temporary folder and rename it into place, so two
 * processes starting at once never see a half-written model. */
static int write_builtin(const char *dir) {
    char pid[32];
    snprintf(pid, sizeof pid, "%ld", (long)getpid());
    char *tmp = str_printf2("%s.tmp%s", dir, pid);
    k3_synth_opts o = {.seed = 0};
    json_t *cfg = k3_synth_config("tiny", NULL, &o);
    int rc = cfg ? k3_synth_write(tmp, cfg, &o) : -1;
    json_decref(cfg);
    if (!rc && rename(tmp, dir) && !complete(dir))
        rc = k3_seterr("%s: cannot rename to %s: %s", tmp, dir, strerror(errno));
    if (access(tmp, F_OK) == 0) { /* lost a race or failed: remove our copy */
        static const char *files[] = {"config.json", "model.safetensors", "tiktoken.model",
                                      "tokenizer_config.json"};
        for (int i = 0; i < 4; i++) {
            char *p = str_printf2("%s/%s", tmp, files[i]);
            unlink(p);
            free(p);
        }
        rmdir(tmp);
    }
    free(tmp);
    return rc;
}

char *k3_builtin_model(int *created) {
    *created = 0;
    char *dir = cache_path();
    if (complete(dir)) return dir;
    if (make_parents(dir) || write_builtin(dir)) {
        k3_preferr("writing the built-in model to %s", dir);
        free(dir);
        return NULL;
    }
    *created = 1;
    return dir;
}
