/* scratch.c — per-thread grow-only kernel buffers (see scratch.h). */
#include "kernels/scratch.h"
#include "base/err.h"

#include <pthread.h>
#include <stdlib.h>

typedef struct {
    void *p[K3_SCRATCH_N];
    size_t cap[K3_SCRATCH_N];
} scratch_set;

static pthread_key_t key;
static pthread_once_t key_once = PTHREAD_ONCE_INIT;

static void free_set(void *v) {
    scratch_set *s = v;
    for (int i = 0; i < K3_SCRATCH_N; i++) free(s->p[i]);
    free(s);
}

static void make_key(void) {
    pthread_key_create(&key, free_set);
}

void *k3_scratch(int slot, size_t bytes) {
    pthread_once(&key_once, make_key);
    scratch_set *s = pthread_getspecific(key);
    if (!s) {
        s = calloc(1, sizeof *s);
        if (!s) k3_die("out of memory (kernel scratch)");
        pthread_setspecific(key, s);
    }
    if (s->cap[slot] < bytes) {
        size_t n = (bytes + 4095) & ~(size_t)4095;
        void *p = NULL;
        if (posix_memalign(&p, 64, n) != 0) k3_die("out of memory (kernel scratch %zu bytes)", n);
        free(s->p[slot]);
        s->p[slot] = p;
        s->cap[slot] = n;
    }
    return s->p[slot];
}
