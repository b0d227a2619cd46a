/* jsonschema_int.h — the JSON Schema compiler's state, shared by its files
 * (jsonschema.c: keywords; jsonschema_union.c: unions of objects). Not a
 * public interface: text/jsonschema.h is. */
#ifndef K3_TEXT_JSONSCHEMA_INT_H
#define K3_TEXT_JSONSCHEMA_INT_H

#include <jansson.h>
#include <stddef.h>

#include "text/grammar.h"

#define MAX_REFS 32 /* nesting of $ref being expanded */
#define MAX_NEST 64 /* schema nesting */

/* $ref targets already compiled, by address: a $ref'd definition is built
 * once and shared by every use (open addressing, power-of-two capacity). */
typedef struct {
    const json_t **keys;
    k3_gnode **vals;
    size_t n, cap;
} memo;

typedef struct ctx ctx;

/* The compiler's recursive entry points, filled by k3_schema_compile: the
 * helpers (jsonschema_ctx.c) and the union file (jsonschema_union.c) recurse
 * through them, so they never call jsonschema.c back. */
typedef k3_gnode *(*k3_sch_compile_fn)(ctx *c, const json_t *s, int depth);
typedef k3_gnode *(*k3_sch_object_fn)(ctx *c, const json_t *s, int depth, const char *lead_key,
                                      int lead);

struct ctx {
    k3_sch_compile_fn compile; /* any schema */
    k3_sch_object_fn object;   /* an object schema, optionally led by one key */
    k3_gram *g;
    const json_t *root;
    memo done;
    long visits;
    int too_complex;            /* the refusal is a size limit, not a keyword */
    const char *refs[MAX_REFS]; /* $refs being expanded (cycle check) */
    int n_refs;
    char *err;
    size_t cap;
    char path[256];
};

/* Set the error message (with the current path); returns NULL (jsonschema_ctx.c). */
k3_gnode *k3_sch_fail(ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Compile s with the path extended by the formatted suffix. */
k3_gnode *k3_sch_sub(ctx *c, const json_t *s, int depth, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* The schema ref ("#/$defs/X", "#/definitions/X") names in root, or NULL;
 * *form_ok 0 when ref is not of a supported form. */
const json_t *k3_sch_ref_lookup(const json_t *root, const char *ref, int *form_ok);

/* anyOf/oneOf: the alternatives' union; two or more object alternatives
 * are merged into one node keyed by a discriminator or by a property each
 * alone has (jsonschema_union.c). */
k3_gnode *k3_sch_alternatives(ctx *c, const json_t *list, const char *kw, int depth);

#define fail k3_sch_fail
#define sub k3_sch_sub

#endif
