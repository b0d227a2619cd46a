/* steal.c — contiguous shares with stealing from the back (see steal.h). */
#include "kernels/steal.h"

static uint64_t pack(uint64_t front, uint64_t back) {
    return front | back << 32;
}

void k3_steal_init(k3_steal *s, int n, int64_t items, const int64_t *bound) {
    s->n = n;
    for (int t = 0; t < n; t++) {
        uint64_t f = bound ? (uint64_t)bound[t] : (uint64_t)(items * t / n);
        uint64_t b = bound ? (uint64_t)bound[t + 1] : (uint64_t)(items * (t + 1) / n);
        atomic_store_explicit(&s->share[t].span, pack(f, b), memory_order_relaxed);
    }
    atomic_thread_fence(memory_order_release);
}

/* Up to max items off the front (back = 0) or the back of share t. */
static int64_t claim(k3_steal_share *sh, int back, int64_t max, int64_t *got) {
    uint64_t v = atomic_load_explicit(&sh->span, memory_order_acquire);
    for (;;) {
        uint64_t f = v & 0xffffffffu, b = v >> 32;
        if (f >= b) return -1;
        uint64_t take = b - f < (uint64_t)max ? b - f : (uint64_t)max;
        uint64_t nv = back ? pack(f, b - take) : pack(f + take, b);
        if (atomic_compare_exchange_weak_explicit(&sh->span, &v, nv, memory_order_acq_rel,
                                                  memory_order_acquire)) {
            *got = (int64_t)take;
            return back ? (int64_t)(b - take) : (int64_t)f;
        }
    }
}

int64_t k3_steal_next(k3_steal *s, int tid, int64_t max, int64_t *got) {
    if (max < 1) max = 1;
    if (tid >= 0 && tid < s->n) {
        int64_t i = claim(&s->share[tid], 0, max, got);
        if (i >= 0) return i;
    }
    for (int k = 1; k <= s->n; k++) { /* the others, starting after tid */
        int t = ((tid < 0 ? 0 : tid) + k) % s->n;
        if (t == tid) continue;
        int64_t i = claim(&s->share[t], 1, max, got);
        if (i >= 0) return i;
    }
    return -1;
}
