/* st_stream.c — sharded safetensors written in place, resumably (see st_stream.h). */
#include "io/st_stream.h"

#include "base/err.h"
#include "base/mem.h"
#include "base/progress.h"
#include "io/st_write.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define STS_MAX_DIM 8
#define STS_MANIFEST "k3-manifest.json"

typedef struct {
    char *name;
    char dtype[12];
    int ndim, group, shard;
    int64_t shape[STS_MAX_DIM];
    uint64_t bytes, off; /* off: absolute offset in the shard file */
    uint64_t written;
} sts_tensor;

typedef struct {
    char *header; /* padded JSON */
    size_t hlen;
    uint64_t size; /* whole file */
    int done;
    uint64_t sum;
} sts_shard;

struct k3_sts {
    char *dir, *label;
    uint64_t shard_bytes;
    sts_tensor *t;
    int n, cap, group;
    json_t *names;
    sts_shard *sh;
    int nshards;
    char plan[17];
    int open; /* shard being written (0 = none) */
    int fd;
    uint64_t total, written, kept_bytes;
    int tty_bar;
    k3_progress bar;
    double t0;
    int rfd, rshard; /* k3_sts_read: the shard file open for reading (0 = none) */
};

static char *join(const char *dir, const char *file) {
    size_t n = strlen(dir) + strlen(file) + 2;
    char *p = k3_xmalloc(n);
    snprintf(p, n, "%s/%s", dir, file);
    return p;
}

/* ---- checksum: 64-bit multiply-xorshift over little-endian words ---- */

static uint64_t sum_update(uint64_t h, const uint8_t *p, size_t n) {
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, p + i, 8);
        h = (h ^ w) * 0x9E3779B97F4A7C15ull;
        h ^= h >> 29;
    }
    for (; i < n; i++) {
        h = (h ^ p[i]) * 0x100000001B3ull;
        h ^= h >> 29;
    }
    return h;
}

int k3_sts_file_sum(const char *path, uint64_t *sum, uint64_t *size) {
    int fd = open(path, O_RDONLY);
    if (fd < 0) return k3_seterr("%s: cannot open: %s", path, strerror(errno));
    size_t cap = 8u << 20;
    uint8_t *buf = k3_xmalloc(cap);
    uint64_t h = 0xCBF29CE484222325ull, total = 0;
    ssize_t r;
    /* Reads are multiples of 8 except the last, so the word split is the file's. */
    while ((r = read(fd, buf, cap)) > 0) {
        size_t got = (size_t)r;
        while (got % 8 && r > 0) {
            r = read(fd, buf + got, cap - got);
            if (r > 0) got += (size_t)r;
        }
        h = sum_update(h, buf, got);
        total += got;
        if (r == 0) break;
    }
    int rc = r < 0 ? k3_seterr("%s: read: %s", path, strerror(errno)) : 0;
    free(buf);
    close(fd);
    *sum = h ^ total;
    if (size) *size = total;
    return rc;
}

/* ---- declaration and layout ---- */

k3_sts *k3_sts_new(const char *dir, uint64_t shard_bytes, const char *label) {
    k3_sts *s = k3_xcalloc(1, sizeof *s);
    s->dir = k3_xstrdup(dir);
    s->label = k3_xstrdup(label ? label : "writing");
    s->shard_bytes = shard_bytes ? shard_bytes : UINT64_MAX;
    s->names = json_object();
    s->fd = -1;
    s->rfd = -1;
    return s;
}

void k3_sts_free(k3_sts *s) {
    if (!s) return;
    if (s->fd >= 0) close(s->fd);
    if (s->rfd >= 0) close(s->rfd);
    for (int i = 0; i < s->n; i++) free(s->t[i].name);
    for (int i = 0; i < s->nshards; i++) free(s->sh[i].header);
    free(s->t);
    free(s->sh);
    json_decref(s->names);
    free(s->dir);
    free(s->label);
    free(s);
}

void k3_sts_group(k3_sts *s) {
    s->group++;
}

