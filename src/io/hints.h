/* hints.h — what a path that failed to load as a K3 checkpoint probably is.
 *
 * New users point k3 at what other tools take: a GGUF file, a Hugging Face repo
 * id (k3 does not download), a Kimi-K2 / DeepSeek checkpoint, or a clone whose
 * weights are still git-lfs pointers. k3_model_hint() recognises these from the
 * files alone, so the loader can add one sentence saying what to do. */
#ifndef K3_IO_HINTS_H
#define K3_IO_HINTS_H

#include <stddef.h>

/* A hint for a model path that failed to load, written to buf (NUL-terminated);
 * 1 if there is one, 0 if the path looks like none of the above. */
int k3_model_hint(const char *path, char *buf, size_t cap);

#endif
