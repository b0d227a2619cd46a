/* mem.c — allocation helpers, whole-file reads, RSS and clock (see mem.h). */
#include "base/mem.h"
#include "base/err.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

void *k3_alloc(size_t bytes) {
    void *p = NULL;
    size_t n = (bytes + 63) & ~(size_t)63;
    if (n == 0) n = 64;
    if (posix_memalign(&p, 64, n) != 0) {
        k3_seterr("out of memory allocating %zu bytes", bytes);
        return NULL;
    }
    memset(p, 0, n);
    return p;
}

void k3_free(void *p) {
    free(p);
}

static void oom(size_t n) {
    k3_die("out of memory (%zu bytes)", n);
}

void *k3_xmalloc(size_t n) {
    void *p = malloc(n ? n : 1);
    if (!p) oom(n);
    return p;
}

void *k3_xcalloc(size_t n, size_t size) {
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (!p) oom(n * size);
    return p;
}

void *k3_xrealloc(void *p, size_t n) {
    void *q = realloc(p, n ? n : 1);
    if (!q) oom(n);
    return q;
}

/* The 64 bytes before a k3_big_* pointer: how it was made. */
typedef struct {
    void *base;   /* the mapping (NULL: the block came from calloc) */
    size_t len;   /* the mapping's length, or the calloc'd block's */
    size_t bytes; /* what the caller asked for */
    uint64_t magic;
} big_head;
#define BIG_HEAD 64
#define BIG_MAGIC 0x6b3362696762756full
#define HUGE_2M ((size_t)2 << 20)

void *k3_map_huge(size_t bytes, size_t head, void **base, size_t *len) {
    const size_t pg = (size_t)sysconf(_SC_PAGESIZE);
    const size_t hd = (head + pg - 1) / pg * pg;
    if (bytes > SIZE_MAX - 2 * HUGE_2M - hd) {
        k3_seterr("out of memory mapping %zu bytes", bytes);
        return NULL;
    }
    const size_t span = (bytes + HUGE_2M - 1) / HUGE_2M * HUGE_2M;
    const size_t raw_len = hd + span + HUGE_2M;
    char *raw = mmap(NULL, raw_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED) {
        k3_seterr("out of memory mapping %zu bytes: %s", bytes, strerror(errno));
        return NULL;
    }
    char *a = (char *)(((uintptr_t)raw + hd + HUGE_2M - 1) & ~(uintptr_t)(HUGE_2M - 1));
    if (a - hd > raw) munmap(raw, (size_t)(a - hd - raw)); /* trim both ends */
    if (raw + raw_len > a + span) munmap(a + span, (size_t)(raw + raw_len - (a + span)));
    if (span) madvise(a, span, MADV_HUGEPAGE); /* advice only: 4 KiB pages if refused */
    *base = a - hd;
    *len = hd + span;
    return a;
}

void *k3_big_calloc(size_t bytes) {
    if (bytes > SIZE_MAX - 2 * HUGE_2M - BIG_HEAD) {
        k3_seterr("out of memory allocating %zu bytes", bytes);
        return NULL;
    }
    big_head h = {NULL, bytes + BIG_HEAD, bytes, BIG_MAGIC};
    char *user;
    if (bytes + BIG_HEAD < K3_BIG_MIN) {
        char *p = calloc(1, h.len);
        if (!p) {
            k3_seterr("out of memory allocating %zu bytes", bytes);
            return NULL;
        }
        user = p + BIG_HEAD;
    } else { /* the head sits in the page before the 2 MiB boundary */
        user = k3_map_huge(bytes, BIG_HEAD, &h.base, &h.len);
        if (!user) return NULL;
    }
    memcpy(user - BIG_HEAD, &h, sizeof h);
    return user;
}

static big_head big_head_of(void *p) {
    big_head h;
    memcpy(&h, (char *)p - BIG_HEAD, sizeof h);
    if (h.magic != BIG_MAGIC) k3_die("k3_big_free/realloc: %p was not made by k3_big_calloc", p);
    return h;
}

void k3_big_free(void *p) {
    if (!p) return;
    big_head h = big_head_of(p);
    if (h.base)
        munmap(h.base, h.len);
    else
        free((char *)p - BIG_HEAD);
}

void *k3_big_realloc(void *p, size_t bytes) {
    if (!p) return k3_big_calloc(bytes);
    big_head h = big_head_of(p);
    void *q = k3_big_calloc(bytes);
    if (!q) return NULL;
    memcpy(q, p, h.bytes < bytes ? h.bytes : bytes);
    k3_big_free(p);
    return q;
}

char *k3_xstrdup(const char *s) {
    size_t n = strlen(s) + 1;
    char *d = k3_xmalloc(n);
    memcpy(d, s, n);
    return d;
}

char *k3_read_file(const char *path, size_t *len_out) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        k3_seterr("%s: cannot open: %s", path, strerror(errno));
        return NULL;
    }
    size_t cap = 1 << 16, len = 0;
    char *buf = k3_xmalloc(cap);
    for (;;) {
        if (len + 1 >= cap) buf = k3_xrealloc(buf, cap *= 2);
        size_t got = fread(buf + len, 1, cap - len - 1, f);
        len += got;
        if (got == 0) break;
    }
    int bad = ferror(f);
    fclose(f);
    if (bad) {
        free(buf);
        k3_seterr("%s: read error", path);
        return NULL;
    }
    buf[len] = 0;
    if (len_out) *len_out = len;
    return buf;
}

char *k3_read_regular_file(const char *path, size_t cap, size_t *len_out) {
    /* O_NONBLOCK: opening a FIFO for reading must not wait for a writer */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        k3_seterr("%s: cannot open: %s", path, strerror(errno));
        return NULL;
    }
    struct stat sb;
    if (fstat(fd, &sb) || !S_ISREG(sb.st_mode)) {
        close(fd);
        k3_seterr("%s: not a regular file", path);
        return NULL;
    }
    if ((uint64_t)sb.st_size > cap) {
        close(fd);
        k3_seterr("%s: %lld bytes, more than the %zu MiB this file may have", path,
                  (long long)sb.st_size, cap >> 20);
        return NULL;
    }
    size_t want = (size_t)sb.st_size, len = 0;
    char *buf = k3_xmalloc(want + 2);
    for (;;) { /* read one byte past the stat size to notice a file that grew */
        ssize_t r = read(fd, buf + len, want + 1 - len);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) {
            k3_seterr("%s: read error: %s", path, strerror(errno));
            close(fd);
            free(buf);
            return NULL;
        }
        if (r == 0) break;
        len += (size_t)r;
        if (len > want) {
            close(fd);
            free(buf);
            k3_seterr("%s: the file grew while it was read", path);
            return NULL;
        }
    }
    close(fd);
    buf[len] = 0;
    if (len_out) *len_out = len;
    return buf;
}

uint64_t k3_proc_field(const char *path, const char *key) {
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    char line[256];
    uint64_t v = 0;
    size_t kl = strlen(key);
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, key, kl) == 0) {
            v = strtoull(line + kl, NULL, 10);
            break;
        }
    }
    fclose(f);
    return v;
}

static uint64_t status_kb(const char *key) {
    return k3_proc_field("/proc/self/status", key) * 1024;
}

uint64_t k3_peak_rss(void) {
    return status_kb("VmHWM:");
}
uint64_t k3_current_rss(void) {
    return status_kb("VmRSS:");
}

double k3_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}
