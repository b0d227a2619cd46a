/* progress.c — terminal progress bar (see progress.h). */
#include "base/progress.h"
#include "base/mem.h"

#include <stdio.h>

#define BAR_WIDTH 30

void k3_progress_start(k3_progress *p, int on, const char *label, uint64_t total, const char *unit,
                       double scale) {
    p->on = on;
    p->label = label;
    p->unit = unit;
    p->scale = scale > 0 ? scale : 1;
    p->total = total ? total : 1;
    p->last_permille = -1;
    p->t0 = k3_now();
    k3_progress_update(p, 0, NULL);
}

static void draw(const k3_progress *p, uint64_t done, const char *note, int permille) {
    char bar[BAR_WIDTH + 1];
    int fill = permille * BAR_WIDTH / 1000;
    for (int i = 0; i < BAR_WIDTH; i++) bar[i] = i < fill ? '#' : '-';
    bar[BAR_WIDTH] = 0;
    int digits = p->scale == 1 ? 0 : 1; /* counts are whole numbers */
    fprintf(stderr, "\r[k3] %s [%s] %5.1f%%  %.*f/%.*f %s  %.2f s%s%s\x1b[K", p->label, bar,
            permille / 10.0, digits, (double)done / p->scale, digits, (double)p->total / p->scale,
            p->unit, k3_now() - p->t0, note ? "  " : "", note ? note : "");
    fflush(stderr);
}

void k3_progress_update(k3_progress *p, uint64_t done, const char *note) {
    if (!p->on) return;
    if (done > p->total) done = p->total;
    int permille = (int)(done * 1000 / p->total);
    if (permille == p->last_permille) return;
    p->last_permille = permille;
    draw(p, done, note, permille);
}

void k3_progress_finish(k3_progress *p) {
    if (!p->on) return;
    draw(p, p->total, NULL, 1000);
    fputc('\n', stderr);
}
