/* jsonschema_union.c — anyOf / oneOf for the schema compiler (jsonschema.h).
 *
 * The grammar matcher holds one state, so alternatives must be told apart
 * by the symbols that start them. Different JSON types already are; two or
 * more object alternatives all start with '{'. They are merged into one
 * KEYED node whose literals begin each object with a property chosen so
 * the literal alone names the alternative (we write keys in any order we
 * like, and JSON objects are unordered):
 *   - a discriminator: a property every alternative has with a const (or a
 *     small enum) of strings, booleans or null, disjoint between them (zod's
 *     discriminatedUnion, Pydantic's Field(discriminator=)): the literal is
 *     `{"kind":"cat"`, and the rest of that object follows;
 *   - else a property each alternative has and no other one has: the
 *     literal is `{"meows":`, and that property's value and the rest follow.
 * Either way the output is an instance of the alternative it began. For
 * oneOf it must not also be an instance of another: a discriminator value
 * rules that out; a lone property does when the other alternative forbids
 * additional properties or requires a property the first one lacks, and
 * is refused otherwise. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "base/mem.h"
#include "text/jsonschema_int.h"

#define MAX_ALTS 16
#define MAX_HOPS 8   /* $ref / allOf-of-one hops to reach an object schema */
#define MAX_LITS 256 /* discriminator values over all alternatives */

typedef struct {
    const json_t *s;            /* the object schema (NULL: not a plain object) */
    const char *refs[MAX_HOPS]; /* $refs followed to reach it */
    int n_refs;
    const char *lead;             /* the property that leads it */
    const json_t *vals[MAX_LITS]; /* discriminator values that lead it */
    int n_vals;
} objalt;

static const json_t *props_of(const json_t *s) {
    return json_object_get(s, "properties");
}

/* Follow $ref and allOf of one schema to a plain object schema (properties,
 * type object or none, nothing that makes it a union or a literal). */
static void as_object(ctx *c, const json_t *s, objalt *a) {
    memset(a, 0, sizeof *a);
    for (int hop = 0; json_is_object(s); hop++) {
        json_t *ref = json_object_get(s, "$ref"), *all = json_object_get(s, "allOf");
        if (!ref && !(json_is_array(all) && json_array_size(all) == 1)) break;
        if (hop == MAX_HOPS) return;
        if (ref) {
            if (!json_is_string(ref)) return;
            int form_ok;
            const json_t *t = k3_sch_ref_lookup(c->root, json_string_value(ref), &form_ok);
            if (!t) return; /* compiling it names the error */
            a->refs[a->n_refs++] = json_string_value(ref);
            s = t;
        } else {
            s = json_array_get(all, 0);
        }
    }
    const json_t *type = json_object_get(s, "type");
    const json_t *props = props_of(s);
    if (!json_is_object(props) || !json_object_size(props)) return;
    if (type && !(json_is_string(type) && !strcmp(json_string_value(type), "object"))) return;
    static const char *const not_plain[] = {"anyOf", "oneOf", "allOf", "$ref", "enum", "const"};
    for (size_t i = 0; i < sizeof not_plain / sizeof *not_plain; i++)
        if (json_object_get(s, not_plain[i])) return;
    if (json_is_true(json_object_get(s, "nullable"))) return;
    a->s = s;
}

/* A property schema's literal values (const, or enum), when all are
 * strings, booleans or null (self-delimiting: no value's text is a prefix
 * of another's). 0 when it has none. */
static int literal_values(const json_t *p, const json_t **out, int cap) {
    const json_t *cn = json_object_get(p, "const"), *en = json_object_get(p, "enum");
    int n = 0;
    if (cn) {
        out[n++] = cn;
    } else if (json_is_array(en)) {
        size_t i;
        json_t *v;
        json_array_foreach(en, i, v) {
            if (n == cap) return 0;
            out[n++] = v;
        }
    }
    for (int i = 0; i < n; i++)
        if (!json_is_string(out[i]) && !json_is_boolean(out[i]) && !json_is_null(out[i])) return 0;
    return n;
}

