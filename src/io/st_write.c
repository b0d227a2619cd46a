/* st_write.c — safetensors writer (see st_write.h). */
#include "io/st_write.h"

#include "base/err.h"
#include "base/mem.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define ST_MAX_DIM 8
#define ST_NCLASS 4 /* element sizes 8, 4, 2, 1: written in that order */

typedef struct {
    char *name;
    char dtype[12];
    int ndim;
    int64_t shape[ST_MAX_DIM];
    uint64_t bytes;
} st_entry;

typedef struct {
    FILE *tmp; /* unlinked temporary holding this class's data, in add order */
    st_entry *e;
    size_t n, cap;
    uint64_t bytes;
} st_class;

struct k3_stw {
    char *path;
    st_class cls[ST_NCLASS];
    json_t *names; /* name -> true, for duplicate detection */
    json_t *meta;
    size_t count;
    uint64_t bytes;
    int failed;
};

static const struct {
    const char *name;
    size_t size;
} st_dtypes[] = {
    {"F64", 8},  {"I64", 8},     {"U64", 8},     {"F32", 4},     {"I32", 4}, {"U32", 4},
    {"F16", 2},  {"BF16", 2},    {"I16", 2},     {"U16", 2},     {"U8", 1},  {"I8", 1},
    {"BOOL", 1}, {"F8_E4M3", 1}, {"F8_E5M2", 1}, {"F8_E8M0", 1},
};

size_t k3_st_dtype_size(const char *dtype) {
    for (size_t i = 0; i < sizeof st_dtypes / sizeof st_dtypes[0]; i++)
        if (!strcmp(dtype, st_dtypes[i].name)) return st_dtypes[i].size;
    return 0;
}

static int class_of_size(size_t size) {
    return size >= 8 ? 0 : size >= 4 ? 1 : size >= 2 ? 2 : 3;
}

k3_stw *k3_stw_open(const char *path) {
    k3_stw *w = k3_xcalloc(1, sizeof *w);
    w->path = k3_xstrdup(path);
    w->names = json_object();
    w->meta = json_pack("{ss}", "format", "pt");
    if (!w->names || !w->meta) {
        k3_stw_abort(w);
        k3_seterr("%s: out of memory", path);
        return NULL;
    }
    return w;
}

/* Temporary files live next to the output (same filesystem, and the output
 * folder is where the user expects the disk space to go); unlinked at once so
 * nothing is left behind if the process dies. */
static FILE *open_unlinked_tmp(const char *path, int cls) {
    size_t n = strlen(path) + 32;
    char *tmp = k3_xmalloc(n);
    snprintf(tmp, n, "%s.part%d.%ld", path, cls, (long)getpid());
    FILE *f = fopen(tmp, "w+b");
    if (!f)
        k3_seterr("%s: cannot create temporary file: %s", tmp, strerror(errno));
    else
        unlink(tmp);
    free(tmp);
    return f;
}

static int check_tensor(const k3_stw *w, const char *name, const char *dtype, const int64_t *shape,
                        int ndim, size_t bytes) {
    size_t es = k3_st_dtype_size(dtype);
    if (!es) return k3_seterr("%s: tensor %s: unknown dtype '%s'", w->path, name, dtype);
    if (!*name) return k3_seterr("%s: empty tensor name", w->path);
    if (!strcmp(name, "__metadata__"))
        return k3_seterr("%s: '__metadata__' is not a tensor name", w->path);
    if (ndim < 0 || ndim > ST_MAX_DIM)
        return k3_seterr("%s: tensor %s: %d dimensions (0..%d allowed)", w->path, name, ndim,
                         ST_MAX_DIM);
    uint64_t n = 1;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0)
            return k3_seterr("%s: tensor %s: negative dimension %lld", w->path, name,
                             (long long)shape[i]);
        n *= (uint64_t)shape[i];
    }
    if (n * es != bytes)
        return k3_seterr("%s: tensor %s: %zu bytes given, shape x %s needs %llu", w->path, name,
                         bytes, dtype, (unsigned long long)(n * es));
    if (json_object_get(w->names, name))
        return k3_seterr("%s: tensor %s added twice", w->path, name);
    return 0;
}

int k3_stw_add(k3_stw *w, const char *name, const char *dtype, const int64_t *shape, int ndim,
               const void *data, size_t bytes) {
    if (w->failed) return k3_seterr("%s: writer already failed", w->path);
    if (check_tensor(w, name, dtype, shape, ndim, bytes)) return -1;
    st_class *c = &w->cls[class_of_size(k3_st_dtype_size(dtype))];
    if (!c->tmp && !(c->tmp = open_unlinked_tmp(w->path, (int)(c - w->cls)))) {
        w->failed = 1;
        return -1;
    }
    if (bytes && fwrite(data, 1, bytes, c->tmp) != bytes) {
        w->failed = 1;
        return k3_seterr("%s: writing tensor %s: %s", w->path, name, strerror(errno));
    }
    if (c->n == c->cap) {
        c->cap = c->cap ? c->cap * 2 : 64;
        c->e = k3_xrealloc(c->e, c->cap * sizeof *c->e);
    }
    st_entry *e = &c->e[c->n++];
    memset(e, 0, sizeof *e);
    e->name = k3_xstrdup(name);
    snprintf(e->dtype, sizeof e->dtype, "%s", dtype);
    e->ndim = ndim;
    for (int i = 0; i < ndim; i++) e->shape[i] = shape[i];
    e->bytes = bytes;
    c->bytes += bytes;
    json_object_set_new(w->names, name, json_true());
    w->count++;
    w->bytes += bytes;
    return 0;
}

