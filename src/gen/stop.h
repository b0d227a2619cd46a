/* stop.h — stop strings over streamed text (they may span token boundaries).
 *
 * Text arrives in pieces (one detokenized token at a time). The matcher
 * emits everything that can no longer be the start of a stop string and
 * holds back the longest tail that is a proper prefix of one, so a stop
 * string split over several tokens is still found and never printed:
 *
 *     k3_stopper *st = k3_stopper_new(stops, n);
 *     size_t len; int hit;
 *     const char *out = k3_stopper_push(st, piece, piece_len, &len, &hit);
 *     ... print out[0..len) ...; if (hit) stop;
 *     out = k3_stopper_flush(st, &len);      // end of generation: the held tail
 */
#ifndef K3_GEN_STOP_H
#define K3_GEN_STOP_H

#include <stddef.h>

typedef struct k3_stopper k3_stopper;

/* stops: n NUL-terminated strings (copied; empty strings are ignored). */
k3_stopper *k3_stopper_new(const char *const *stops, int n);
void k3_stopper_free(k3_stopper *s);
/* Forget held text and a previous hit (next turn). */
void k3_stopper_reset(k3_stopper *s);

/* Append text; returns the text now safe to emit (valid until the next call).
 * *hit = 1 when a stop string completed: the returned text is what preceded
 * it, and the stop string and anything after it are dropped. */
const char *k3_stopper_push(k3_stopper *s, const char *text, size_t len, size_t *out_len, int *hit);
/* The held-back tail (generation ended for another reason). */
const char *k3_stopper_flush(k3_stopper *s, size_t *out_len);

#endif
