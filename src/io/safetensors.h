/* safetensors.h — memory-mapped safetensors files with strict header validation.
 *
 * A k3_st is a set of tensors gathered from one or more shard files. Each file
 * is mapped read-only (MAP_PRIVATE) and its header is checked before any
 * tensor is exposed: header length inside the file, known dtypes, shape ×
 * dtype size = byte range, every range inside the data section and no two
 * ranges overlapping. Tensor data is then read in place (never copied). */
#ifndef K3_IO_SAFETENSORS_H
#define K3_IO_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

typedef enum {
    K3_DT_F64 = 0,
    K3_DT_F32,
    K3_DT_F16,
    K3_DT_BF16,
    K3_DT_I64,
    K3_DT_I32,
    K3_DT_I16,
    K3_DT_I8,
    K3_DT_U64,
    K3_DT_U32,
    K3_DT_U16,
    K3_DT_U8,
    K3_DT_BOOL,
    K3_DT_F8_E8M0,
    K3_DT_COUNT
} k3_dtype;

#define K3_ST_MAX_DIMS 8

typedef struct k3_tensor {
    char *name;
    k3_dtype dtype;
    int ndim;
    int64_t shape[K3_ST_MAX_DIMS];
    const uint8_t *data; /* points into the mapped file */
    size_t bytes;
    const char *file; /* path of the shard holding it (owned by the k3_st) */
} k3_tensor;

typedef struct k3_st_file {
    char *path;
    void *map; /* NULL for caller-owned buffers (k3_st_add_buffer) */
    size_t size;
    int anon; /* map is an anonymous copy (K3_WEIGHTS=anon), not the file */
} k3_st_file;

typedef struct k3_st {
    int nfiles;
    k3_st_file *files;
    int n;
    k3_tensor *t; /* sorted by name after k3_st_finish() */
    int sorted;
} k3_st;

const char *k3_dtype_name(k3_dtype d);
size_t k3_dtype_size(k3_dtype d);
/* Parse a safetensors dtype string ("BF16"...); -1 if unknown. */
int k3_dtype_parse(const char *s);

/* An empty set. */
void k3_st_init(k3_st *st);
/* Validate the header of a whole file image buf[0..len) and append its tensors.
 * label names the file in error messages. buf must outlive st. */
int k3_st_add_buffer(k3_st *st, const uint8_t *buf, size_t len, const char *label);
/* Drop the mapped files' pages from this process (MADV_DONTNEED: the page
 * cache keeps them, a later access maps them again); anonymous copies are
 * left alone (dropping would zero them). */
void k3_st_drop_pages(const k3_st *st);

/* mmap a file and add it. With K3_WEIGHTS=anon in the environment (opt-in)
 * the file is instead read into anonymous memory on 2 MiB boundaries with
 * transparent huge pages requested, refused with an error naming the file if
 * it does not fit in MemAvailable: under a hypervisor that shadows the page
 * tables, a multi-GB file mapping streams at 14-30 GB/s per core and swings
 * from pass to pass, anonymous huge pages at ~31 GB/s (bench/notes/batching-and-serving.md).
 * The release is larger than most machines' RAM: the default stays the
 * mapping. */
int k3_st_add_file(k3_st *st, const char *path);
/* Sort by name and reject a name that appears twice (e.g. in two shards). */
int k3_st_finish(k3_st *st);
/* Open a checkpoint directory: the shards listed in model.safetensors.index.json
 * if present, else every *.safetensors file. NULL + k3_errmsg on error. */
k3_st *k3_st_open_dir(const char *dir);
/* The same, with a progress bar on stderr over the shard bytes when progress != 0. */
k3_st *k3_st_open_dir_progress(const char *dir, int progress);
void k3_st_free(k3_st *st); /* unmaps; for k3_st_open_dir results */
/* The distinct shard file names of a model.safetensors.index.json text, sorted
 * (each a plain name in the same directory). Free each and the array. */
int k3_st_parse_index(const char *text, size_t len, const char *label, char ***files, int *nfiles);
void k3_st_clear(k3_st *st); /* frees the contents, not st itself */

/* Lookup by exact name (after k3_st_finish); NULL if absent. */
const k3_tensor *k3_st_find(const k3_st *st, const char *name);
/* Number of elements (product of the shape). */
int64_t k3_tensor_numel(const k3_tensor *t);
/* "[3, 4]" style shape string into buf. */
const char *k3_tensor_shape_str(const k3_tensor *t, char *buf, size_t cap);

#endif
