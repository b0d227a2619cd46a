/* runtime.h — the kernels' run-time state: CPU feature detection, which
 * kernel family k3_matvec / k3_matmul use, the int8-activation switch, and
 * the per-thread serial flag. A leaf: every kernel file and the dispatcher
 * (matmul.c) read it, and it calls nothing else in kernels/, so no kernel
 * calls back up into the dispatcher.
 *
 * The fast kernels need AVX2 + FMA + F16C; they are chosen at run time with
 * __builtin_cpu_supports so one binary runs everywhere, falling back to the
 * scalar reference. Tests and benchmarks force a family with
 * k3_kernels_set_mode() or the environment variable K3_KERNELS=ref|avx2
 * (avx2 = no AVX-512 even where the CPU has it). */
#ifndef K3_KERNELS_RUNTIME_H
#define K3_KERNELS_RUNTIME_H

typedef enum {
    K3_KERNELS_AUTO = 0, /* best available (the default) */
    K3_KERNELS_REF,      /* scalar reference (double accumulation) */
    K3_KERNELS_AVX2,     /* AVX2+FMA kernels only; falls back to ref if the CPU lacks them */
    K3_KERNELS_AVX512    /* AVX2 plus the AVX-512 decode kernels where the CPU has them */
} k3_kernels_mode;

/* 1 if this CPU runs the AVX2+FMA+F16C kernels. */
int k3_cpu_has_avx2(void);
/* 1 if the CPU runs the AVX-512 kernels (F + BW + VL, plus AVX2/FMA/F16C). */
int k3_cpu_has_avx512(void);
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

/* The opt-in int8-activation decode path (matvec_i8.h): on (1) or off (0)
 * for later products; -1 re-reads K3_ACT ("int8" turns it on). */
void k3_act_int8_set(int on);
/* 1 if the path is on. */
int k3_act_int8(void);

/* 1 when the kernels must not open an OpenMP region on this thread: inside a
 * k3_*_serial call (matmul.h), already inside a parallel region, or when only
 * one thread would run. */
int k3_kernels_serial(void);
/* Bracket a serial entry: between enter and leave, k3_kernels_serial() is 1
 * on this thread (nestable). */
void k3_kernels_serial_enter(void);
void k3_kernels_serial_leave(void);

#endif
