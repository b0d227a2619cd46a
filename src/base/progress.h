/* progress.h — a one-line progress bar on stderr for long loads and writes.
 *
 * A bar that is not `on` does nothing, so callers create one unconditionally
 * and decide once (typically: the caller asked for it and stderr is a
 * terminal). Redraws only when the shown percentage changes. */
#ifndef K3_BASE_PROGRESS_H
#define K3_BASE_PROGRESS_H

#include <stdint.h>

typedef struct k3_progress {
    int on;
    const char *label; /* "loading shards", ... */
    const char *unit;  /* "MB", "layers", ... used for the done/total numbers */
    double scale;      /* done and total are divided by this for display */
    uint64_t total;
    int last_permille;
    double t0;
} k3_progress;

/* Start a bar (on = 0: a silent one). */
void k3_progress_start(k3_progress *p, int on, const char *label, uint64_t total, const char *unit,
                       double scale);
/* Report `done` of `total`; `note` (may be NULL) is shown after the numbers. */
void k3_progress_update(k3_progress *p, uint64_t done, const char *note);
/* Finish the line: full bar plus elapsed time. */
void k3_progress_finish(k3_progress *p);

#endif
