/* mapguard.c — SIGBUS on a mapped shard → a message naming the file (see mapguard.h). */
#include "io/mapguard.h"

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define GUARD_MAX 4096
#define GUARD_PATH 480

typedef struct {
    _Atomic uintptr_t lo; /* 0: free slot */
    uintptr_t hi;
    char path[GUARD_PATH];
} guard;

static guard guards[GUARD_MAX];
static pthread_mutex_t guard_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t guard_once = PTHREAD_ONCE_INIT;

/* Async-signal-safe helpers: only write(2) and local buffers. */
static size_t put_str(char *buf, size_t o, size_t cap, const char *s) {
    while (*s && o < cap) buf[o++] = *s++;
    return o;
}

static size_t put_u64(char *buf, size_t o, size_t cap, uint64_t v) {
    char d[24];
    int n = 0;
    do d[n++] = (char)('0' + v % 10);
    while ((v /= 10) && n < 24);
    while (n && o < cap) buf[o++] = d[--n];
    return o;
}

static void on_sigbus(int sig, siginfo_t *si, void *uc) {
    (void)uc;
    uintptr_t a = (uintptr_t)si->si_addr;
    for (int i = 0; i < GUARD_MAX; i++) {
        uintptr_t lo = atomic_load(&guards[i].lo);
        if (!lo || a < lo || a >= guards[i].hi) continue;
        char msg[GUARD_PATH + 200];
        size_t o = put_str(msg, 0, sizeof msg, "k3: ");
        o = put_str(msg, o, sizeof msg, guards[i].path);
        o = put_str(msg, o, sizeof msg,
                    ": the file was truncated or changed while k3 was using it (bus error at "
                    "byte ");
        o = put_u64(msg, o, sizeof msg, (uint64_t)(a - lo));
        o = put_str(msg, o, sizeof msg, "); stopping\n");
        ssize_t w = write(2, msg, o);
        (void)w;
        _exit(1);
    }
    signal(sig, SIG_DFL); /* not one of ours: the default action on return */
}

static void install(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_sigbus;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGBUS, &sa, NULL);
}

void k3_mapguard_add(const void *addr, size_t len, const char *path) {
    if (!addr || !len) return;
    pthread_once(&guard_once, install);
    pthread_mutex_lock(&guard_lock);
    for (int i = 0; i < GUARD_MAX; i++) {
        if (atomic_load(&guards[i].lo)) continue;
        guards[i].hi = (uintptr_t)addr + len;
        snprintf(guards[i].path, GUARD_PATH, "%s", path);
        atomic_store(&guards[i].lo, (uintptr_t)addr); /* published last */
        break;
    }
    pthread_mutex_unlock(&guard_lock);
}

void k3_mapguard_remove(const void *addr) {
    if (!addr) return;
    pthread_mutex_lock(&guard_lock);
    for (int i = 0; i < GUARD_MAX; i++)
        if (atomic_load(&guards[i].lo) == (uintptr_t)addr) {
            atomic_store(&guards[i].lo, 0);
            break;
        }
    pthread_mutex_unlock(&guard_lock);
}
