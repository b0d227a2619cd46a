/* owned_mat.h — the random weight matrices of helpers.h, under the name some
 * tests still include. */
#ifndef K3_TESTS_OWNED_MAT_H
#define K3_TESTS_OWNED_MAT_H

#include "helpers.h"

#endif