/* Try property d as the discriminator of all alternatives: 1 it is one,
 * 0 not, -1 + message: it would be, with more values than the limit. */
static int try_discriminator(ctx *c, objalt *alts, int n, const char *d) {
    int total = 0;
    for (int i = 0; i < n; i++) {
        const json_t *p = json_object_get(props_of(alts[i].s), d);
        alts[i].n_vals = p ? literal_values(p, alts[i].vals, MAX_LITS - total) : 0;
        if (!alts[i].n_vals && p && json_array_size(json_object_get(p, "enum")) > 0 &&
            total + json_array_size(json_object_get(p, "enum")) > MAX_LITS) {
            c->too_complex = 1;
            fail(c, "the discriminator '%.60s' has more than %d values (the limit)", d, MAX_LITS);
            return -1;
        }
        if (!alts[i].n_vals) return 0;
        total += alts[i].n_vals;
        for (int j = 0; j < i; j++)
            for (int x = 0; x < alts[i].n_vals; x++)
                for (int y = 0; y < alts[j].n_vals; y++)
                    if (json_equal((json_t *)alts[i].vals[x], (json_t *)alts[j].vals[y])) return 0;
    }
    for (int i = 0; i < n; i++) alts[i].lead = d;
    return 1;
}

static int find_discriminator(ctx *c, objalt *alts, int n) {
    const char *d;
    json_t *v;
    json_object_foreach((json_t *)props_of(alts[0].s), d, v) {
        int r = try_discriminator(c, alts, n, d);
        if (r) return r;
    }
    return 0;
}

static int has_prop(const objalt *a, const char *k) {
    return json_object_get(props_of(a->s), k) != NULL;
}

/* For each alternative, a property no other alternative has (a required
 * one preferred). 0 + message when one has none. */
static int find_lone_keys(ctx *c, objalt *alts, int n, const char *kw) {
    for (int i = 0; i < n; i++) {
        const char *k;
        json_t *v;
        alts[i].lead = NULL;
        json_object_foreach((json_t *)props_of(alts[i].s), k, v) {
            int lone = 1;
            for (int j = 0; j < n && lone; j++) lone = j == i || !has_prop(&alts[j], k);
            if (!lone) continue;
            if (!alts[i].lead) alts[i].lead = k;
            json_t *req = json_object_get(alts[i].s, "required");
            size_t q;
            json_t *r;
            json_array_foreach(req, q,
                               r) if (json_is_string(r) && !strcmp(json_string_value(r), k)) {
                alts[i].lead = k;
                goto next;
            }
        }
        if (!alts[i].lead) {
            fail(c,
                 "'%s': the object alternatives cannot be told apart: alternative %d has no "
                 "property the others lack (give each a discriminator property with a "
                 "different 'const')",
                 kw, i);
            return 0;
        }
    next:;
    }
    return 1;
}

/* oneOf: an instance of a (written with a's properties only, its lead
 * among them) must fail b. */
static int excludes(const objalt *a, const objalt *b) {
    if (json_is_false(json_object_get(b->s, "additionalProperties"))) return 1;
    size_t i;
    json_t *r;
    json_array_foreach(json_object_get(b->s, "required"), i, r) {
        if (json_is_string(r) && !has_prop(a, json_string_value(r))) return 1;
    }
    return 0;
}

/* The tail of alternative i (its $refs on the cycle-check stack). */
static k3_gnode *tail(ctx *c, objalt *a, int idx, const char *kw, int depth, int lead) {
    for (int r = 0; r < a->n_refs; r++)
        for (int j = 0; j < c->n_refs; j++)
            if (!strcmp(c->refs[j], a->refs[r]))
                return fail(c, "recursive '$ref' '%.80s' is not supported", a->refs[r]);
    if (c->n_refs + a->n_refs > MAX_REFS) return fail(c, "'$ref' nesting is too deep");
    for (int r = 0; r < a->n_refs; r++) c->refs[c->n_refs++] = a->refs[r];
    size_t len = strlen(c->path);
    snprintf(c->path + len, sizeof c->path - len, ".%s[%d]", kw, idx);
    k3_gnode *t = c->object(c, a->s, depth + 1, a->lead, lead);
    if (t) c->path[len] = 0;
    c->n_refs -= a->n_refs;
    return t;
}

