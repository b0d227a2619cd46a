/* kernels.h — the kernels' one interface to the floors above: everything
 * model/ (and the command's bench and switches) may call in src/kernels/.
 * The other headers of the folder (avx2.h, avx512.h, matvec_i8.h, table.h,
 * ...) are private to it: the ISA kernels and the dispatch table behind these
 * entry points. tests/sh/kernels_seam.sh holds the rule.
 *
 *   runtime.h   CPU features, the kernel family (K3_KERNELS), the int8
 *               activation switch (K3_ACT), the serial flag
 *   matmul.h    weight x activation products: k3_matvec, k3_matmul, their
 *               serial, few-token and column-block forms
 *   mvset.h     several independent products in one parallel region
 *   tmatmul.h   the transposed product Y = X W (absorbed MLA)
 *   mla_tile.h  MLA attention over the latent cache
 *   kda_ops.h   KDA's short conv and delta-rule state step
 *   vmath.h     exp, tanh, sigmoid, SiLU, SiTU, double-accumulated sums
 *   scratch.h   per-thread grow-only buffers
 *   steal.h     work shares for hand-split parallel loops
 *   kbench.h, membw.h   `k3 bench --kernels` and the memory-bandwidth probe */
#ifndef K3_KERNELS_KERNELS_H
#define K3_KERNELS_KERNELS_H

#include "kernels/kbench.h"
#include "kernels/kda_ops.h"
#include "kernels/matmul.h"
#include "kernels/membw.h"
#include "kernels/mla_tile.h"
#include "kernels/mvset.h"
#include "kernels/runtime.h"
#include "kernels/scratch.h"
#include "kernels/steal.h"
#include "kernels/tmatmul.h"
#include "kernels/vmath.h"

#endif
