/* schema_check.h — test helpers for the JSON Schema compiler
 * (text/jsonschema.h): compile a schema given as text, close a grammar with
 * the end-of-message literal as the server does, and ask whether a whole text
 * is accepted. */
#ifndef K3_TESTS_SCHEMA_CHECK_H
#define K3_TESTS_SCHEMA_CHECK_H

#include <jansson.h>
#include <stdio.h>

#include "text/grammar.h"
#include "text/jsonschema.h"

/* The grammar of the schema text, or NULL with err (and *too_complex when
 * too_complex is not NULL). */
static inline k3_gnode *sch_compile(k3_gram *g, const char *schema, char *err, size_t cap,
                                    int *too_complex) {
    json_t *s = json_loads(schema, JSON_DECODE_ANY, NULL);
    if (!s) return snprintf(err, cap, "bad test schema"), NULL;
    k3_gnode *n = k3_schema_compile(g, s, err, cap, too_complex);
    json_decref(s);
    return n;
}

/* v followed by the end-of-message control literal. */
static inline k3_gnode *sch_wrap(k3_gram *g, k3_gnode *v) {
    k3_gnode *kids[2] = {v, k3_g_lit_ctl(g, "{E}")};
    return k3_g_seq(g, kids, 2);
}

/* 1 if the schema compiles and text, then the end of message, is accepted. */
static inline int sch_accepts(const char *schema, const char *text) {
    k3_gram *g = k3_gram_new();
    char err[512];
    k3_gnode *n = sch_compile(g, schema, err, sizeof err, NULL);
    if (!n) printf("  refused %s: %s\n", schema, err);
    int ok = n != NULL;
    if (n) {
        k3_gstate st;
        k3_gstate_init(&st, sch_wrap(g, n));
        for (const char *p = text; *p && ok; p++) ok = k3_gstate_step(&st, (unsigned char)*p);
        ok = ok && k3_gstate_step(&st, K3_SYM_EOM) && k3_gstate_done(&st);
    }
    k3_gram_free(g);
    return ok;
}

#endif
