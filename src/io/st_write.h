/* st_write.h — safetensors writer (one file, or a sharded checkpoint directory).
 *
 * Used by `k3 synth` (random checkpoints) and `k3 quantize`. The file layout is
 * the standard one: u64 little-endian header length, a JSON header padded with
 * spaces to a multiple of 8, then the tensor bytes back to back with no gaps
 * (what the safetensors library validates). Tensors are laid out grouped by
 * element size, largest first, so every tensor starts aligned to its element
 * size when the file is memory-mapped; the header lists them in that order.
 *
 * Data is streamed to unlinked temporary files next to the output while
 * tensors are added, so writing a multi-GB checkpoint needs little memory.
 *
 *     k3_stw *w = k3_stw_open("out/model.safetensors");
 *     k3_stw_add(w, "x.weight", "BF16", (int64_t[]){4, 8}, 2, data, 64);
 *     if (k3_stw_close(w)) die(k3_errmsg());
 *
 * Sharded directory (model-0000i-of-0000N.safetensors + index json):
 *
 *     k3_stw_dir *d = k3_stwd_open("out", 4ull << 30);   // ~4 GiB per shard
 *     k3_stwd_add(d, ...);  ...  k3_stwd_close(d);
 *
 * Every function returns -1 / NULL with k3_errmsg() naming the file or tensor. */
#ifndef K3_IO_ST_WRITE_H
#define K3_IO_ST_WRITE_H

#include <stddef.h>
#include <stdint.h>

typedef struct k3_stw k3_stw;
typedef struct k3_stw_dir k3_stw_dir;

/* Bytes per element of a safetensors dtype string ("F32", "BF16", "U8", ...), 0 if unknown. */
size_t k3_st_dtype_size(const char *dtype);

/* Start writing one safetensors file at path (created / truncated at close). */
k3_stw *k3_stw_open(const char *path);
/* Add a tensor: bytes must equal prod(shape) * dtype size; ndim 0..8 (0 = scalar).
 * The data is copied out before returning. Duplicate names are an error. */
int k3_stw_add(k3_stw *w, const char *name, const char *dtype, const int64_t *shape, int ndim,
               const void *data, size_t bytes);
/* Optional "__metadata__" entry (string to string); default {"format": "pt"}. */
int k3_stw_set_meta(k3_stw *w, const char *key, const char *value);
/* Number of tensors and data bytes added so far. */
size_t k3_stw_count(const k3_stw *w);
uint64_t k3_stw_bytes(const k3_stw *w);
/* Write the file and free w (also on error; a failed file is removed). */
int k3_stw_close(k3_stw *w);
/* Free w without writing anything. */
void k3_stw_abort(k3_stw *w);

/* Write dir/model.safetensors.index.json: {"metadata": {"total_size": N},
 * "weight_map": {name: file}} for n tensors. */
int k3_st_write_index(const char *dir, size_t n, const char *const *names, const char *const *files,
                      uint64_t total_size);

/* Sharded writer: starts a new shard when the current one would exceed
 * shard_bytes (a single larger tensor gets a shard of its own). One shard is
 * written as dir/model.safetensors with no index; several as
 * model-0000i-of-0000N.safetensors plus model.safetensors.index.json. */
k3_stw_dir *k3_stwd_open(const char *dir, uint64_t shard_bytes);
int k3_stwd_add(k3_stw_dir *d, const char *name, const char *dtype, const int64_t *shape, int ndim,
                const void *data, size_t bytes);
/* Number of shards so far (after close: the number written). */
int k3_stwd_shards(const k3_stw_dir *d);
int k3_stwd_close(k3_stw_dir *d);
/* Stop without writing: removes the shards written so far, frees d. */
void k3_stwd_abort(k3_stw_dir *d);

#endif
