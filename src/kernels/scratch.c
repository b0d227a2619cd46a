/* scratch.c — per-thread grow-only kernel buffers and the memory of
 * prepared activations (see scratch.h). */
#include "kernels/scratch.h"
#include "base/err.h"

#include <pthread.h>
#include <stdlib.h>

/* Prepared activations a thread keeps at once: more than the inputs of any
 * set of products a claim loop runs over (a claim never spans more than a few). */
#define PREP_SLOTS 8

typedef struct {
    int kind; /* 0: empty */
    const void *x;
    uint64_t shape;
    uint64_t gen;  /* the span it was made in */
    uint64_t used; /* for least-recently-used replacement */
    size_t bytes, cap;
    void *p;
} prep_slot;

typedef struct {
    void *p[K3_SCRATCH_N];
    size_t cap[K3_SCRATCH_N];
    prep_slot prep[PREP_SLOTS];
    int depth;      /* open spans */
    uint64_t gen;   /* bumped by every open and close */
    uint64_t clock; /* prep_slot.used */
} scratch_set;

static pthread_key_t key;
static pthread_once_t key_once = PTHREAD_ONCE_INIT;

static void free_set(void *v) {
    scratch_set *s = v;
    for (int i = 0; i < K3_SCRATCH_N; i++) free(s->p[i]);
    for (int i = 0; i < PREP_SLOTS; i++) free(s->prep[i].p);
    free(s);
}

static void make_key(void) {
    pthread_key_create(&key, free_set);
}

static scratch_set *this_thread(void) {
    pthread_once(&key_once, make_key);
    scratch_set *s = pthread_getspecific(key);
    if (!s) {
        s = calloc(1, sizeof *s);
        if (!s) k3_die("out of memory (kernel scratch)");
        pthread_setspecific(key, s);
    }
    return s;
}

/* *p with room for `bytes` (64-byte aligned; contents undefined after growth). */
static void *grow(void **p, size_t *cap, size_t bytes) {
    if (*cap < bytes) {
        size_t n = (bytes + 4095) & ~(size_t)4095;
        void *q = NULL;
        if (posix_memalign(&q, 64, n) != 0) k3_die("out of memory (kernel scratch %zu bytes)", n);
        free(*p);
        *p = q;
        *cap = n;
    }
    return *p;
}

void *k3_scratch(int slot, size_t bytes) {
    scratch_set *s = this_thread();
    return grow(&s->p[slot], &s->cap[slot], bytes);
}

void k3_prep_open(void) {
    scratch_set *s = this_thread();
    s->depth++;
    s->gen++;
}

void k3_prep_close(void) {
    scratch_set *s = this_thread();
    if (s->depth > 0) s->depth--;
    s->gen++;
}

void *k3_prep_buf(int kind, const void *x, uint64_t shape, size_t bytes, int *ready) {
    scratch_set *s = this_thread();
    prep_slot *victim = &s->prep[0];
    s->clock++;
    for (int i = 0; i < PREP_SLOTS; i++) {
        prep_slot *e = &s->prep[i];
        if (s->depth > 0 && shape && e->kind == kind && e->x == x && e->shape == shape &&
            e->gen == s->gen && e->bytes == bytes) {
            e->used = s->clock;
            *ready = 1;
            return e->p;
        }
        if (e->used < victim->used) victim = e;
    }
    *victim = (prep_slot){kind, x, shape, s->gen, s->clock, bytes, victim->cap, victim->p};
    *ready = 0;
    return grow(&victim->p, &victim->cap, bytes);
}
