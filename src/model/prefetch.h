/* prefetch.h — models larger than RAM: read the routed experts ahead, keep hot ones resident.
 *
 * Weights are memory-mapped; a model larger than RAM would otherwise page
 * each selected expert in by 4 KiB faults, one expert after the other, while
 * the forward pass waits. As soon as the router has chosen the experts of a
 * MoE call, moe.c calls k3_prefetch_route: the byte ranges of every selected
 * expert (gate, up, down: codes, scales, biases of this rank's slice) are
 * handed to a small pool of threads that issue madvise(MADV_WILLNEED) on
 * them in 2 MiB pieces, so the reads of all selected experts are in flight
 * together, behind the first expert's compute and the shared expert's.
 *
 * RAM budget (K3_RAM_BUDGET=bytes with an optional K/M/G suffix, or
 * k3_prefetch_set): first the dense part (every weight tensor that is not a
 * routed expert, of the layers this process runs) is locked in RAM (mlock),
 * up to the budget; the rest of the budget holds the experts routed to most
 * often so far (counted per layer and expert, re-ranked after 8 and 16 MoE calls, then every 32),
 * mlocked by the pool and munlocked when they drop out of the top. Locking
 * only changes where pages live, never what is computed: logits are bitwise
 * those of a run without prefetch or budget (tests/sh/prefetch_residency.sh).
 *
 * Read-ahead mode. K3_PREFETCH=1: every selection. K3_PREFETCH=0: off
 * (plain mmap faults). Unset (auto): every selection when the mapped weight
 * files are larger than MemAvailable (/proc/meminfo, read when the model is
 * first routed) or a RAM budget is set; otherwise only the first time each
 * (layer, expert) is chosen, so a cold start still reads ahead while a model
 * held in RAM pays no madvise per token (K3_PREFETCH_MEMAVAIL=SIZE replaces
 * MemAvailable, for tests). Statistics
 * (k3_prefetch_stats): selected expert bytes and how many of them were
 * already resident when the router chose them (mincore; only counted while
 * k3_prefetch_count_hits(1), as k3 bench does). K3_PREFETCH_STATS=1 prints
 * them at exit. K3_ROUTES_FILE=path writes one line per MoE call ("layer L:
 * e1 e2 ..." — the experts with tokens; one token per call in decode mode),
 * for comparing the routing of two checkpoints. */
#ifndef K3_MODEL_PREFETCH_H
#define K3_MODEL_PREFETCH_H

#include <stdint.h>

#include "k3.h"

struct k3_moe_w; /* model.h: this header is also the k3 command's (k3 bench) */

/* The experts with tokens in this call: start[e+1] > start[e] (E + 1 entries). */
void k3_prefetch_route(const k3_model *m, const struct k3_moe_w *w, const int64_t *start);

/* Override the environment: read-ahead on (1), off (0) or auto (-1); RAM budget in bytes
 * (0 = none). */
void k3_prefetch_set(int enable, uint64_t ram_budget);
/* Parse "24G", "512M", "1000000" (bytes); -1 on error. */
int k3_prefetch_parse_size(const char *s, uint64_t *out);

enum { K3_READAHEAD_OFF, K3_READAHEAD_FIRST, K3_READAHEAD_EVERY };
const char *k3_readahead_name(int mode);

typedef struct k3_prefetch_stats {
    uint64_t calls;          /* MoE calls seen */
    uint64_t experts;        /* selected (layer, expert) pairs, summed over calls */
    uint64_t need_bytes;     /* their bytes (counted while counting hits) */
    uint64_t resident_bytes; /* of those, already in RAM when selected */
    uint64_t prefetch_bytes; /* handed to the read-ahead pool */
    uint64_t dense_locked;   /* bytes of the dense part locked */
    uint64_t experts_locked; /* bytes of hot experts locked now */
    uint64_t lock_failures;  /* mlock calls that failed (RLIMIT_MEMLOCK, memory) */
    uint64_t rebalances;
    uint64_t pool_cpu_ns;   /* CPU time the read-ahead pool's threads spent on their jobs */
    int readahead;          /* K3_READAHEAD_* chosen for the model */
    uint64_t mapped_bytes;  /* its weight files, mapped */
    uint64_t mem_available; /* MemAvailable when it was attached */
} k3_prefetch_stats;
k3_prefetch_stats k3_prefetch_get_stats(void);
void k3_prefetch_reset_stats(void);
/* Count resident bytes of the selected experts (mincore) from now on. */
void k3_prefetch_count_hits(int on);
/* Wait until the pool has no queued work (reads issued, locks taken). */
void k3_prefetch_drain(void);

#endif
