/* builtin.h — the built-in default model: the tiny preset with random weights.
 *
 * `k3 generate` / `k3 chat` without --model run on it, so a fresh machine
 * shows the whole pipeline (tokenizer, chat template, forward pass,
 * sampling, streaming) without a download. It is written once (~1 MB) into
 * a cache folder and reused:
 *   $K3_BUILTIN_DIR if set, else $XDG_CACHE_HOME/k3/builtin-tiny-v1, else
 *   $HOME/.cache/k3/builtin-tiny-v1, else /tmp/k3-builtin-tiny-v1-<uid>.
 * The weights are random (seed 0): the output is gibberish by design. */
#ifndef K3_GEN_BUILTIN_H
#define K3_GEN_BUILTIN_H

#include <stddef.h>

/* Path of the built-in model directory, written first if missing (*created
 * = 1 then). Returns a malloc'd path, or NULL + k3_errmsg. */
char *k3_builtin_model(int *created);

#endif
