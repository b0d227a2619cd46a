/* fuzz_study_cost.c — libFuzzer target for the --cost NAME=c1,c2,... parser
 * of k3 bench --draft-only (src/gen/draft_study.h). Input: the argument's
 * bytes (cut at the first NUL, as argv would be). A parse either gives a
 * table that keeps every documented bound (name 1..23 printable characters
 * before the '=', 1..K3_DRAFT_MAX costs in range, c[0] = 1) or fails with a
 * one-line message that is valid UTF-8 without control characters. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "base/utf8safe.h"
#include "gen/draft_study.h"

static void check(const char *arg, int rc, const k3_study_cost *c) {
    if (rc) {
        const char *m = k3_errmsg();
        size_t n = strlen(m);
        if (strncmp(m, "--cost", 6) || !k3_utf8_valid(m, n)) abort();
        for (size_t i = 0; i < n; i++)
            if ((unsigned char)m[i] < 0x20 || m[i] == 0x7f) abort();
        return;
    }
    size_t nl = strlen(c->name);
    if (!nl || nl >= sizeof c->name || strncmp(arg, c->name, nl) || arg[nl] != '=') abort();
    for (size_t i = 0; i < nl; i++)
        if (c->name[i] <= ' ' || c->name[i] > '~') abort();
    if (c->n < 1 || c->n > K3_DRAFT_MAX || c->c[0] != 1) abort();
    for (int k = 1; k <= c->n; k++)
        if (!(c->c[k] >= K3_SPEC_COST_MIN && c->c[k] <= K3_SPEC_COST_MAX)) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > 4096) return 0;
    char *arg = malloc(size + 1);
    memcpy(arg, data, size);
    arg[size] = 0;
    k3_study_cost c;
    int rc = k3_study_cost_parse(arg, &c);
    if (rc != 0 && rc != -1) abort();
    check(arg, rc, &c);
    free(arg);
    return 0;
}
