/* cpu.h — which kernel family k3_matvec / k3_matmul use, and CPU feature detection.
 *
 * The fast kernels need AVX2 + FMA + F16C; they are chosen at run time with
 * __builtin_cpu_supports so one binary runs everywhere, falling back to the
 * scalar reference. Tests and benchmarks force a family with
 * k3_kernels_set_mode() or the environment variable K3_KERNELS=ref|avx2
 * (avx2 = no AVX-512 even where the CPU has it). */
#ifndef K3_KERNELS_CPU_H
#define K3_KERNELS_CPU_H

typedef enum {
    K3_KERNELS_AUTO = 0, /* best available (the default) */
    K3_KERNELS_REF,      /* scalar reference (double accumulation) */
    K3_KERNELS_AVX2,     /* AVX2+FMA kernels only; falls back to ref if the CPU lacks them */
    K3_KERNELS_AVX512    /* AVX2 plus the AVX-512 decode kernels where the CPU has them */
} k3_kernels_mode;

/* 1 if this CPU runs the AVX2+FMA+F16C kernels. */
int k3_cpu_has_avx2(void);
/* F16C (half-float conversions), read from CPUID: clang's __builtin_cpu_supports does not know it.
 */
int k3_cpu_has_f16c(void);
/* AVX-512 VNNI (vpdpbusd) on top of the AVX-512 kernels' F+BW+VL: the int8-activation
 * decode path (matvec_i8.h) needs it. */
int k3_cpu_has_avx512_vnni(void);
/* AVX-512 VBMI (vpermb, vpmultishiftqb): the int8 path's 3/5/6-bit decoder. */
int k3_cpu_has_avx512_vbmi(void);
/* Force a kernel family for every later call (process-wide, not thread-safe to
 * change while products run). AUTO re-reads K3_KERNELS. */
void k3_kernels_set_mode(k3_kernels_mode m);
/* The family actually used now: K3_KERNELS_REF, _AVX2 or _AVX512. */
k3_kernels_mode k3_kernels_active(void);
/* "ref", "avx2" or "avx512", for messages and bench output. */
const char *k3_kernels_name(void);

#endif
