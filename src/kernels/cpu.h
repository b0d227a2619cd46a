/* cpu.h — the kernel runtime under the name model/ and cli/ include: CPU
 * detection and the kernel mode are declared in runtime.h. */
#ifndef K3_KERNELS_CPU_H
#define K3_KERNELS_CPU_H

#include "kernels/runtime.h"

#endif
