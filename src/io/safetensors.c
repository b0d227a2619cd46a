/* safetensors.c — mmap + strict validation of safetensors shards (see safetensors.h). */
#include "io/safetensors.h"
#include "base/err.h"
#include "base/mem.h"
#include "base/progress.h"
#include "io/mapguard.h"

#include <errno.h>
#include <fcntl.h>
#include <dirent.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* A header larger than this is certainly not a real checkpoint (K3's is ~10 MB). */
#define ST_MAX_HEADER (256u << 20)

static const struct {
    const char *name;
    size_t size;
} dtype_info[K3_DT_COUNT] = {
    [K3_DT_F64] = {"F64", 8},   [K3_DT_F32] = {"F32", 4},         [K3_DT_F16] = {"F16", 2},
    [K3_DT_BF16] = {"BF16", 2}, [K3_DT_I64] = {"I64", 8},         [K3_DT_I32] = {"I32", 4},
    [K3_DT_I16] = {"I16", 2},   [K3_DT_I8] = {"I8", 1},           [K3_DT_U64] = {"U64", 8},
    [K3_DT_U32] = {"U32", 4},   [K3_DT_U16] = {"U16", 2},         [K3_DT_U8] = {"U8", 1},
    [K3_DT_BOOL] = {"BOOL", 1}, [K3_DT_F8_E8M0] = {"F8_E8M0", 1},
};

const char *k3_dtype_name(k3_dtype d) {
    return d < K3_DT_COUNT ? dtype_info[d].name : "?";
}
size_t k3_dtype_size(k3_dtype d) {
    return d < K3_DT_COUNT ? dtype_info[d].size : 0;
}

int k3_dtype_parse(const char *s) {
    for (int i = 0; i < K3_DT_COUNT; i++)
        if (!strcmp(s, dtype_info[i].name)) return i;
    return -1;
}

void k3_st_init(k3_st *st) {
    memset(st, 0, sizeof *st);
}

int64_t k3_tensor_numel(const k3_tensor *t) {
    int64_t n = 1;
    for (int i = 0; i < t->ndim; i++) n *= t->shape[i];
    return n;
}

const char *k3_tensor_shape_str(const k3_tensor *t, char *buf, size_t cap) {
    size_t o = 0;
    o += (size_t)snprintf(buf + o, cap - o, "[");
    for (int i = 0; i < t->ndim && o < cap; i++)
        o += (size_t)snprintf(buf + o, cap - o, "%s%lld", i ? ", " : "", (long long)t->shape[i]);
    if (o < cap) snprintf(buf + o, cap - o, "]");
    return buf;
}

/* Parse the "shape" array of one entry into t (checked, overflow-free byte count). */
static int parse_shape(json_t *shape, k3_tensor *t, size_t *bytes, const char *label) {
    if (!json_is_array(shape) || json_array_size(shape) > K3_ST_MAX_DIMS)
        return k3_seterr("%s: tensor %s: \"shape\" must be an array of at most %d integers", label,
                         t->name, K3_ST_MAX_DIMS);
    t->ndim = (int)json_array_size(shape);
    size_t n = k3_dtype_size(t->dtype);
    for (int i = 0; i < t->ndim; i++) {
        json_t *d = json_array_get(shape, (size_t)i);
        if (!json_is_integer(d) || json_integer_value(d) < 0)
            return k3_seterr("%s: tensor %s: shape[%d] is not a non-negative integer", label,
                             t->name, i);
        t->shape[i] = json_integer_value(d);
        if (__builtin_mul_overflow(n, (size_t)t->shape[i], &n))
            return k3_seterr("%s: tensor %s: shape overflows", label, t->name);
    }
    *bytes = n;
    return 0;
}

