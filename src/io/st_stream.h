/* st_stream.h — a sharded safetensors checkpoint written in place, resumably.
 *
 * For writers whose tensors are too large to hold (the stacked experts of one
 * MoE layer of K3 are ~10 GB even quantized): every tensor is declared first
 * (name, dtype, shape), then k3_sts_layout assigns shards and data offsets and
 * builds each shard's header. Data is then written piece by piece at its final
 * offset (pwrite), in any order, so a producer can emit expert e of a stacked
 * tensor [E, rows, cols] and its scales as soon as it has quantized it.
 *
 * Layout: tensors declared under one k3_sts_group stay in one shard; a shard is
 * closed when the next group would take it past shard_bytes (a larger group
 * gets a shard of its own), as MLX shards. Inside a shard tensors are ordered
 * by element size (8, 4, 2, 1 bytes) so each is aligned when mapped; the
 * header lists them in data order. One shard is dir/model.safetensors, several
 * are model-0000i-of-0000N.safetensors plus model.safetensors.index.json.
 *
 * Resume: a shard is written as model-0000i-of-0000N.partial and renamed when
 * complete; then dir/k3-manifest.json records the plan id (a hash of every
 * header and of the caller's fingerprint: inputs and options, SHA-256) and
 * each finished shard's size, the SHA-256 of the whole file and of each
 * tensor's data bytes (read back from disk, in bounded blocks: io/sha256.h).
 * k3_sts_resume keeps the shards the manifest lists for the same plan whose
 * file still has that size and digest; the rest are rewritten.
 *
 * Env hook for tests: K3_STS_STOP_AFTER_SHARD=k makes k3_sts_close_shard fail
 * ("stopped after shard k") once shard k is complete and recorded, as if the
 * process had been killed there.
 *
 * Every function returns -1 / NULL with k3_errmsg() naming the file or tensor. */
#ifndef K3_IO_ST_STREAM_H
#define K3_IO_ST_STREAM_H

#include <stddef.h>
#include <stdint.h>

typedef struct k3_sts k3_sts;

/* A writer for directory dir (which must exist); shard_bytes 0 = one shard.
 * label prefixes the progress lines ("k3 quantize"). */
k3_sts *k3_sts_new(const char *dir, uint64_t shard_bytes, const char *label);
void k3_sts_free(k3_sts *s);

/* Start a new group: the tensors declared after it share one shard. */
void k3_sts_group(k3_sts *s);
/* Declare a tensor; returns its index (>= 0) or -1 (bad dtype/shape, duplicate name). */
int k3_sts_declare(k3_sts *s, const char *name, const char *dtype, const int64_t *shape, int ndim);
/* Assign shards and offsets, build the headers and the plan id. */
int k3_sts_layout(k3_sts *s, const char *fingerprint);

int k3_sts_nshards(const k3_sts *s);
uint64_t k3_sts_total_bytes(const k3_sts *s);     /* data bytes of all tensors */
int k3_sts_shard_of(const k3_sts *s, int tensor); /* 1-based */
uint64_t k3_sts_tensor_bytes(const k3_sts *s, int tensor);

/* Keep the verified shards of an earlier run with the same plan; *kept = how many. */
int k3_sts_resume(k3_sts *s, int *kept);
int k3_sts_shard_done(const k3_sts *s, int shard);

/* Progress bar on stderr (bytes written and ETA); also one line per finished shard. */
void k3_sts_progress(k3_sts *s, int tty_bar);

/* Open shard `shard` (1-based) for writing: header written, file sized. */
int k3_sts_open_shard(k3_sts *s, int shard);
/* Write n bytes of tensor `tensor` at offset off inside it (its shard must be open). */
int k3_sts_write(k3_sts *s, int tensor, uint64_t off, const void *data, size_t n);
/* Every tensor of the open shard fully written: sync, hash, rename, record. */
int k3_sts_close_shard(k3_sts *s);
/* All shards done: write the index (several shards). */
int k3_sts_finish(k3_sts *s);

/* After the layout (and the shards written, by this run or an earlier one):
 * read n bytes of tensor `tensor` at offset off inside it from its finished
 * shard file with pread (nothing is mapped). */
int k3_sts_read(k3_sts *s, int tensor, uint64_t off, void *buf, size_t n);
/* Check the finished output against this layout without mapping it: every
 * shard exists with the planned size and the planned header bytes, and, with
 * full_sums, dir/k3-manifest.json is of this plan and lists every shard with
 * the SHA-256 of the whole file as it is now on disk (re-read; on a
 * difference, the first tensor whose data differs is named). Errors name
 * the shard. */
int k3_sts_verify(k3_sts *s, int full_sums);

#endif