int k3_stw_set_meta(k3_stw *w, const char *key, const char *value) {
    if (json_object_set_new(w->meta, key, json_string(value)))
        return k3_seterr("%s: bad metadata entry %s", w->path, key);
    return 0;
}

size_t k3_stw_count(const k3_stw *w) {
    return w->count;
}
uint64_t k3_stw_bytes(const k3_stw *w) {
    return w->bytes;
}

/* The JSON header in data order, with data_offsets filled in. */
static char *build_header(const k3_stw *w, size_t *len) {
    json_t *h = json_object();
    json_object_set(h, "__metadata__", w->meta);
    uint64_t off = 0;
    for (int k = 0; k < ST_NCLASS; k++)
        for (size_t i = 0; i < w->cls[k].n; i++) {
            const st_entry *e = &w->cls[k].e[i];
            json_t *shape = json_array();
            for (int d = 0; d < e->ndim; d++)
                json_array_append_new(shape, json_integer(e->shape[d]));
            json_t *ent = json_pack("{ss so s[II]}", "dtype", e->dtype, "shape", shape,
                                    "data_offsets", (json_int_t)off, (json_int_t)(off + e->bytes));
            json_object_set_new(h, e->name, ent);
            off += e->bytes;
        }
    char *s = json_dumps(h, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(h);
    if (!s) return NULL;
    size_t n = strlen(s), padded = (n + 7) / 8 * 8;
    char *out = k3_xmalloc(padded + 1);
    memcpy(out, s, n);
    memset(out + n, ' ', padded - n);
    out[padded] = 0;
    free(s);
    *len = padded;
    return out;
}

static int copy_stream(FILE *dst, FILE *src, const char *path) {
    static char buf[1 << 16];
    if (fseek(src, 0, SEEK_SET)) return k3_seterr("%s: rewinding temporary data", path);
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, src)) > 0)
        if (fwrite(buf, 1, n, dst) != n) return k3_seterr("%s: write: %s", path, strerror(errno));
    if (ferror(src)) return k3_seterr("%s: reading temporary data", path);
    return 0;
}

static int write_file(const k3_stw *w) {
    size_t hlen = 0;
    char *header = build_header(w, &hlen);
    if (!header) return k3_seterr("%s: cannot encode the header", w->path);
    FILE *f = fopen(w->path, "wb");
    if (!f) {
        free(header);
        return k3_seterr("%s: cannot create: %s", w->path, strerror(errno));
    }
    uint8_t len8[8];
    for (int i = 0; i < 8; i++) len8[i] = (uint8_t)((uint64_t)hlen >> (8 * i));
    int rc = fwrite(len8, 1, 8, f) == 8 && fwrite(header, 1, hlen, f) == hlen
                 ? 0
                 : k3_seterr("%s: write: %s", w->path, strerror(errno));
    free(header);
    for (int k = 0; k < ST_NCLASS && !rc; k++)
        if (w->cls[k].tmp) rc = copy_stream(f, w->cls[k].tmp, w->path);
    if (fclose(f) && !rc) rc = k3_seterr("%s: close: %s", w->path, strerror(errno));
    if (rc) unlink(w->path);
    return rc;
}

int k3_stw_close(k3_stw *w) {
    int rc = w->failed ? -1 : write_file(w);
    k3_stw_abort(w);
    return rc;
}

void k3_stw_abort(k3_stw *w) {
    if (!w) return;
    for (int k = 0; k < ST_NCLASS; k++) {
        if (w->cls[k].tmp) fclose(w->cls[k].tmp);
        for (size_t i = 0; i < w->cls[k].n; i++) free(w->cls[k].e[i].name);
        free(w->cls[k].e);
    }
    json_decref(w->names);
    json_decref(w->meta);
    free(w->path);
    free(w);
}

static char *join_path(const char *dir, const char *file) {
    size_t n = strlen(dir) + strlen(file) + 2;
    char *p = k3_xmalloc(n);
    snprintf(p, n, "%s/%s", dir, file);
    return p;
}