/* Parse the data_offsets pair [begin, end] and check it against the data section. */
static int parse_offsets(json_t *off, size_t data_len, size_t want, size_t *begin,
                         const char *label, const char *name) {
    json_t *a = json_array_get(off, 0), *b = json_array_get(off, 1);
    if (!json_is_array(off) || json_array_size(off) != 2 || !json_is_integer(a) ||
        !json_is_integer(b))
        return k3_seterr("%s: tensor %s: \"data_offsets\" must be [begin, end]", label, name);
    json_int_t x = json_integer_value(a), y = json_integer_value(b);
    if (x < 0 || y < x)
        return k3_seterr("%s: tensor %s: data_offsets [%lld, %lld] are not 0 <= begin <= end",
                         label, name, (long long)x, (long long)y);
    if ((uint64_t)y > data_len)
        return k3_seterr("%s: tensor %s: data_offsets end %lld is past the data section (%zu "
                         "bytes; file truncated?)",
                         label, name, (long long)y, data_len);
    if ((uint64_t)(y - x) != want)
        return k3_seterr("%s: tensor %s: %lld bytes in data_offsets, expected %zu for its "
                         "shape and dtype",
                         label, name, (long long)(y - x), want);
    *begin = (size_t)x;
    return 0;
}

static int parse_entry(const char *name, json_t *e, const uint8_t *data, size_t data_len,
                       const char *label, k3_tensor *t) {
    memset(t, 0, sizeof *t);
    t->name = (char *)name; /* replaced by a copy once accepted */
    if (!json_is_object(e)) return k3_seterr("%s: tensor %s: entry is not an object", label, name);
    json_t *dt = json_object_get(e, "dtype");
    if (!json_is_string(dt)) return k3_seterr("%s: tensor %s: missing \"dtype\"", label, name);
    int d = k3_dtype_parse(json_string_value(dt));
    if (d < 0)
        return k3_seterr("%s: tensor %s: unknown dtype \"%s\"", label, name, json_string_value(dt));
    t->dtype = (k3_dtype)d;
    size_t want = 0, begin = 0;
    if (parse_shape(json_object_get(e, "shape"), t, &want, label)) return -1;
    if (parse_offsets(json_object_get(e, "data_offsets"), data_len, want, &begin, label, name))
        return -1;
    t->data = data + begin;
    t->bytes = want;
    return 0;
}

static int cmp_by_data(const void *a, const void *b) {
    const k3_tensor *x = *(k3_tensor *const *)a, *y = *(k3_tensor *const *)b;
    return x->data < y->data ? -1 : x->data > y->data;
}

/* Reject two tensors of one file whose byte ranges intersect. */
static int check_overlap(k3_tensor *t, int n, const char *label) {
    k3_tensor **p = k3_xmalloc(sizeof *p * (size_t)(n ? n : 1));
    for (int i = 0; i < n; i++) p[i] = &t[i];
    qsort(p, (size_t)n, sizeof *p, cmp_by_data);
    int rc = 0;
    for (int i = 1; i < n && !rc; i++)
        if (p[i - 1]->data + p[i - 1]->bytes > p[i]->data && p[i]->bytes && p[i - 1]->bytes)
            rc = k3_seterr("%s: tensors %s and %s overlap in the data section", label,
                           p[i - 1]->name, p[i]->name);
    free(p);
    return rc;
}

static int read_header_len(const uint8_t *buf, size_t len, const char *label, size_t *n) {
    if (len < 8) return k3_seterr("%s: %zu bytes, too short for a safetensors header", label, len);
    uint64_t h = 0;
    for (int i = 7; i >= 0; i--) h = h << 8 | buf[i];
    if (h > len - 8)
        return k3_seterr("%s: header length %llu is past the end of the file (%zu bytes)", label,
                         (unsigned long long)h, len);
    if (h > ST_MAX_HEADER)
        return k3_seterr("%s: header length %llu is implausibly large", label,
                         (unsigned long long)h);
    *n = (size_t)h;
    return 0;
}

static const char *intern_path(k3_st *st, const char *label, void *map, size_t size) {
    st->files = k3_xrealloc(st->files, sizeof *st->files * (size_t)(st->nfiles + 1));
    k3_st_file *f = &st->files[st->nfiles++];
    f->path = k3_xstrdup(label);
    f->map = map;
    f->size = size;
    return f->path;
}

