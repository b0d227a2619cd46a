/* hints.c — recognising GGUF files, repo ids, other models and git-lfs pointers (see hints.h). */
#include "io/hints.h"

#include <dirent.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The first n bytes of a regular file (0 if it cannot be read). */
static size_t head(const char *path, char *buf, size_t n) {
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return 0;
    struct stat st;
    ssize_t r = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) ? read(fd, buf, n) : -1;
    close(fd);
    return r > 0 ? (size_t)r : 0;
}

static int ends_with(const char *s, const char *tail) {
    size_t n = strlen(s), t = strlen(tail);
    return n >= t && !strcasecmp(s + n - t, tail);
}

/* "owner/name" with ordinary repo characters and no such file: a hub id. */
static int looks_like_repo_id(const char *p) {
    const char *slash = strchr(p, '/');
    if (!slash || slash == p || !slash[1] || strchr(slash + 1, '/')) return 0;
    for (const char *c = p; *c; c++)
        if (!(*c == '/' || *c == '-' || *c == '_' || *c == '.' || (*c >= '0' && *c <= '9') ||
              (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z')))
            return 0;
    return p[0] != '.';
}

static int other_model(const char *dir, char *buf, size_t cap) {
    char path[4096];
    snprintf(path, sizeof path, "%s/config.json", dir);
    json_t *root = NULL;
    char text[1 << 16];
    size_t n = head(path, text, sizeof text - 1);
    if (n) root = json_loadb(text, n, 0, NULL);
    if (!root) return 0;
    json_t *tc = json_object_get(root, "text_config");
    const char *mt = json_string_value(json_object_get(root, "model_type"));
    const char *tmt = json_string_value(json_object_get(tc, "model_type"));
    const char *arch = json_string_value(json_array_get(json_object_get(root, "architectures"), 0));
    const char *what = mt ? mt : arch ? arch : NULL;
    int hit = 0;
    if (what && (strstr(what, "deepseek") || strstr(what, "Deepseek") || strstr(what, "kimi_k2") ||
                 strstr(what, "KimiK2") || (!strcmp(what, "kimi_vl") && !tmt))) {
        snprintf(buf, cap,
                 "%s is a \"%s\" checkpoint (Kimi-K2 / DeepSeek family); k3 runs Kimi K3 "
                 "(model_type \"kimi_k3\") only",
                 dir, what);
        hit = 1;
    }
    json_decref(root);
    return hit;
}

static int lfs_pointer(const char *dir, char *buf, size_t cap) {
    DIR *d = opendir(dir);
    if (!d) return 0;
    struct dirent *e;
    int hit = 0;
    while (!hit && (e = readdir(d))) {
        if (!ends_with(e->d_name, ".safetensors")) continue;
        char path[4096], h[64];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        size_t n = head(path, h, sizeof h);
        if (n >= 24 && !memcmp(h, "version https://git-lfs", 23)) {
            snprintf(buf, cap,
                     "%s is a git-lfs pointer, not the weights: run `git lfs pull` in the "
                     "clone (or download the files themselves)",
                     path);
            hit = 1;
        }
    }
    closedir(d);
    return hit;
}

int k3_model_hint(const char *path, char *buf, size_t cap) {
    struct stat st;
    char h[8];
    if (stat(path, &st) != 0) {
        if (!looks_like_repo_id(path)) return 0;
        snprintf(buf, cap,
                 "\"%s\" looks like a Hugging Face repo id; k3 does not download models: "
                 "download it first (e.g. `hf download %s --local-dir DIR`) and pass --model DIR",
                 path, path);
        return 1;
    }
    if (S_ISREG(st.st_mode)) {
        if (ends_with(path, ".gguf") || (head(path, h, 4) == 4 && !memcmp(h, "GGUF", 4))) {
            snprintf(buf, cap,
                     "%s is a GGUF file (llama.cpp); k3 loads a safetensors checkpoint "
                     "directory (config.json + *.safetensors), as released or converted by "
                     "mlx_lm",
                     path);
            return 1;
        }
        snprintf(buf, cap, "--model takes the checkpoint directory (with config.json), not a file");
        return 1;
    }
    if (!S_ISDIR(st.st_mode)) return 0;
    return other_model(path, buf, cap) || lfs_pointer(path, buf, cap);
}
