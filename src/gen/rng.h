/* rng.h — the deterministic random generator of the gen layer.
 *
 * xoshiro256** seeded through splitmix64: fast, 256-bit state, the same
 * stream on every machine for a given seed. Used by the samplers (one draw
 * per sampled token) and by the synthetic checkpoint writer (weights). */
#ifndef K3_GEN_RNG_H
#define K3_GEN_RNG_H

#include <math.h>
#include <stdint.h>

typedef struct k3_rng {
    uint64_t s[4];
    int has_spare; /* Box-Muller produces normals in pairs */
    double spare;
} k3_rng;

static inline uint64_t k3_splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static inline void k3_rng_seed(k3_rng *r, uint64_t seed) {
    for (int i = 0; i < 4; i++) r->s[i] = k3_splitmix64(&seed);
    r->has_spare = 0;
}

static inline uint64_t k3_rng_rotl(uint64_t x, int k) {
    return (x << k) | (x >> (64 - k));
}

static inline uint64_t k3_rng_u64(k3_rng *r) {
    uint64_t *s = r->s, out = k3_rng_rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = k3_rng_rotl(s[3], 45);
    return out;
}

/* Uniform in [0, 1) with 53 random bits. */
static inline double k3_rng_unit(k3_rng *r) {
    return (double)(k3_rng_u64(r) >> 11) * 0x1p-53;
}

/* Uniform integer in [0, n), n >= 1 (multiply-shift; bias < n / 2^64). */
static inline uint64_t k3_rng_below(k3_rng *r, uint64_t n) {
    return (uint64_t)(((unsigned __int128)k3_rng_u64(r) * n) >> 64);
}

/* Standard normal (Box-Muller). */
static inline double k3_rng_normal(k3_rng *r) {
    if (r->has_spare) {
        r->has_spare = 0;
        return r->spare;
    }
    double u = 1.0 - k3_rng_unit(r), v = k3_rng_unit(r); /* u in (0, 1] */
    double m = sqrt(-2.0 * log(u)), a = 6.283185307179586 * v;
    r->spare = m * sin(a);
    r->has_spare = 1;
    return m * cos(a);
}

#endif
