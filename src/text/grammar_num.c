/* grammar_num.c — numbers held to a range (grammar_num.h). The matcher
 * keeps the value written so far (its magnitude, sign and digit counts) and
 * accepts a symbol only if some completion of what it leaves lands in the
 * range (and on a multiple of multipleOf): every reachable set of
 * completions is an interval of integers (scaled for numbers), so the test
 * is a few interval intersections in 128-bit arithmetic — exact for every
 * integer bound up to 2^63, no automaton to build. */
#include "text/grammar_num.h"

#include <limits.h>

#define BIG (INT_MAX / 4)
#define INT_DIGITS 19 /* integers: below 10^19 (bounds are 64-bit) */

typedef __int128 i128;

static i128 p10(int e) {
    i128 r = 1;
    while (e-- > 0) r *= 10;
    return r;
}

/* Is some v in [a, b] with v % step == 0 (step > 0) inside r and a multiple
 * of r->mult? Magnitudes [a, b] are negated first when neg. */
static int hits(const k3_numrange *r, int neg, i128 a, i128 b, i128 step) {
    if (neg) {
        i128 t = -b;
        b = -a, a = t;
    }
    if (a < r->lo) a = r->lo;
    if (b > r->hi) b = r->hi;
    if (a > b) return 0;
    i128 m = r->mult ? (i128)r->mult : 1;
    if (step > 1) { /* both: a multiple of lcm(m, step); step is a power of 10 */
        i128 x = m, y = step;
        while (y) {
            i128 t = x % y;
            x = y, y = t;
        }
        m = m / x * step;
    }
    i128 q = a >= 0 ? (a + m - 1) / m : -((-a) / m); /* ceil(a / m) */
    return q * m <= b;
}

/* Integers: fewest more digits after magnitude m of k digits. */
static long long int_rem(const k3_numrange *r, int neg, i128 m, int k) {
    for (int j = 0; j <= INT_DIGITS - k && (j == 0 || m != 0); j++)
        if (hits(r, neg, m * p10(j), m * p10(j) + p10(j) - 1, 1)) return j;
    return BIG;
}

/* Numbers in the integer part (magnitude m, k digits): j more integer
 * digits, then the end or '.' and f fraction digits. */
static long long num_int_rem(const k3_numrange *r, int neg, i128 m, int k) {
    const i128 S = p10(K3_G_FRAC);
    for (int j = 0; j <= K3_G_NUM_INT - k && (j == 0 || m != 0); j++) {
        i128 lo = m * p10(j) * S, hi = (m * p10(j) + p10(j) - 1) * S;
        if (hits(r, neg, lo, hi, S)) return j;
        for (int f = 1; f <= K3_G_FRAC; f++)
            if (hits(r, neg, lo, hi + S - 1, p10(K3_G_FRAC - f))) return j + 1 + f;
    }
    return BIG;
}

/* Numbers in the fraction (scaled value v, f digits written). */
static long long num_frac_rem(const k3_numrange *r, int neg, i128 v, int f) {
    for (int g = f ? 0 : 1; f + g <= K3_G_FRAC; g++)
        if (hits(r, neg, v, v + p10(K3_G_FRAC - f) - 1, p10(K3_G_FRAC - f - g))) return g;
    return BIG;
}

/* From the start (after_minus: the '-' is written): one more for the first
 * digit, the best of them. */
static long long start_rem(const k3_gnode *n, int neg) {
    long long best = BIG;
    for (int d = 0; d <= 9; d++) {
        long long r =
            n->integer & 1 ? int_rem(&n->range, neg, d, 1) : num_int_rem(&n->range, neg, d, 1);
        if (r + 1 < best) best = r + 1;
    }
    return best;
}

long long k3_gnum_rem(const k3_gframe *f) {
    const k3_gnode *n = f->node;
    switch (f->a) {
    case 0: {
        long long pos = start_rem(n, 0), neg = 1 + start_rem(n, 1);
        return pos < neg ? pos : neg;
    }
    case 1:
        return start_rem(n, 1);
    case 2:
        return n->integer & 1 ? int_rem(&n->range, f->c, f->mask, f->b)
                              : num_int_rem(&n->range, f->c, f->mask, f->b);
    default:
        return num_frac_rem(&n->range, f->c, f->mask, f->d);
    }
}

static int is_digit(int c) {
    return c >= '0' && c <= '9';
}

/* Try the successor frame t: keep it if it can still finish. */
static int take(k3_gframe *f, const k3_gframe *t) {
    if (k3_gnum_rem(t) >= BIG) return K3_GNUM_REJECT;
    *f = *t;
    return K3_GNUM_ACCEPT;
}

int k3_gnum_step(k3_gframe *f, int sym) {
    const k3_gnode *n = f->node;
    int integer = n->integer & 1, maxd = integer ? INT_DIGITS : K3_G_NUM_INT;
    k3_gframe t = *f;
    /* a: 0 start, 1 after '-', 2 integer digits, 3 after '.', 4 fraction
     * digits; b: integer digits, d: fraction digits, c: negative, mask:
     * magnitude (integer part, or the scaled value in the fraction) */
    switch (f->a) {
    case 0:
        if (sym == '-') return t.a = 1, t.c = 1, take(f, &t);
        /* fallthrough */
    case 1:
        if (!is_digit(sym)) return K3_GNUM_REJECT;
        t.a = 2, t.b = 1, t.mask = (uint64_t)(sym - '0');
        return take(f, &t);
    case 2:
        if (is_digit(sym)) {
            if (f->mask == 0 || f->b >= maxd) return K3_GNUM_REJECT;
            t.b++, t.mask = f->mask * 10 + (uint64_t)(sym - '0');
            return take(f, &t);
        }
        if (sym == '.' && !integer) {
            t.a = 3, t.d = 0, t.mask = f->mask * (uint64_t)p10(K3_G_FRAC);
            return take(f, &t);
        }
        break;
    case 3:
    case 4:
        if (is_digit(sym)) {
            if (f->d >= K3_G_FRAC) return K3_GNUM_REJECT;
            t.a = 4, t.d++,
            t.mask = f->mask + (uint64_t)(sym - '0') * (uint64_t)p10(K3_G_FRAC - t.d);
            return take(f, &t);
        }
        if (f->a == 3) return K3_GNUM_REJECT;
        break;
    }
    /* anything else ends the number, if it may end here */
    return k3_gnum_rem(f) == 0 ? K3_GNUM_PASS : K3_GNUM_REJECT;
}
