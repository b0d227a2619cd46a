/* mem.h — allocation helpers, file reading and memory statistics.
 *
 * k3 keeps weights memory-mapped; these helpers are for activations, caches
 * and small files. Allocation failure is reported through err.h, not abort(). */
#ifndef K3_BASE_MEM_H
#define K3_BASE_MEM_H

#include <stddef.h>
#include <stdint.h>

/* 64-byte aligned, zero-filled allocation; NULL + k3_seterr on failure. Free with k3_free. */
void *k3_alloc(size_t bytes);
void k3_free(void *p);
/* malloc/realloc/strdup that die on out-of-memory (for small bookkeeping only). */
void *k3_xmalloc(size_t n);
void *k3_xcalloc(size_t n, size_t size);
void *k3_xrealloc(void *p, size_t n);
char *k3_xstrdup(const char *s);

/* Per-sequence state (KDA recurrent state, MLA caches, prompt-cache
 * snapshots): zero-filled buffers that from K3_BIG_MIN bytes up are their
 * own anonymous mapping, aligned to 2 MiB with transparent huge pages
 * requested (MADV_HUGEPAGE) and unmapped on free; smaller ones come from
 * calloc. Why: every first touch of a 4 KiB page is a fault, and a new
 * sequence or snapshot touches all of its state at once (K3's 69 KDA layers
 * hold 434 MB per sequence: 106K faults, at the 14 us per fault measured
 * under a paravirtualized guest 1.5 s; a 2 MiB page is one fault for 512).
 * k3_big_calloc returns NULL + k3_seterr on failure; k3_big_realloc keeps
 * the first min(old, new) bytes (the rest undefined) and on failure leaves
 * p intact. Free with k3_big_free only. */
#define K3_BIG_MIN ((size_t)2 << 20)
/* An anonymous read-write mapping of bytes rounded up to 2 MiB (so its last
 * huge page is whole too) that starts on a 2 MiB boundary, with
 * MADV_HUGEPAGE on it, and head bytes (rounded up to pages, left in small
 * pages) mapped just before it. The whole mapping is *base, *len:
 * munmap(*base, *len) frees it (with head 0, *base is the pointer
 * returned). NULL + k3_seterr on failure. */
void *k3_map_huge(size_t bytes, size_t head, void **base, size_t *len);
void *k3_big_calloc(size_t bytes);
void *k3_big_realloc(void *p, size_t bytes);
void k3_big_free(void *p);

/* Read a whole file into a NUL-terminated buffer. Returns NULL + k3_seterr naming the path. */
char *k3_read_file(const char *path, size_t *len_out);
/* The same for a file of a checkpoint or tokenizer: refuses anything that is not a
 * regular file (a FIFO, a device such as /dev/zero: never blocks on open) and files
 * larger than cap bytes. */
char *k3_read_regular_file(const char *path, size_t cap, size_t *len_out);
/* The cap for the JSON and tokenizer files of a checkpoint (K3's largest, the
 * safetensors index, is a few MB). */
#define K3_SMALL_FILE_MAX ((size_t)64 << 20)

/* The number after `key` on the first line of a /proc-style text file that
 * starts with it (e.g. "/proc/meminfo", "MemAvailable:"), in the file's own
 * unit; 0 if the file or the line is missing. */
uint64_t k3_proc_field(const char *path, const char *key);
/* Peak resident set size of this process in bytes (VmHWM), 0 if unknown. */
uint64_t k3_peak_rss(void);
/* Current resident set size in bytes (VmRSS), 0 if unknown. */
uint64_t k3_current_rss(void);

/* Monotonic wall clock in seconds. */
double k3_now(void);

#endif