int k3_sts_declare(k3_sts *s, const char *name, const char *dtype, const int64_t *shape, int ndim) {
    size_t es = k3_st_dtype_size(dtype);
    if (!es) return k3_seterr("%s: tensor %s: unknown dtype '%s'", s->dir, name, dtype);
    if (!*name || !strcmp(name, "__metadata__"))
        return k3_seterr("%s: bad tensor name '%s'", s->dir, name);
    if (ndim < 0 || ndim > STS_MAX_DIM)
        return k3_seterr("%s: tensor %s: %d dimensions", s->dir, name, ndim);
    if (json_object_get(s->names, name))
        return k3_seterr("%s: tensor %s declared twice", s->dir, name);
    uint64_t n = 1;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0) return k3_seterr("%s: tensor %s: negative dimension", s->dir, name);
        n *= (uint64_t)shape[i];
    }
    if (s->n == s->cap) {
        s->cap = s->cap ? 2 * s->cap : 256;
        s->t = k3_xrealloc(s->t, (size_t)s->cap * sizeof *s->t);
    }
    sts_tensor *t = &s->t[s->n];
    memset(t, 0, sizeof *t);
    t->name = k3_xstrdup(name);
    snprintf(t->dtype, sizeof t->dtype, "%s", dtype);
    t->ndim = ndim;
    memcpy(t->shape, shape, sizeof(int64_t) * (size_t)ndim);
    t->bytes = n * es;
    t->group = s->group;
    json_object_set_new(s->names, name, json_true());
    s->total += t->bytes;
    return s->n++;
}

static int size_class(const sts_tensor *t) {
    size_t es = k3_st_dtype_size(t->dtype);
    return es >= 8 ? 0 : es >= 4 ? 1 : es >= 2 ? 2 : 3;
}

