/* spec_cost.c — verify-cost tables given on the command line (spec_cost.h). */
#include "gen/spec_cost.h"

#include "base/err.h"
#include "base/utf8safe.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* One cost, s[0..n): a plain decimal number (strtod alone would also take
 * leading spaces, "inf", "nan" and hex) in the allowed range. */
static int cost_one(const char *s, size_t n, double *v) {
    char num[64], *end;
    if (!n || n >= sizeof num) return -1;
    for (size_t i = 0; i < n; i++)
        if (!strchr("0123456789.eE+-", s[i])) return -1;
    memcpy(num, s, n);
    num[n] = 0;
    *v = strtod(num, &end);
    return *end || !(*v >= K3_SPEC_COST_MIN && *v <= K3_SPEC_COST_MAX) ? -1 : 0;
}

int k3_spec_cost_list(const char *flag, const char *list, double *cost, int *n) {
    char safe[160];
    cost[0] = 1;
    *n = 0;
    for (const char *s = list;; s++) {
        size_t len = strcspn(s, ",");
        if (*n == K3_DRAFT_MAX) return k3_seterr("%s: more than %d costs", flag, K3_DRAFT_MAX);
        if (cost_one(s, len, &cost[*n + 1])) {
            k3_utf8_escape(safe, sizeof safe, s, len, K3_UTF8_CTRL);
            return k3_seterr("%s: cost %d: expected a number (costs > 0, %g..%g), got '%s'", flag,
                             *n + 1, K3_SPEC_COST_MIN, K3_SPEC_COST_MAX, safe);
        }
        (*n)++;
        s += len;
        if (!*s) return 0;
    }
}

int k3_spec_cost_parse(const char *list, double *cost) {
    int n;
    if (k3_spec_cost_list("--spec-cost", list, cost, &n)) return -1;
    for (int k = n + 1; k <= K3_DRAFT_MAX; k++) cost[k] = INFINITY;
    return 0;
}
