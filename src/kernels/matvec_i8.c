/* matvec_i8.c — the opt-in int8-activation decode path (see matvec_i8.h).
 * Placeholder: no kernel yet, so k3_i8_supports() is always 0. */
#include "kernels/matvec_i8.h"

#include <stdlib.h>
#include <string.h>

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

int k3_i8_supports(const k3_wmat *W) {
    (void)W;
    return 0;
}

void k3_matvec_i8(const k3_wmat *W, const float *x, float *y) {
    (void)W;
    (void)x;
    (void)y;
}
