/* mapguard.h — a message naming the file when a mapped checkpoint file shrinks.
 *
 * Weights are read straight from mmap'd shards. If a shard is truncated or
 * replaced while k3 runs (a copy still in progress, a re-download), touching
 * a page past the new end raises SIGBUS, which would kill the process with no
 * word about why. Every mapped shard is registered here; the SIGBUS handler
 * looks the faulting address up and writes
 *     k3: FILE: the file was truncated or changed while k3 was using it (bus
 *     error at byte N); stopping
 * before exiting with status 1. Faults outside registered maps keep the
 * default action. The handler is installed with the first registration. */
#ifndef K3_IO_MAPGUARD_H
#define K3_IO_MAPGUARD_H

#include <stddef.h>

/* Remember [addr, addr + len) as the mapping of path (copied). Registration
 * beyond the table's capacity is silently skipped (the default SIGBUS then). */
void k3_mapguard_add(const void *addr, size_t len, const char *path);
/* Forget the mapping that starts at addr (before munmap). */
void k3_mapguard_remove(const void *addr);

#endif
