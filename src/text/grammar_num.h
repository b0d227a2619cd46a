/* grammar_num.h — numbers held to a range (k3_g_number_range, grammar.h):
 * the matcher's step and remainder for such a NUMBER frame. Internal to
 * text/grammar*.c. */
#ifndef K3_TEXT_GRAMMAR_NUM_H
#define K3_TEXT_GRAMMAR_NUM_H

#include "text/grammar.h"

enum { K3_GNUM_REJECT, K3_GNUM_ACCEPT, K3_GNUM_PASS };

/* Consume sym in a ranged NUMBER frame: accept it only if some completion
 * stays in the range; PASS (not consumed) when the number may end here. */
int k3_gnum_step(k3_gframe *f, int sym);
/* Fewest symbols that finish the number from f (INT_MAX/4 when none). */
long long k3_gnum_rem(const k3_gframe *f);

#endif
