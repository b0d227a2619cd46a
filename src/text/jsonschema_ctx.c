/* jsonschema_ctx.c — the JSON Schema compiler's shared helpers (a leaf):
 * error messages with the schema path, the path-extending recursion through
 * the compiler's table (ctx.compile), and $ref lookup. jsonschema.c and
 * jsonschema_union.c both use them; the union file reaches the compiler
 * only through ctx's function pointers, so neither file calls the other
 * back. */
#include "text/jsonschema_int.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

k3_gnode *k3_sch_fail(ctx *c, const char *fmt, ...) {
    char msg[384];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    snprintf(c->err, c->cap, "%s (at '%s')", msg, c->path[0] ? c->path : "schema");
    return NULL;
}

k3_gnode *k3_sch_sub(ctx *c, const json_t *s, int depth, const char *fmt, ...) {
    size_t n = strlen(c->path);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->path + n, sizeof c->path - n, fmt, ap);
    va_end(ap);
    k3_gnode *r = c->compile(c, s, depth + 1);
    if (r) c->path[n] = 0; /* on failure keep the deepest path for the message */
    return r;
}

const json_t *k3_sch_ref_lookup(const json_t *root, const char *ref, int *form_ok) {
    const char *name = NULL;
    if (!strncmp(ref, "#/$defs/", 8))
        name = ref + 8;
    else if (!strncmp(ref, "#/definitions/", 14))
        name = ref + 14;
    *form_ok = name && !strchr(name, '/') && !strchr(name, '~');
    if (!*form_ok) return NULL;
    return json_object_get(json_object_get(root, ref[2] == '$' ? "$defs" : "definitions"), name);
}