int k3_st_write_index(const char *dir, size_t n, const char *const *names, const char *const *files,
                      uint64_t total_size) {
    json_t *map = json_object();
    for (size_t i = 0; i < n; i++) json_object_set_new(map, names[i], json_string(files[i]));
    json_t *root =
        json_pack("{s{sI}so}", "metadata", "total_size", (json_int_t)total_size, "weight_map", map);
    char *path = join_path(dir, "model.safetensors.index.json");
    int rc = root && !json_dump_file(root, path, JSON_INDENT(1) | JSON_PRESERVE_ORDER)
                 ? 0
                 : k3_seterr("%s: cannot write", path);
    json_decref(root);
    free(path);
    return rc;
}

/* ---- sharded directory writer ---- */

struct k3_stw_dir {
    char *dir;
    uint64_t shard_bytes;
    k3_stw *cur;      /* shard being filled, written under a temporary name */
    int nshards;      /* shards started so far */
    json_t *shard_of; /* tensor name -> shard number (1-based), in add order */
    uint64_t total;
    int failed;
};

static char *part_path(const k3_stw_dir *d, int shard) {
    char file[64];
    snprintf(file, sizeof file, "model-part-%05d.safetensors", shard);
    return join_path(d->dir, file);
}

static char *final_name(int shard, int nshards) {
    char file[64];
    if (nshards == 1)
        snprintf(file, sizeof file, "model.safetensors");
    else
        snprintf(file, sizeof file, "model-%05d-of-%05d.safetensors", shard, nshards);
    return k3_xstrdup(file);
}

k3_stw_dir *k3_stwd_open(const char *dir, uint64_t shard_bytes) {
    k3_stw_dir *d = k3_xcalloc(1, sizeof *d);
    d->dir = k3_xstrdup(dir);
    d->shard_bytes = shard_bytes ? shard_bytes : UINT64_MAX;
    d->shard_of = json_object();
    return d;
}

static int start_shard(k3_stw_dir *d) {
    if (d->cur && k3_stw_close(d->cur)) {
        d->cur = NULL;
        return -1;
    }
    char *p = part_path(d, ++d->nshards);
    d->cur = k3_stw_open(p);
    free(p);
    return d->cur ? 0 : -1;
}

int k3_stwd_add(k3_stw_dir *d, const char *name, const char *dtype, const int64_t *shape, int ndim,
                const void *data, size_t bytes) {
    if (d->failed) return k3_seterr("%s: writer already failed", d->dir);
    if (json_object_get(d->shard_of, name))
        return k3_seterr("%s: tensor %s added twice", d->dir, name);
    int full = d->cur && k3_stw_count(d->cur) && k3_stw_bytes(d->cur) + bytes > d->shard_bytes;
    if ((!d->cur || full) && start_shard(d)) {
        d->failed = 1;
        return -1;
    }
    if (k3_stw_add(d->cur, name, dtype, shape, ndim, data, bytes)) return -1;
    json_object_set_new(d->shard_of, name, json_integer(d->nshards));
    d->total += bytes;
    return 0;
}

int k3_stwd_shards(const k3_stw_dir *d) {
    return d->nshards;
}

/* Give the shards their final names and, for several, write the index. */
static int finish_shards(k3_stw_dir *d) {
    for (int s = 1; s <= d->nshards; s++) {
        char *from = part_path(d, s), *name = final_name(s, d->nshards);
        char *to = join_path(d->dir, name);
        int rc =
            rename(from, to) ? k3_seterr("%s: rename to %s: %s", from, to, strerror(errno)) : 0;
        free(from);
        free(to);
        free(name);
        if (rc) return -1;
    }
    if (d->nshards <= 1) return 0;
    size_t n = json_object_size(d->shard_of), i = 0;
    const char **names = k3_xcalloc(n ? n : 1, sizeof *names);
    char **files = k3_xcalloc(n ? n : 1, sizeof *files);
    const char *key;
    json_t *val;
    json_object_foreach(d->shard_of, key, val) {
        names[i] = key;
        files[i++] = final_name((int)json_integer_value(val), d->nshards);
    }
    int rc = k3_st_write_index(d->dir, n, names, (const char *const *)files, d->total);
    for (i = 0; i < n; i++) free(files[i]);
    free(files);
    free(names);
    return rc;
}

int k3_stwd_close(k3_stw_dir *d) {
    int rc = d->failed ? -1 : 0;
    if (!rc && !d->cur) rc = start_shard(d); /* no tensors: still write one (empty) file */
    if (d->cur) {
        if (k3_stw_close(d->cur)) rc = -1;
        d->cur = NULL;
    }
    if (!rc) rc = finish_shards(d);
    json_decref(d->shard_of);
    free(d->dir);
    free(d);
    return rc;
}

void k3_stwd_abort(k3_stw_dir *d) {
    if (!d) return;
    int done = d->nshards - (d->cur != NULL); /* closed shards under their part names */
    k3_stw_abort(d->cur);
    for (int sh = 1; sh <= done; sh++) {
        char *p = part_path(d, sh);
        unlink(p);
        free(p);
    }
    json_decref(d->shard_of);
    free(d->dir);
    free(d);
}
