/* matvec_i8.h — the opt-in int8-activation decode path (lossy, off by default).
 *
 * With K3_ACT=int8 (or k3_act_int8_set(1)) decode products on quantized
 * weights quantize the activation vector to int8 per block and use integer
 * dot products (VNNI). It changes results slightly, so it is never the
 * default; k3_matvec asks k3_i8_supports() first and falls back otherwise. */
#ifndef K3_KERNELS_MATVEC_I8_H
#define K3_KERNELS_MATVEC_I8_H

#include "quant/wmat.h"

/* Turn the int8-activation path on (1) or off (0) for later products; -1 re-reads K3_ACT. */
void k3_act_int8_set(int on);
/* 1 if the path is on. */
int k3_act_int8(void);
/* 1 if the path is on and has a kernel for W on this CPU. */
int k3_i8_supports(const k3_wmat *W);
/* y = W x through the int8 path (threads over rows like k3_matvec). Needs k3_i8_supports(W). */
void k3_matvec_i8(const k3_wmat *W, const float *x, float *y);

#endif
