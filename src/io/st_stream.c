/* st_stream.c — sharded safetensors written in place, resumably (see st_stream.h). */
#include "io/st_stream.h"

#include "base/err.h"
#include "base/mem.h"
#include "base/progress.h"
#include "io/sha256.h"
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
    char sha[K3_SHA256_HEX]; /* of its data bytes, once its shard is hashed */
} sts_tensor;

typedef struct {
    char *header; /* padded JSON */
    size_t hlen;
    uint64_t size; /* whole file */
    int done;
    char sha[K3_SHA256_HEX]; /* of the whole file, read back from disk */
} sts_shard;

struct k3_sts {
    char *dir, *label;
    uint64_t shard_bytes;
    sts_tensor *t;
    int n, cap, group;
    json_t *names;
    sts_shard *sh;
    int nshards;
    char plan[K3_SHA256_HEX];
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

/* ---- SHA-256 of a shard: the whole file and each tensor's data ---- */

static int by_offset(const void *a, const void *b) {
    const sts_tensor *x = *(const sts_tensor *const *)a, *y = *(const sts_tensor *const *)b;
    return x->off < y->off ? -1 : x->off > y->off;
}

/* The tensors of shard k, in data order (NULL when none). */
static sts_tensor **shard_tensors(k3_sts *s, int k, int *n) {
    sts_tensor **v = k3_xmalloc(sizeof *v * (size_t)(s->n + 1));
    *n = 0;
    for (int i = 0; i < s->n; i++)
        if (s->t[i].shard == k) v[(*n)++] = &s->t[i];
    qsort(v, (size_t)*n, sizeof *v, by_offset);
    return v;
}

/* Feed file bytes [pos, pos+n) to the tensors whose data they hold: v[*ti] is
 * the tensor being hashed; each one finished gets its digest. */
static void feed_tensors(sts_tensor **v, int nt, int *ti, k3_sha256 *h, const uint8_t *p,
                         uint64_t pos, size_t n) {
    while (*ti < nt) {
        sts_tensor *t = v[*ti];
        uint64_t lo = t->off > pos ? t->off : pos, end = t->off + t->bytes;
        uint64_t hi = end < pos + n ? end : pos + n;
        if (lo > pos + n || (lo == pos + n && t->bytes)) return; /* starts later */
        if (hi > lo) k3_sha256_update(h, p + (lo - pos), (size_t)(hi - lo));
        if (end > pos + n) return; /* continues in the next block */
        k3_sha256_hex(h, t->sha);
        (*ti)++;
    }
}

/* Read the shard file at path once, in bounded blocks: SHA-256 of the whole
 * file into sh->sha and of every tensor's data into its sha. *size: bytes. */
static int hash_shard(k3_sts *s, int k, const char *path, uint64_t *size) {
    int fd = open(path, O_RDONLY);
    if (fd < 0) return k3_seterr("%s: cannot open: %s", path, strerror(errno));
    enum { BLOCK = 8 << 20 };
    uint8_t *buf = k3_xmalloc(BLOCK);
    k3_sha256 *whole = k3_sha256_new(), *one = k3_sha256_new();
    int nt = 0, ti = 0;
    sts_tensor **v = shard_tensors(s, k, &nt);
    uint64_t pos = 0;
    ssize_t r;
    while ((r = read(fd, buf, BLOCK)) > 0) {
        k3_sha256_update(whole, buf, (size_t)r);
        feed_tensors(v, nt, &ti, one, buf, pos, (size_t)r);
        pos += (uint64_t)r;
    }
    feed_tensors(v, nt, &ti, one, buf, pos, 0); /* empty tensors at the very end */
    int rc = r < 0 ? k3_seterr("%s: read: %s", path, strerror(errno)) : 0;
    if (!rc && ti < nt)
        rc = k3_seterr("%s: %llu bytes: tensor %s is cut short", path, (unsigned long long)pos,
                       v[ti]->name);
    k3_sha256_hex(whole, s->sh[k - 1].sha);
    if (size) *size = pos;
    k3_sha256_free(whole);
    k3_sha256_free(one);
    free(v);
    free(buf);
    close(fd);
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
    k3_sha256 *h = k3_sha256_new(); /* the plan id: options, inputs and every header */
    k3_sha256_update(h, fingerprint, strlen(fingerprint));
    int rc = 0;
    for (int k = 1; !rc && k <= s->nshards; k++) {
        rc = build_shard(s, k);
        if (!rc) k3_sha256_update(h, s->sh[k - 1].header, s->sh[k - 1].hlen);
    }
    k3_sha256_hex(h, s->plan);
    k3_sha256_free(h);
    return rc;
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
        char *name = shard_name(s, k, 0);
        json_t *tensors = json_object();
        for (int i = 0; i < s->n; i++)
            if (s->t[i].shard == k)
                json_object_set_new(tensors, s->t[i].name, json_string(s->t[i].sha));
        json_object_set_new(shards, name,
                            json_pack("{sIsssO}", "bytes", (json_int_t)s->sh[k - 1].size, "sha256",
                                      s->sh[k - 1].sha, "tensors", tensors));
        json_decref(tensors);
        free(name);
    }
    json_t *root = json_pack("{sssssiso}", "hash", "sha256", "plan", s->plan, "nshards", s->nshards,
                             "shards", shards);
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
        const char *want = json_string_value(json_object_get(e, "sha256"));
        uint64_t size = 0;
        char *fp = join(s->dir, name);
        if (want && !hash_shard(s, k, fp, &size) && size == s->sh[k - 1].size &&
            !strcmp(s->sh[k - 1].sha, want)) {
            s->sh[k - 1].done = 1;
            s->kept_bytes += s->sh[k - 1].size;
            (*kept)++;
            fprintf(stderr, "%s: kept %s (SHA-256 %.16s... verified)\n", s->label, name, want);
        }
        if (want && !s->sh[k - 1].done)
            fprintf(stderr, "%s: %s does not verify (size or SHA-256); rewriting it\n", s->label,
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
    if (!rc) rc = hash_shard(s, k, part, &size);
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
                "%s: shard %d/%d written (%s, %.2f GB, SHA-256 %.16s...); %.2f/%.2f GB, "
                "%.1f s, %s\n",
                s->label, k, s->nshards, fn, (double)sh->size / 1e9, sh->sha,
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

/* Shard k as it is on disk against its manifest entry: the whole file's
 * SHA-256, and when that differs, the first tensor whose data differs. */
static int check_digests(k3_sts *s, int k, const char *path, const json_t *entry) {
    const char *want = json_string_value(json_object_get(entry, "sha256"));
    json_t *tensors = json_object_get(entry, "tensors");
    if (!want || !json_is_object(tensors))
        return k3_seterr("%s: has no SHA-256 entry in %s/" STS_MANIFEST
                         " (written by an older k3?): re-run the conversion",
                         path, s->dir);
    if (hash_shard(s, k, path, NULL)) return -1;
    if (!strcmp(s->sh[k - 1].sha, want)) return 0;
    for (int i = 0; i < s->n; i++) {
        const sts_tensor *t = &s->t[i];
        const char *tw = json_string_value(json_object_get(tensors, t->name));
        if (t->shard == k && (!tw || strcmp(tw, t->sha)))
            return k3_seterr("%s: tensor %s: SHA-256 %s, %s recorded in " STS_MANIFEST
                             " when it was written: the file changed or is corrupt",
                             path, t->name, t->sha, tw ? tw : "none");
    }
    return k3_seterr("%s: SHA-256 %s, %s recorded in " STS_MANIFEST
                     " when it was written: the file changed (outside the tensors' data)",
                     path, s->sh[k - 1].sha, want);
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
        if (!rc && full_sums) rc = check_digests(s, k, path, json_object_get(shards, name));
        free(name);
        free(path);
    }
    json_decref(m);
    free(mpath);
    return rc;
}
