/* runtime.c — the kernels' run-time state (see runtime.h): CPU features read
 * once, the kernel family chosen from them and K3_KERNELS, the K3_ACT
 * int8-activation switch, and the per-thread serial flag. */
#include "kernels/runtime.h"

#include <omp.h>
#include <stdlib.h>
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif
#include <string.h>

static k3_kernels_mode forced = K3_KERNELS_AUTO;
static int resolved = -1; /* cached k3_kernels_active() result, -1 = not yet */

/* Every answer is cached after the first call: CPUID traps to the hypervisor
 * on virtual machines (measured 16% of int8 decode time when it was asked
 * per product). Races are benign: every thread computes the same value. */
int k3_cpu_has_f16c(void) {
#if defined(__x86_64__) || defined(__i386__)
    static int has = -1;
    if (has < 0) {
        unsigned a, b, c, d;
        has = __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C) != 0;
    }
    return has;
#else
    return 0;
#endif
}

int k3_cpu_has_avx2(void) {
#if defined(__x86_64__) || defined(__i386__)
    static int has = -1;
    if (has < 0) {
        __builtin_cpu_init();
        has = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && k3_cpu_has_f16c();
    }
    return has;
#else
    return 0;
#endif
}

int k3_cpu_has_avx512(void) {
#if defined(__x86_64__)
    static int has = -1;
    if (has < 0) {
        __builtin_cpu_init();
        has = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
              __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx2") &&
              __builtin_cpu_supports("fma") && k3_cpu_has_f16c();
    }
    return has;
#else
    return 0;
#endif
}

int k3_cpu_has_avx512_vnni(void) {
#if defined(__x86_64__)
    static int has = -1;
    if (has < 0) {
        __builtin_cpu_init();
        has = k3_cpu_has_avx512() && __builtin_cpu_supports("avx512vnni");
    }
    return has;
#else
    return 0;
#endif
}

int k3_cpu_has_avx512_vbmi(void) {
#if defined(__x86_64__)
    static int has = -1;
    if (has < 0) {
        __builtin_cpu_init();
        has = k3_cpu_has_avx512() && __builtin_cpu_supports("avx512vbmi");
    }
    return has;
#else
    return 0;
#endif
}

void k3_kernels_set_mode(k3_kernels_mode m) {
    forced = m;
    resolved = -1;
}

static k3_kernels_mode resolve(void) {
    k3_kernels_mode want = forced;
    if (want == K3_KERNELS_AUTO) {
        const char *e = getenv("K3_KERNELS");
        if (e && !strcmp(e, "ref"))
            want = K3_KERNELS_REF;
        else if (e && !strcmp(e, "avx2"))
            want = K3_KERNELS_AVX2;
        else
            want = K3_KERNELS_AVX512;
    }
    if (want == K3_KERNELS_REF || !k3_cpu_has_avx2()) return K3_KERNELS_REF;
    if (want == K3_KERNELS_AVX512 && k3_cpu_has_avx512()) return K3_KERNELS_AVX512;
    return K3_KERNELS_AVX2;
}

k3_kernels_mode k3_kernels_active(void) {
    int r = resolved;
    if (r < 0) {
        r = (int)resolve();
        resolved = r; /* benign race: every thread computes the same value */
    }
    return (k3_kernels_mode)r;
}

const char *k3_kernels_name(void) {
    k3_kernels_mode m = k3_kernels_active();
    return m == K3_KERNELS_AVX512 ? "avx512" : m == K3_KERNELS_AVX2 ? "avx2" : "ref";
}

static int act_int8 = -1; /* -1: not read from K3_ACT yet */

void k3_act_int8_set(int on) {
    act_int8 = on;
}

int k3_act_int8(void) {
    if (act_int8 < 0) {
        const char *e = getenv("K3_ACT");
        act_int8 = e && !strcmp(e, "int8");
    }
    return act_int8;
}

static _Thread_local int serial_depth;

/* Serial as well when only one thread would run: a region of one thread opened
 * inside another (an inactive one: the experts' region at 1 thread) still
 * costs libgomp a team start and futex wakes, ~1400 system calls per decoded
 * token on the bench preset at 1 thread. The kernels compute every row the
 * same way whatever the split, so the bits do not change. */
int k3_kernels_serial(void) {
    return serial_depth > 0 || omp_in_parallel() || omp_get_max_threads() < 2;
}

void k3_kernels_serial_enter(void) {
    serial_depth++;
}

void k3_kernels_serial_leave(void) {
    serial_depth--;
}
