/* helpers.c — the file helpers of helpers.h, shared by the test programs. */
#define K3_TESTS_HELPERS_FILES_ONLY
#include "helpers.h"

#include <stdlib.h>

#include <math.h>
#include <stdio.h>

float *t_read_floats(const char *path, int64_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    float *p = malloc((size_t)(len > 0 ? len : 0) + 4);
    *n = (int64_t)fread(p, 1, (size_t)(len > 0 ? len : 0), f) / 4;
    fclose(f);
    return p;
}

int t_write_file(const char *path, const void *data, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    size_t w = fwrite(data, 1, n, f);
    return fclose(f) == 0 && w == n ? 0 : -1;
}

double t_max_diff(const float *a, const float *b, int64_t n) {
    double d = 0;
    for (int64_t i = 0; i < n; i++) {
        double e = fabs((double)a[i] - b[i]);
        if (!(e <= d)) d = e; /* NaN propagates */
    }
    return d;
}
