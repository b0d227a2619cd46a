/* t.h — the tiny unit-test harness every tests/test_*.c uses.
 *
 *   TEST(name) { CHECK(x == 1, "x was %d", x); CHECK_NEAR(a, b, 1e-6); }
 *   int main(void) { RUN(name); return t_done(); }
 *
 * Each test prints one line "PASS name" or "FAIL name"; tests/run_all.sh
 * counts those lines over every test program and shell test. */
#ifndef K3_TESTS_T_H
#define K3_TESTS_T_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <stdarg.h>

static int t_npass, t_nfail, t_cur_fail;

/* printf without the format attribute, so CHECK(cond) with no message is warning-free. */
static void t_note(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
}

#define TEST(fn) static void fn(void)

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            t_cur_fail++;                                                                          \
            if (t_cur_fail <= 10) {                                                                \
                printf("  %s:%d: CHECK(%s) failed: ", __FILE__, __LINE__, #cond);                  \
                t_note("" __VA_ARGS__);                                                            \
                printf("\n");                                                                      \
            }                                                                                      \
        }                                                                                          \
    } while (0)

#define CHECK_NEAR(a, b, tol)                                                                      \
    do {                                                                                           \
        double t_a_ = (a), t_b_ = (b);                                                             \
        CHECK(fabs(t_a_ - t_b_) <= (tol), "%s = %.9g, %s = %.9g, tol %g", #a, t_a_, #b, t_b_,      \
              (double)(tol));                                                                      \
    } while (0)

static void t_run(const char *name, void (*fn)(void)) {
    t_cur_fail = 0;
    fflush(stdout);
    fn();
    if (t_cur_fail) {
        printf("FAIL %s (%d checks failed)\n", name, t_cur_fail);
        t_nfail++;
    } else {
        printf("PASS %s\n", name);
        t_npass++;
    }
    fflush(stdout);
}
#define RUN(fn) t_run(#fn, fn)

static int t_done(void) {
    printf("%d passed, %d failed\n", t_npass, t_nfail);
    return t_nfail ? 1 : 0;
}

/* Directory of the shared fixtures (env K3_FIXTURES, default ../shared/fixtures). */
static inline const char *t_fixtures(void) {
    const char *e = getenv("K3_FIXTURES");
    return e && *e ? e : "../shared/fixtures";
}

/* Deterministic random numbers for tests (xorshift64*), uniform in [-1, 1). */
static unsigned long long t_rng_state = 0x9E3779B97F4A7C15ull;
static inline void t_seed(unsigned long long s) {
    t_rng_state = s ? s : 1;
}
static inline double t_rand(void) {
    t_rng_state ^= t_rng_state >> 12;
    t_rng_state ^= t_rng_state << 25;
    t_rng_state ^= t_rng_state >> 27;
    unsigned long long v = t_rng_state * 2685821657736338717ull;
    return (double)(v >> 11) / (double)(1ull << 52) - 1.0;
}

#endif