int k3_st_add_buffer(k3_st *st, const uint8_t *buf, size_t len, const char *label) {
    size_t hlen = 0;
    if (read_header_len(buf, len, label, &hlen)) return -1;
    json_error_t jerr;
    json_t *root = json_loadb((const char *)buf + 8, hlen, JSON_REJECT_DUPLICATES, &jerr);
    if (!root) return k3_seterr("%s: header is not valid JSON: %s", label, jerr.text);
    if (!json_is_object(root)) {
        json_decref(root);
        return k3_seterr("%s: header is not a JSON object", label);
    }
    size_t cnt = json_object_size(root), got = 0;
    k3_tensor *tmp = k3_xcalloc(cnt ? cnt : 1, sizeof *tmp);
    const uint8_t *data = buf + 8 + hlen;
    size_t data_len = len - 8 - hlen;
    const char *key;
    json_t *val;
    int rc = 0;
    json_object_foreach(root, key, val) {
        if (!strcmp(key, "__metadata__")) continue;
        if ((rc = parse_entry(key, val, data, data_len, label, &tmp[got]))) break;
        got++;
    }
    if (!rc) rc = check_overlap(tmp, (int)got, label);
    if (!rc) {
        const char *path = intern_path(st, label, NULL, len);
        st->t = k3_xrealloc(st->t, sizeof *st->t * (size_t)(st->n + (int)got + 1));
        for (size_t i = 0; i < got; i++) {
            tmp[i].name = k3_xstrdup(tmp[i].name);
            tmp[i].file = path;
            st->t[st->n++] = tmp[i];
        }
        st->sorted = 0;
    }
    free(tmp);
    json_decref(root);
    return rc;
}

/* K3_HUGE_PAGES=1 (opt-in, measured in bench/notes/larger-than-ram.md): ask the kernel for
 * transparent huge pages on the weight mappings. On a kernel and filesystem
 * with large page-cache folios, pages read through such a mapping come in
 * 2 MiB folios and map with fewer TLB entries; pages already cached in 4 KiB
 * folios stay as they are until they are read again. */
static int want_huge_pages(void) {
    const char *v = getenv("K3_HUGE_PAGES");
    return v && !strcmp(v, "1");
}

static int want_anon_copy(void) {
    const char *v = getenv("K3_WEIGHTS");
    return v && !strcmp(v, "anon");
}

/* len bytes of fd read into a fresh anonymous mapping that starts on a 2 MiB
 * boundary (k3_map_huge), cut to len's pages so that munmap(map, len) frees
 * it, made read-only. NULL + k3_seterr naming path on failure. */
static void *anon_copy(int fd, size_t len, const char *path) {
    uint64_t avail = k3_proc_field("/proc/meminfo", "MemAvailable:") * 1024;
    if (avail && len > avail)
        return k3_seterr("%s: K3_WEIGHTS=anon: %.2f GB does not fit in the %.2f GB of available "
                         "memory; unset K3_WEIGHTS to map it",
                         path, len / 1e9, avail / 1e9),
               NULL;
    void *base;
    size_t span;
    char *a = k3_map_huge(len, 0, &base, &span);
    if (!a) return k3_preferr("%s: K3_WEIGHTS=anon", path), NULL;
    const size_t pg = (size_t)sysconf(_SC_PAGESIZE), keep = (len + pg - 1) / pg * pg;
    if (span > keep) munmap(a + keep, span - keep), span = keep;
    for (size_t at = 0; at < len;) {
        size_t want = len - at < ((size_t)1 << 30) ? len - at : (size_t)1 << 30;
        ssize_t got = pread(fd, a + at, want, (off_t)at);
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) {
            munmap(base, span);
            return k3_seterr("%s: K3_WEIGHTS=anon: read failed at byte %zu of %zu: %s", path, at,
                             len, got < 0 ? strerror(errno) : "the file shrank"),
                   NULL;
        }
        at += (size_t)got;
    }
    mprotect(a, span, PROT_READ);
    return a;
}

void k3_st_drop_pages(const k3_st *st) {
    for (int i = 0; st && i < st->nfiles; i++)
        if (st->files[i].map && !st->files[i].anon)
            madvise(st->files[i].map, st->files[i].size, MADV_DONTNEED);
}

