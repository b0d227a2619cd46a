/* gram_walk.h — test helper for the output grammars (text/grammar.h): a
 * random walk through a grammar that closes within a symbol budget.
 *
 * At each step the walk takes a uniformly random accepted symbol (of the 255
 * non-NUL bytes and EOM) whose remainder (k3_gstate_rem) still fits the
 * budget; if none fits it takes the one that leaves the least. Property
 * tests check what the walks produce (valid JSON, the schema's keywords). */
#ifndef K3_TESTS_GRAM_WALK_H
#define K3_TESTS_GRAM_WALK_H

#include <stdint.h>
#include <stdlib.h>

#include "text/grammar.h"

/* xorshift64 over *state (each test keeps its own seed) */
static inline uint64_t gw_next(uint64_t *state) {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    return *state;
}

/* The text of one walk from root (without the EOM; malloc'd), or NULL if the
 * walk got stuck or did not finish within budget symbols. */
static inline char *gram_walk(const k3_gnode *root, int budget, uint64_t *rng) {
    k3_gstate st, tmp;
    k3_gstate_init(&st, root);
    char *out = calloc((size_t)budget + 1, 1);
    int n = 0;
    for (int left = budget; left > 0 && !k3_gstate_done(&st); left--) {
        int ok[257], k = 0, best = -1, best_rem = 1 << 30;
        for (int s = 1; s < 257; s++) {
            int sym = s < 256 ? s : K3_SYM_EOM;
            k3_gstate_copy(&tmp, &st);
            if (!k3_gstate_step(&tmp, sym)) continue;
            int r = k3_gstate_rem(&tmp);
            if (r <= left - 1) ok[k++] = sym;
            if (r < best_rem) best_rem = r, best = sym;
        }
        int sym = k ? ok[gw_next(rng) % (uint64_t)k] : best;
        if (sym < 0 || !k3_gstate_step(&st, sym)) {
            free(out);
            return NULL;
        }
        if (sym < 256) out[n++] = (char)sym;
    }
    if (!k3_gstate_done(&st)) {
        free(out);
        return NULL;
    }
    return out;
}

#endif
