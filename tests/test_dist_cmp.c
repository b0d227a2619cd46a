/* test_dist_cmp.c — compares two float32 logits files element by element.
 *
 *   test_dist_cmp A.f32 B.f32 RTOL ATOL [LABEL]
 * prints "max|diff| X (at i), max rel Y, N values" and exits 0 when every
 * element satisfies |a-b| <= ATOL + RTOL*|b| (numpy.allclose semantics, b =
 * the reference), 1 otherwise (also for size mismatches, NaN/Inf or a missing
 * file). The dist_*.sh tests use it to compare full logits of TP/PP runs with
 * the single-rank run and the oracle. Run without arguments (as the suite
 * does), it checks itself on small files, including the cases that must fail. */
#include "t.h"

#include <stdint.h>
#include <unistd.h>

typedef struct {
    double max_abs, max_rel;
    int64_t at, n, bad;
} cmp_result;

/* Read a whole float32 file; NULL if unreadable. */
static float *read_f32(const char *path, int64_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    float *v = malloc(len > 0 ? (size_t)len : 1);
    *n = len > 0 ? len / 4 : 0;
    if (len % 4 || fread(v, 4, (size_t)*n, f) != (size_t)*n) {
        free(v);
        v = NULL;
    }
    fclose(f);
    return v;
}

/* -1: a file is unreadable or the sizes differ; else the number of failing elements. */
static int64_t cmp_files(const char *a, const char *b, double rtol, double atol, cmp_result *r) {
    memset(r, 0, sizeof *r);
    int64_t na = 0, nb = 0;
    float *x = read_f32(a, &na), *y = read_f32(b, &nb);
    int64_t rc = -1;
    if (x && y && na == nb && na > 0) {
        r->n = na;
        for (int64_t i = 0; i < na; i++) {
            double d = fabs((double)x[i] - y[i]), rel = d / (fabs((double)y[i]) + 1e-30);
            if (!isfinite(x[i]) || !isfinite(y[i])) d = rel = INFINITY;
            if (d > r->max_abs || !isfinite(d)) r->max_abs = d, r->at = i;
            if (rel > r->max_rel) r->max_rel = rel;
            r->bad += !(d <= atol + rtol * fabs((double)y[i]));
        }
        rc = r->bad;
    } else {
        r->n = na != nb ? -(na + 1) : 0;
    }
    free(x);
    free(y);
    return rc;
}

static void write_f32(const char *path, const float *v, int n) {
    FILE *f = fopen(path, "wb");
    fwrite(v, 4, (size_t)n, f);
    fclose(f);
}

TEST(cmp_self_check) {
    char a[64], b[64], c[64];
    snprintf(a, sizeof a, "/tmp/k3_cmp_a_%d.f32", (int)getpid());
    snprintf(b, sizeof b, "/tmp/k3_cmp_b_%d.f32", (int)getpid());
    snprintf(c, sizeof c, "/tmp/k3_cmp_c_%d.f32", (int)getpid());
    float x[4] = {1, -2, 1000, 0}, y[4] = {1, -2, 1000.001f, 0}, z[3] = {1, -2, 1000};
    write_f32(a, x, 4);
    write_f32(b, y, 4);
    write_f32(c, z, 3);
    cmp_result r;
    CHECK(cmp_files(a, b, 1e-5, 1e-6, &r) == 0, "1e-6 relative difference must pass rtol 1e-5");
    CHECK(r.at == 2 && r.max_abs > 9e-4 && r.max_abs < 2e-3);
    CHECK(cmp_files(a, b, 1e-7, 1e-6, &r) == 1, "and fail rtol 1e-7");
    CHECK(cmp_files(a, c, 1, 1, &r) == -1, "different sizes must fail");
    CHECK(cmp_files(a, "/nonexistent.f32", 1, 1, &r) == -1, "a missing file must fail");
    x[3] = NAN;
    write_f32(a, x, 4);
    CHECK(cmp_files(a, b, 1, 1, &r) == 1, "NaN must fail");
    remove(a);
    remove(b);
    remove(c);
}

int main(int argc, char **argv) {
    if (argc == 1) {
        RUN(cmp_self_check);
        return t_done();
    }
    if (argc < 5) {
        fprintf(stderr, "usage: test_dist_cmp A.f32 REF.f32 RTOL ATOL [LABEL]\n");
        return 2;
    }
    cmp_result r;
    int64_t bad = cmp_files(argv[1], argv[2], atof(argv[3]), atof(argv[4]), &r);
    const char *label = argc > 5 ? argv[5] : "cmp";
    if (bad < 0) {
        printf("%s: cannot compare %s with %s (unreadable, empty or different sizes)\n", label,
               argv[1], argv[2]);
        return 1;
    }
    printf(
        "%s: max|diff| %.3g (at %lld), max rel %.3g, %lld values, %lld outside rtol %s atol %s\n",
        label, r.max_abs, (long long)r.at, r.max_rel, (long long)r.n, (long long)bad, argv[3],
        argv[4]);
    return bad ? 1 : 0;
}