int k3_st_add_file(k3_st *st, const char *path) {
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC); /* a FIFO must not block */
    if (fd < 0) return k3_seterr("%s: cannot open: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) || !S_ISREG(sb.st_mode)) {
        close(fd);
        return k3_seterr("%s: not a regular file", path);
    }
    size_t len = (size_t)sb.st_size;
    void *map = NULL;
    const int anon = len && want_anon_copy();
    if (anon) {
        map = anon_copy(fd, len, path);
        if (!map) {
            close(fd);
            return -1;
        }
    } else if (len) {
        map = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);
        if (map == MAP_FAILED) {
            close(fd);
            return k3_seterr("%s: mmap failed: %s", path, strerror(errno));
        }
    }
    close(fd);
    if (map && want_huge_pages())
        madvise(map, len, MADV_HUGEPAGE); /* a hint: failure is harmless */
    static const uint8_t empty[1];
    if (k3_st_add_buffer(st, map ? map : empty, len, path)) {
        if (map) munmap(map, len);
        return -1;
    }
    st->files[st->nfiles - 1].map = map;
    st->files[st->nfiles - 1].anon = anon;
    k3_mapguard_add(map, len, path);
    return 0;
}

static int cmp_by_name(const void *a, const void *b) {
    return strcmp(((const k3_tensor *)a)->name, ((const k3_tensor *)b)->name);
}

int k3_st_finish(k3_st *st) {
    if (st->n) qsort(st->t, (size_t)st->n, sizeof *st->t, cmp_by_name);
    st->sorted = 1;
    for (int i = 1; i < st->n; i++)
        if (!strcmp(st->t[i - 1].name, st->t[i].name))
            return k3_seterr("tensor %s appears twice (%s and %s)", st->t[i].name,
                             st->t[i - 1].file, st->t[i].file);
    return 0;
}

const k3_tensor *k3_st_find(const k3_st *st, const char *name) {
    if (!st->n) return NULL;
    k3_tensor key = {.name = (char *)name};
    return bsearch(&key, st->t, (size_t)st->n, sizeof *st->t, cmp_by_name);
}

void k3_st_clear(k3_st *st) {
    for (int i = 0; i < st->n; i++) free(st->t[i].name);
    for (int i = 0; i < st->nfiles; i++) {
        if (st->files[i].map) {
            k3_mapguard_remove(st->files[i].map);
            munmap(st->files[i].map, st->files[i].size);
        }
        free(st->files[i].path);
    }
    free(st->t);
    free(st->files);
    k3_st_init(st);
}

void k3_st_free(k3_st *st) {
    if (!st) return;
    k3_st_clear(st);
    free(st);
}

