/* bench_json.c — building and printing k3 bench's JSON lines (see
 * bench_json.h). */
#include "cli/bench_json.h"

#include "base/mem.h"
#include "base/utf8safe.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

json_t *k3_bench_json_text(const char *bytes) {
    size_t n = strlen(bytes), cap = 4 * n + 1; /* each byte at most \xHH */
    char *s = k3_xmalloc(cap);
    k3_utf8_escape(s, cap, bytes, n, 0);
    json_t *j = json_string(s);
    free(s);
    return j ? j : json_null();
}

json_t *k3_bench_json_num(double v, int decimals) {
    if (!isfinite(v)) return json_null();
    double p = pow(10, decimals), r = round(v * p) / p;
    if (!decimals && fabs(r) < 9e15) return json_integer((json_int_t)r);
    return json_real(r);
}

json_t *k3_bench_json_real(double v) {
    char s[32]; /* 6 significant digits, as the text output had them */
    snprintf(s, sizeof s, "%.6g", v);
    return isfinite(v) ? json_real(strtod(s, NULL)) : json_null();
}

void k3_bench_json_print(json_t *o) {
    /* 15 significant digits: a value rounded to its decimals prints as such */
    char *s = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(15));
    if (s) printf("%s\n", s);
    fflush(stdout);
    free(s);
    json_decref(o);
}