static void add_lit(k3_gsyms *lit, k3_gram *g, const char *key, const json_t *val) {
    json_t *ks = json_string(key);
    char *k = json_dumps(ks, JSON_ENCODE_ANY);
    char *v = val ? json_dumps(val, JSON_ENCODE_ANY | JSON_COMPACT) : NULL;
    size_t n = strlen(k) + (v ? strlen(v) : 0) + 3;
    char *text = k3_xmalloc(n);
    snprintf(text, n, "{%s:%s", k, v ? v : "");
    *lit = k3_g_lit_str(g, text)->lit;
    free(text);
    free(v);
    free(k);
    json_decref(ks);
}

/* Two or more object alternatives as one KEYED node. */
static k3_gnode *merge_objects(ctx *c, objalt *alts, const int *idx, int n, const char *kw,
                               int depth) {
    int disc = find_discriminator(c, alts, n);
    if (disc < 0 || (!disc && !find_lone_keys(c, alts, n, kw))) return NULL;
    if (!disc && !strcmp(kw, "oneOf"))
        for (int i = 0; i < n; i++)
            for (int j = 0; j < n; j++)
                if (i != j && !excludes(&alts[i], &alts[j]))
                    return fail(c,
                                "'oneOf': an instance of alternative %d could also match "
                                "alternative %d (give them a discriminator property with a "
                                "different 'const', or additionalProperties: false)",
                                idx[i], idx[j]);
    k3_gsyms lits[MAX_LITS];
    k3_gnode *kids[MAX_LITS];
    int n_lits = 0;
    for (int i = 0; i < n; i++) {
        k3_gnode *t = tail(c, &alts[i], idx[i], kw, depth, disc ? 2 : 1);
        if (!t) return NULL;
        for (int v = 0; v < (disc ? alts[i].n_vals : 1); v++) {
            add_lit(&lits[n_lits], c->g, alts[i].lead, disc ? alts[i].vals[v] : NULL);
            kids[n_lits++] = t;
        }
    }
    return k3_g_keyed(c->g, lits, kids, n_lits);
}

k3_gnode *k3_sch_alternatives(ctx *c, const json_t *list, const char *kw, int depth) {
    size_t n = json_array_size(list);
    if (!json_is_array(list) || n == 0) return fail(c, "'%s' must be a non-empty array", kw);
    if (n > MAX_ALTS) return fail(c, "'%s' has more than %d alternatives", kw, MAX_ALTS);
    objalt *objs = k3_xcalloc(n, sizeof *objs);
    int obj_idx[MAX_ALTS], n_obj = 0;
    for (size_t i = 0; i < n; i++) {
        as_object(c, json_array_get(list, i), &objs[n_obj]);
        if (objs[n_obj].s) obj_idx[n_obj++] = (int)i;
    }
    k3_gnode *alts[MAX_ALTS];
    int n_alts = 0, merged = n_obj >= 2;
    if (merged && !(alts[n_alts++] = merge_objects(c, objs, obj_idx, n_obj, kw, depth))) {
        free(objs);
        return NULL;
    }
    free(objs);
    for (size_t i = 0, o = 0; i < n; i++) {
        if (merged && o < (size_t)n_obj && obj_idx[o] == (int)i) {
            o++;
            continue;
        }
        alts[n_alts] = sub(c, json_array_get(list, i), depth, ".%s[%zu]", kw, i);
        if (!alts[n_alts++]) return NULL;
    }
    if (n_alts == 1) return alts[0];
    k3_gnode *u = k3_g_union(c->g, alts, n_alts);
    if (!u) return fail(c, "'%s': %s", kw, k3_errmsg());
    return u;
}