/* Header of shard k (1-based) with data offsets; sets each tensor's absolute off. */
static int build_shard(k3_sts *s, int k) {
    json_t *h = json_object();
    json_object_set_new(h, "__metadata__", json_pack("{ss}", "format", "pt"));
    uint64_t off = 0;
    for (int c = 0; c < 4; c++)
        for (int i = 0; i < s->n; i++) {
            sts_tensor *t = &s->t[i];
            if (t->shard != k || size_class(t) != c) continue;
            json_t *shape = json_array();
            for (int d = 0; d < t->ndim; d++)
                json_array_append_new(shape, json_integer(t->shape[d]));
            json_object_set_new(h, t->name,
                                json_pack("{ss so s[II]}", "dtype", t->dtype, "shape", shape,
                                          "data_offsets", (json_int_t)off,
                                          (json_int_t)(off + t->bytes)));
            t->off = off; /* relative for now */
            off += t->bytes;
        }
    char *js = json_dumps(h, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(h);
    if (!js) return k3_seterr("%s: cannot encode the header of shard %d", s->dir, k);
    size_t n = strlen(js), padded = (n + 7) / 8 * 8;
    sts_shard *sh = &s->sh[k - 1];
    sh->header = k3_xmalloc(padded + 1);
    memcpy(sh->header, js, n);
    memset(sh->header + n, ' ', padded - n);
    sh->header[padded] = 0;
    sh->hlen = padded;
    sh->size = 8 + padded + off;
    free(js);
    for (int i = 0; i < s->n; i++)
        if (s->t[i].shard == k) s->t[i].off += 8 + padded;
    return 0;
}

int k3_sts_layout(k3_sts *s, const char *fingerprint) {
    int shard = 0, group = -1;
    uint64_t fill = 0;
    for (int i = 0; i < s->n; i++) {
        sts_tensor *t = &s->t[i];
        if (t->group != group) {
            uint64_t gb = 0;
            for (int j = i; j < s->n && s->t[j].group == t->group; j++) gb += s->t[j].bytes;
            if (!shard || (fill && fill + gb > s->shard_bytes)) shard++, fill = 0;
            group = t->group;
            fill += gb;
        }
        t->shard = shard;
    }
    s->nshards = shard ? shard : 1;
    s->sh = k3_xcalloc((size_t)s->nshards, sizeof *s->sh);
    uint64_t h =
        sum_update(0xCBF29CE484222325ull, (const uint8_t *)fingerprint, strlen(fingerprint));
    for (int k = 1; k <= s->nshards; k++) {
        if (build_shard(s, k)) return -1;
        h = sum_update(h, (const uint8_t *)s->sh[k - 1].header, s->sh[k - 1].hlen);
    }
    snprintf(s->plan, sizeof s->plan, "%016llx", (unsigned long long)h);
    return 0;
}

int k3_sts_nshards(const k3_sts *s) {
    return s->nshards;
}
uint64_t k3_sts_total_bytes(const k3_sts *s) {
    return s->total;
}
int k3_sts_shard_of(const k3_sts *s, int tensor) {
    return s->t[tensor].shard;
}
uint64_t k3_sts_tensor_bytes(const k3_sts *s, int tensor) {
    return s->t[tensor].bytes;
}
int k3_sts_shard_done(const k3_sts *s, int shard) {
    return s->sh[shard - 1].done;
}

static char *shard_name(const k3_sts *s, int k, int partial) {
    char f[80];
    if (partial)
        snprintf(f, sizeof f, "model-%05d-of-%05d.partial", k, s->nshards);
    else if (s->nshards == 1)
        snprintf(f, sizeof f, "model.safetensors");
    else
        snprintf(f, sizeof f, "model-%05d-of-%05d.safetensors", k, s->nshards);
    return k3_xstrdup(f);
}

/* ---- manifest ---- */

static int write_manifest(const k3_sts *s) {
    json_t *shards = json_object();
    for (int k = 1; k <= s->nshards; k++) {
        if (!s->sh[k - 1].done) continue;
        char sum[17], *name = shard_name(s, k, 0);
        snprintf(sum, sizeof sum, "%016llx", (unsigned long long)s->sh[k - 1].sum);
        json_object_set_new(
            shards, name, json_pack("{sIss}", "bytes", (json_int_t)s->sh[k - 1].size, "sum", sum));
        free(name);
    }
    json_t *root = json_pack("{sssiso}", "plan", s->plan, "nshards", s->nshards, "shards", shards);
    char *path = join(s->dir, STS_MANIFEST), *tmp = join(s->dir, STS_MANIFEST ".tmp");
    int rc = root && !json_dump_file(root, tmp, JSON_INDENT(1) | JSON_PRESERVE_ORDER) &&
                     !rename(tmp, path)
                 ? 0
                 : k3_seterr("%s: cannot write", path);
    json_decref(root);
    free(path);
    free(tmp);
    return rc;
}

int k3_sts_resume(k3_sts *s, int *kept) {
    *kept = 0;
    char *path = join(s->dir, STS_MANIFEST);
    json_error_t je;
    json_t *m = json_load_file(path, 0, &je);
    free(path);
    if (!m) return 0; /* nothing to resume */
    const char *plan = json_string_value(json_object_get(m, "plan"));
    json_t *shards = json_object_get(m, "shards");
    if (!plan || strcmp(plan, s->plan) || !json_is_object(shards)) {
        fprintf(stderr, "%s: %s/" STS_MANIFEST " is from a different plan; rewriting every shard\n",
                s->label, s->dir);
        json_decref(m);
        return 0;
    }
    for (int k = 1; k <= s->nshards; k++) {
        char *name = shard_name(s, k, 0);
        json_t *e = json_object_get(shards, name);
        const char *want = json_string_value(json_object_get(e, "sum"));
        uint64_t sum = 0, size = 0;
        char *fp = join(s->dir, name), got[17] = "";
        if (want && !k3_sts_file_sum(fp, &sum, &size)) {
            snprintf(got, sizeof got, "%016llx", (unsigned long long)sum);
            if (size == s->sh[k - 1].size && !strcmp(got, want)) {
                s->sh[k - 1].done = 1;
                s->sh[k - 1].sum = sum;
                s->kept_bytes += s->sh[k - 1].size;
                (*kept)++;
                fprintf(stderr, "%s: kept %s (checksum %s verified)\n", s->label, name, got);
            }
        }
        if (want && !s->sh[k - 1].done)
            fprintf(stderr, "%s: %s does not verify (size or checksum); rewriting it\n", s->label,
                    name);
        free(fp);
        free(name);
    }
    json_decref(m);
    return 0;
}

/* ---- writing ---- */

void k3_sts_progress(k3_sts *s, int tty_bar) {
    s->tty_bar = tty_bar;
    s->t0 = k3_now();
    k3_progress_start(&s->bar, tty_bar, s->label, s->total, "GB", 1e9);
}

static void eta(const k3_sts *s, char *buf, size_t cap) {
    double el = k3_now() - s->t0;
    uint64_t left = s->total > s->written ? s->total - s->written : 0;
    if (s->written < (1u << 20) || el <= 0) {
        snprintf(buf, cap, "ETA ?");
        return;
    }
    double t = (double)left * el / (double)s->written;
    snprintf(buf, cap, "ETA %dm%02ds", (int)(t / 60), (int)t % 60);
}

int k3_sts_open_shard(k3_sts *s, int k) {
    if (s->open) return k3_seterr("%s: shard %d still open", s->dir, s->open);
    char *name = shard_name(s, k, 1), *path = join(s->dir, name);
    free(name);
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
    sts_shard *sh = &s->sh[k - 1];
    uint8_t len8[8];
    for (int i = 0; i < 8; i++) len8[i] = (uint8_t)((uint64_t)sh->hlen >> (8 * i));
    int rc = fd < 0 || ftruncate(fd, (off_t)sh->size) || pwrite(fd, len8, 8, 0) != 8 ||
                     pwrite(fd, sh->header, sh->hlen, 8) != (ssize_t)sh->hlen
                 ? k3_seterr("%s: cannot create: %s", path, strerror(errno))
                 : 0;
    free(path);
    if (rc) {
        if (fd >= 0) close(fd);
        return -1;
    }
    s->fd = fd;
    s->open = k;
    return 0;
}

int k3_sts_write(k3_sts *s, int tensor, uint64_t off, const void *data, size_t n) {
    sts_tensor *t = &s->t[tensor];
    if (t->shard != s->open)
        return k3_seterr("%s: tensor %s: its shard %d is not open", s->dir, t->name, t->shard);
    if (off > t->bytes || n > t->bytes - off)
        return k3_seterr("%s: tensor %s: write past its %llu bytes", s->dir, t->name,
                         (unsigned long long)t->bytes);
    const uint8_t *p = data;
    uint64_t at = t->off + off;
    while (n) {
        ssize_t w = pwrite(s->fd, p, n, (off_t)at);
        if (w <= 0)
            return k3_seterr("%s: writing tensor %s: %s", s->dir, t->name,
                             w < 0 ? strerror(errno) : "short write");
        p += w, at += (uint64_t)w, n -= (size_t)w;
        t->written += (uint64_t)w;
        s->written += (uint64_t)w;
    }
    if (s->tty_bar) {
        char note[32];
        eta(s, note, sizeof note);
        k3_progress_update(&s->bar, s->written + s->kept_bytes, note);
    }
    return 0;
}

int k3_sts_close_shard(k3_sts *s) {
    int k = s->open;
    if (!k) return k3_seterr("%s: no shard open", s->dir);
    for (int i = 0; i < s->n; i++)
        if (s->t[i].shard == k && s->t[i].written != s->t[i].bytes)
            return k3_seterr("%s: tensor %s: %llu of %llu bytes written", s->dir, s->t[i].name,
                             (unsigned long long)s->t[i].written,
                             (unsigned long long)s->t[i].bytes);
    char *pn = shard_name(s, k, 1), *fn = shard_name(s, k, 0);
    char *part = join(s->dir, pn), *final = join(s->dir, fn);
    int rc = fdatasync(s->fd) ? k3_seterr("%s: sync: %s", part, strerror(errno)) : 0;
    if (close(s->fd) && !rc) rc = k3_seterr("%s: close: %s", part, strerror(errno));
    s->fd = -1;
    s->open = 0;
    uint64_t size = 0;
    sts_shard *sh = &s->sh[k - 1];
    if (!rc) rc = k3_sts_file_sum(part, &sh->sum, &size);
    if (!rc && size != sh->size)
        rc = k3_seterr("%s: %llu bytes on disk, %llu planned", part, (unsigned long long)size,
                       (unsigned long long)sh->size);
    if (!rc && rename(part, final)) rc = k3_seterr("%s: rename: %s", part, strerror(errno));
    if (!rc) {
        sh->done = 1;
        rc = write_manifest(s);
    }
    if (!rc) {
        char note[32];
        eta(s, note, sizeof note);
        if (s->tty_bar) fputc('\n', stderr);
        fprintf(stderr,
                "%s: shard %d/%d written (%s, %.2f GB, checksum %016llx); %.2f/%.2f GB, "
                "%.1f s, %s\n",
                s->label, k, s->nshards, fn, (double)sh->size / 1e9, (unsigned long long)sh->sum,
                (double)(s->written + s->kept_bytes) / 1e9, (double)s->total / 1e9,
                k3_now() - s->t0, note);
        const char *stop = getenv("K3_STS_STOP_AFTER_SHARD");
        if (stop && atoi(stop) == k)
            rc = k3_seterr("stopped after shard %d (K3_STS_STOP_AFTER_SHARD)", k);
    }
    free(pn);
    free(fn);
    free(part);
    free(final);
    return rc;
}

int k3_sts_finish(k3_sts *s) {
    for (int k = 1; k <= s->nshards; k++)
        if (!s->sh[k - 1].done) return k3_seterr("%s: shard %d not written", s->dir, k);
    if (s->tty_bar) k3_progress_finish(&s->bar);
    if (s->nshards <= 1) return 0;
    const char **names = k3_xcalloc((size_t)s->n + 1, sizeof *names);
    char **files = k3_xcalloc((size_t)s->n + 1, sizeof *files);
    for (int i = 0; i < s->n; i++) {
        names[i] = s->t[i].name;
        files[i] = shard_name(s, s->t[i].shard, 0);
    }
    int rc = k3_st_write_index(s->dir, (size_t)s->n, names, (const char *const *)files, s->total);
    for (int i = 0; i < s->n; i++) free(files[i]);
    free(files);
    free(names);
    return rc;
}

/* ---- reading back and verifying a finished output ---- */

static int pread_all(int fd, void *buf, size_t n, uint64_t off, const char *path) {
    for (size_t got = 0; got < n;) {
        ssize_t r = pread(fd, (uint8_t *)buf + got, n - got, (off_t)(off + got));
        if (r <= 0)
            return k3_seterr("%s: %s at byte %llu", path, r < 0 ? strerror(errno) : "truncated",
                             (unsigned long long)(off + got));
        got += (size_t)r;
    }
    return 0;
}

int k3_sts_read(k3_sts *s, int tensor, uint64_t off, void *buf, size_t n) {
    const sts_tensor *t = &s->t[tensor];
    if (off > t->bytes || n > t->bytes - off)
        return k3_seterr("%s: tensor %s: read past its %llu bytes", s->dir, t->name,
                         (unsigned long long)t->bytes);
    char *name = shard_name(s, t->shard, 0), *path = join(s->dir, name);
    int rc = 0;
    if (s->rshard != t->shard) {
        if (s->rfd >= 0) close(s->rfd);
        s->rshard = 0;
        s->rfd = open(path, O_RDONLY);
        if (s->rfd < 0)
            rc = k3_seterr("%s: cannot open: %s", path, strerror(errno));
        else
            s->rshard = t->shard;
    }
    if (!rc) rc = pread_all(s->rfd, buf, n, t->off + off, path);
    free(name);
    free(path);
    return rc;
}

int k3_sts_verify(k3_sts *s, int full_sums) {
    json_t *m = NULL, *shards = NULL;
    char *mpath = join(s->dir, STS_MANIFEST);
    int rc = 0;
    if (full_sums) {
        json_error_t je;
        m = json_load_file(mpath, 0, &je);
        const char *plan = json_string_value(json_object_get(m, "plan"));
        shards = json_object_get(m, "shards");
        if (!m)
            rc = k3_seterr("%s: cannot read: %s", mpath, je.text);
        else if (!plan || strcmp(plan, s->plan) || !json_is_object(shards))
            rc = k3_seterr("%s: is not the manifest of this conversion (plan %s, expected %s)",
                           mpath, plan ? plan : "missing", s->plan);
    }
    for (int k = 1; !rc && k <= s->nshards; k++) {
        char *name = shard_name(s, k, 0), *path = join(s->dir, name);
        const sts_shard *sh = &s->sh[k - 1];
        struct stat sb;
        char *hdr = k3_xmalloc(sh->hlen + 8);
        uint64_t hl = 0;
        int fd = open(path, O_RDONLY);
        if (fd < 0 || fstat(fd, &sb))
            rc = k3_seterr("%s: cannot open: %s", path, strerror(errno));
        else if ((uint64_t)sb.st_size != sh->size)
            rc = k3_seterr("%s: %llu bytes, %llu planned", path, (unsigned long long)sb.st_size,
                           (unsigned long long)sh->size);
        else if (!(rc = pread_all(fd, hdr, sh->hlen + 8, 0, path))) {
            for (int b = 0; b < 8; b++) hl |= (uint64_t)(uint8_t)hdr[b] << (8 * b);
            if (hl != sh->hlen || memcmp(hdr + 8, sh->header, sh->hlen))
                rc = k3_seterr("%s: the safetensors header differs from the planned one", path);
        }
        if (fd >= 0) close(fd);
        free(hdr);
        if (!rc && full_sums) {
            const char *want =
                json_string_value(json_object_get(json_object_get(shards, name), "sum"));
            uint64_t sum = 0;
            char got[17];
            if (!want)
                rc = k3_seterr("%s: %s is not listed in %s", s->dir, name, STS_MANIFEST);
            else if (!(rc = k3_sts_file_sum(path, &sum, NULL))) {
                snprintf(got, sizeof got, "%016llx", (unsigned long long)sum);
                if (strcmp(got, want))
                    rc = k3_seterr("%s: checksum %s, %s recorded when it was written: the file "
                                   "changed or is corrupt",
                                   path, got, want);
            }
        }
        free(name);
        free(path);
    }
    json_decref(m);
    free(mpath);
    return rc;
}
