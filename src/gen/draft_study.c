/* draft_study.c — the drafter on a forced answer, and the n-gram bound (see
 * draft_study.h). */
#include "gen/draft_study.h"

#include "base/err.h"
#include "base/mem.h"
#include "base/utf8safe.h"
#include "gen/draft.h"
#include "gen/spec_cost.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void k3_draft_study_run(const int32_t *prompt, size_t np, const int32_t *answer, size_t na,
                        int kmax, const double *cost, k3_replay_pass *r) {
    memset(r, 0, sizeof *r);
    k3_drafter *d = kmax > 0 ? k3_drafter_new(kmax) : NULL;
    if (d) k3_drafter_set_cost(d, cost);
    for (size_t i = 0; d && i < np; i++) k3_drafter_push(d, prompt[i]);
    if (d && na) k3_drafter_push(d, answer[0]);
    int32_t row[K3_DRAFT_MAX];
    for (size_t pos = 1; pos < na;) { /* answer[pos] is the token this step emits first */
        r->steps++;
        int k = d ? k3_drafter_propose(d, row) : 0, kept = 0;
        if (k) {
            r->verify_steps++, r->by_k[k]++, r->drafted += k;
            while (kept < k && pos < na && row[kept] == answer[pos])
                k3_drafter_push(d, row[kept++]), pos++;
            r->accepted += kept;
        }
        if (pos < na) { /* the target's own token (none after a kept draft ends the answer) */
            if (d) k3_drafter_push(d, answer[pos]);
            pos++;
        }
    }
    r->tokens = na > 1 ? (int64_t)na - 1 : 0;
    k3_drafter_free(d);
}

/* A set of 64-bit n-gram hashes (0 = empty), open addressing. */
typedef struct {
    uint64_t *k;
    size_t cap, used;
} hset;

static uint64_t mix(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static uint64_t *hset_slot(hset *s, uint64_t key) {
    size_t i = (size_t)key & (s->cap - 1);
    while (s->k[i] && s->k[i] != key) i = (i + 1) & (s->cap - 1);
    return &s->k[i];
}

static void hset_add(hset *s, uint64_t key) {
    if (2 * (s->used + 1) > s->cap) {
        hset old = *s;
        s->cap = old.cap ? 2 * old.cap : 1024;
        s->k = k3_xcalloc(s->cap, sizeof *s->k);
        for (size_t i = 0; i < old.cap; i++)
            if (old.k[i]) *hset_slot(s, old.k[i]) = old.k[i];
        free(old.k);
    }
    uint64_t *slot = hset_slot(s, key);
    s->used += !*slot;
    *slot = key;
}

static int hset_has(hset *s, uint64_t key) {
    return s->cap && *hset_slot(s, key) == key;
}

void k3_draft_study_depth(const int32_t *prompt, size_t np, const int32_t *answer, size_t na,
                          uint8_t *depth) {
    hset seen = {0};
    size_t n = np + na;
    for (size_t g = 0; g < n; g++) {
#define AT(i) ((uint64_t)(uint32_t)((i) < np ? prompt[i] : answer[(i)-np]))
        uint64_t h[K3_STUDY_DEPTH_MAX + 1], x = mix(AT(g) + 0x9E3779B97F4A7C15ull);
        int mmax = g < K3_STUDY_DEPTH_MAX ? (int)g : K3_STUDY_DEPTH_MAX;
        for (int m = 1; m <= mmax; m++) /* the m tokens before g, then g's */
            h[m] = (x = mix(x ^ AT(g - (size_t)m) ^ ((uint64_t)m << 40))) | 1;
#undef AT
        if (g >= np) { /* a longer context seen implies every shorter one: stop at a miss */
            int m = 0;
            while (m < mmax && hset_has(&seen, h[m + 1])) m++;
            depth[g - np] = (uint8_t)m;
        }
        for (int m = 1; m <= mmax; m++) hset_add(&seen, h[m]);
    }
    free(seen.k);
}

double k3_draft_study_cost(const k3_replay_pass *r, const double *cost) {
    double c = (double)(r->steps - r->verify_steps);
    for (int k = 1; k <= K3_DRAFT_MAX; k++) c += (double)r->by_k[k] * cost[k];
    return c;
}

double k3_draft_study_oracle(const uint8_t *depth, size_t na, int m, int kmax, const double *cost,
                             k3_replay_pass *best) {
    memset(best, 0, sizeof *best);
    if (na < 2) return 0;
    kmax = kmax > K3_DRAFT_MAX ? K3_DRAFT_MAX : kmax;
    double *dp = k3_xcalloc(na + 1, sizeof *dp); /* least cost from position p to the end */
    int *run = k3_xcalloc(na + 1, sizeof *run), *pick = k3_xcalloc(na + 1, sizeof *pick);
    for (size_t p = na - 1; p >= 1; p--) {
        run[p] = depth[p] >= m && m > 0 ? 1 + run[p + 1] : 0;
        dp[p] = 1 + dp[p + 1];
        for (int k = 1; k <= kmax && k <= run[p]; k++) {
            size_t next = p + (size_t)k + 1 < na ? p + (size_t)k + 1 : na;
            if (cost[k] + dp[next] < dp[p]) dp[p] = cost[k] + dp[next], pick[p] = k;
        }
    }
    for (size_t p = 1; p < na;) {
        int k = pick[p];
        best->steps++;
        if (k) best->verify_steps++, best->by_k[k]++, best->drafted += k, best->accepted += k;
        p += (size_t)k + 1;
    }
    best->tokens = (int64_t)na - 1;
    double c = dp[1];
    free(dp), free(run), free(pick);
    return c;
}

/* The cost table's name: printable ASCII, no spaces (it heads a text column). */
static int good_name(const char *s, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (s[i] <= ' ' || s[i] > '~') return 0;
    return n > 0;
}

int k3_study_cost_parse(const char *arg, k3_study_cost *out) {
    memset(out, 0, sizeof *out);
    char safe[160];
    k3_utf8_escape(safe, sizeof safe, arg, strlen(arg), K3_UTF8_CTRL);
    const char *eq = strchr(arg, '=');
    size_t nl = eq ? (size_t)(eq - arg) : 0;
    if (!eq || nl >= sizeof out->name || !good_name(arg, nl))
        return k3_seterr("--cost expects NAME=c1,c2,... (NAME 1..%zu printable characters, no "
                         "spaces), got '%s'",
                         sizeof out->name - 1, safe);
    memcpy(out->name, arg, nl);
    char flag[40];
    snprintf(flag, sizeof flag, "--cost %s", out->name);
    return k3_spec_cost_list(flag, eq + 1, out->c, &out->n);
}