static char *join_path(const char *dir, const char *name) {
    size_t n = strlen(dir) + strlen(name) + 2;
    char *p = k3_xmalloc(n);
    snprintf(p, n, "%s/%s", dir, name);
    return p;
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Check that every weight_map entry names a tensor that is in the shard it claims. */
static int check_index_entries(const k3_st *st, json_t *wm, const char *idx) {
    const char *key;
    json_t *val;
    json_object_foreach(wm, key, val) {
        const k3_tensor *t = k3_st_find(st, key);
        if (!t) return k3_seterr("%s: tensor %s is listed but not in any shard", idx, key);
        const char *base = strrchr(t->file, '/');
        base = base ? base + 1 : t->file;
        if (strcmp(base, json_string_value(val)))
            return k3_seterr("%s: tensor %s is listed in %s but found in %s", idx, key,
                             json_string_value(val), t->file);
    }
    return 0;
}

/* Unique shard file names from the index's weight_map, sorted. */
static int index_files(json_t *wm, const char *idx, char ***out, int *nout) {
    size_t n = json_object_size(wm), k = 0;
    char **f = k3_xcalloc(n ? n : 1, sizeof *f);
    const char *key;
    json_t *val;
    json_object_foreach(wm, key, val) {
        const char *s = json_string_value(val);
        if (!s || !*s || strchr(s, '/')) {
            free(f);
            return k3_seterr("%s: weight_map[%s] must be a shard file name in the same directory",
                             idx, key);
        }
        f[k++] = (char *)s;
    }
    qsort(f, k, sizeof *f, cmp_str);
    int u = 0;
    for (size_t i = 0; i < k; i++)
        if (!u || strcmp(f[u - 1], f[i])) f[u++] = f[i];
    *out = f;
    *nout = u;
    return 0;
}

int k3_st_parse_index(const char *text, size_t len, const char *label, char ***files, int *nfiles) {
    json_error_t jerr;
    json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
    if (!root) return k3_seterr("%s: invalid JSON: %s (line %d)", label, jerr.text, jerr.line);
    json_t *wm = json_object_get(root, "weight_map");
    int rc = 0, n = 0;
    char **names = NULL;
    if (!json_is_object(wm) || !json_object_size(wm))
        rc = k3_seterr("%s: missing or empty \"weight_map\" object", label);
    if (!rc) rc = index_files(wm, label, &names, &n);
    *files = NULL;
    *nfiles = 0;
    if (!rc) {
        *files = k3_xcalloc((size_t)n, sizeof **files);
        for (int i = 0; i < n; i++) (*files)[i] = k3_xstrdup(names[i]);
        *nfiles = n;
    }
    free(names);
    json_decref(root);
    return rc;
}

/* Map and validate the shard files paths[0..n), drawing a bar over their bytes. */
static int add_files(k3_st *st, char *const *paths, int n, int progress) {
    uint64_t total = 0, done = 0;
    struct stat sb;
    for (int i = 0; i < n; i++)
        if (!stat(paths[i], &sb)) total += (uint64_t)sb.st_size;
    k3_progress bar;
    k3_progress_start(&bar, progress, "mapping shards ", total, "MB", 1e6);
    int rc = 0;
    for (int i = 0; !rc && i < n; i++) {
        rc = k3_st_add_file(st, paths[i]);
        if (!stat(paths[i], &sb)) done += (uint64_t)sb.st_size;
        char note[64];
        snprintf(note, sizeof note, "%d/%d files, %d tensors", i + 1, n, st->n);
        k3_progress_update(&bar, done, note);
    }
    if (!rc)
        k3_progress_finish(&bar);
    else if (progress)
        fputc('\n', stderr);
    return rc;
}

static int open_from_index(k3_st *st, const char *dir, const char *idx, int progress) {
    size_t len;
    char *text = k3_read_regular_file(idx, K3_SMALL_FILE_MAX, &len);
    if (!text) return -1;
    char **files = NULL;
    int n = 0, rc = k3_st_parse_index(text, len, idx, &files, &n);
    if (!rc) {
        char **paths = k3_xcalloc((size_t)(n ? n : 1), sizeof *paths);
        for (int i = 0; i < n; i++) paths[i] = join_path(dir, files[i]);
        rc = add_files(st, paths, n, progress);
        for (int i = 0; i < n; i++) free(paths[i]);
        free(paths);
    }
    if (!rc) rc = k3_st_finish(st);
    if (!rc) { /* every listed tensor must be in the shard the index names */
        json_t *root = json_loadb(text, len, 0, NULL);
        rc = check_index_entries(st, json_object_get(root, "weight_map"), idx);
        json_decref(root);
    }
    for (int i = 0; i < n; i++) free(files[i]);
    free(files);
    free(text);
    return rc;
}

/* Every DIR/ *.safetensors, sorted by name. The directory is listed rather than
 * globbed, so a model path with glob characters ("x[1]") is taken literally. */
static int open_by_listing(k3_st *st, const char *dir, int progress) {
    DIR *d = opendir(dir);
    if (!d) return k3_seterr("%s: cannot open the directory: %s", dir, strerror(errno));
    char **paths = NULL;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t len = strlen(e->d_name);
        if (len <= 12 || strcmp(e->d_name + len - 12, ".safetensors")) continue;
        paths = k3_xrealloc(paths, sizeof *paths * (size_t)(n + 1));
        paths[n++] = join_path(dir, e->d_name);
    }
    closedir(d);
    if (!n) return k3_seterr("%s: no model.safetensors.index.json and no *.safetensors files", dir);
    qsort(paths, (size_t)n, sizeof *paths, cmp_str);
    int rc = add_files(st, paths, n, progress);
    for (int i = 0; i < n; i++) free(paths[i]);
    free(paths);
    return rc ? rc : k3_st_finish(st);
}

k3_st *k3_st_open_dir(const char *dir) {
    return k3_st_open_dir_progress(dir, 0);
}

k3_st *k3_st_open_dir_progress(const char *dir, int progress) {
    k3_st *st = k3_xmalloc(sizeof *st);
    k3_st_init(st);
    char *idx = join_path(dir, "model.safetensors.index.json");
    int rc = access(idx, F_OK) == 0 ? open_from_index(st, dir, idx, progress)
                                    : open_by_listing(st, dir, progress);
    free(idx);
    if (rc) {
        k3_st_free(st);
        return NULL;
    }
    return st;
}
