/* cpu.c — run-time choice between the scalar reference and the AVX2 kernels (see cpu.h). */
#include "kernels/cpu.h"
#include "kernels/avx512.h"

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
