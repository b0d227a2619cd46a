/* jsonschema.c — JSON Schema compiler for constrained decoding (jsonschema.h). */
#include "text/jsonschema.h"

#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "base/mem.h"
#include "text/jsonschema_int.h"
#include "text/regex.h"

#define MAX_ENUM 4096 /* enum values */
/* schema objects compiled per request (each is visited once: $ref targets
 * are memoized), a backstop beside the grammar's own node budget */
#define MAX_VISITS (4 * K3_G_MAX_NODES)

static size_t memo_slot(const memo *m, const json_t *key) {
    size_t h = ((uintptr_t)key >> 4) * 0x9E3779B97F4A7C15ull;
    size_t i = h & (m->cap - 1);
    while (m->keys[i] && m->keys[i] != key) i = (i + 1) & (m->cap - 1);
    return i;
}

static k3_gnode *memo_get(const memo *m, const json_t *key) {
    return m->cap ? m->vals[memo_slot(m, key)] : NULL;
}

static void memo_put(memo *m, const json_t *key, k3_gnode *val) {
    if (2 * (m->n + 1) > m->cap) {
        memo old = *m;
        m->cap = old.cap ? old.cap * 2 : 64;
        m->keys = k3_xcalloc(m->cap, sizeof *m->keys);
        m->vals = k3_xcalloc(m->cap, sizeof *m->vals);
        m->n = 0;
        for (size_t i = 0; i < old.cap; i++)
            if (old.keys[i]) memo_put(m, old.keys[i], old.vals[i]);
        free(old.keys);
        free(old.vals);
    }
    size_t i = memo_slot(m, key);
    if (!m->keys[i]) m->n++;
    m->keys[i] = key;
    m->vals[i] = val;
}

/* Refuse once the grammar or the work passes its budget: the message names
 * the limit, and the caller answers "too complex" rather than "unsupported". */
static int over_budget(ctx *c) {
    const char *what = k3_gram_over(c->g);
    if (!what && ++c->visits <= MAX_VISITS) return 0;
    c->too_complex = 1;
    if (what && !strcmp(what, "grammar nodes"))
        fail(c, "the schema compiles to more than %d grammar nodes (the limit)", K3_G_MAX_NODES);
    else if (what)
        fail(c, "the schema compiles to more than %u MiB of grammar (the limit)",
             K3_G_MAX_BYTES >> 20);
    else
        fail(c, "the schema has more than %d subschemas to compile", MAX_VISITS);
    return 1;
}

static const char *const IGNORED[] = {"title",       "description", "default",      "examples",
                                      "$schema",     "$id",         "$comment",     "deprecated",
                                      "readOnly",    "writeOnly",   "strict",       "$defs",
                                      "definitions", "name",        "discriminator"};

static const char *const HANDLED[] = {"type",
                                      "enum",
                                      "const",
                                      "properties",
                                      "required",
                                      "additionalProperties",
                                      "propertyNames",
                                      "items",
                                      "minItems",
                                      "maxItems",
                                      "minLength",
                                      "maxLength",
                                      "format",
                                      "pattern",
                                      "anyOf",
                                      "oneOf",
                                      "allOf",
                                      "$ref",
                                      "nullable",
                                      "minimum",
                                      "maximum",
                                      "exclusiveMinimum",
                                      "exclusiveMaximum",
                                      "multipleOf",
                                      "uniqueItems"};

static int in_list(const char *k, const char *const *list, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (!strcmp(k, list[i])) return 1;
    return 0;
}

static k3_gnode *compile(ctx *c, const json_t *s, int depth);
/* An object schema's grammar; with lead_key (one of its properties), that
 * property is written first and begun by an enclosing literal
 * (k3_g_object_tail: lead 1 or 2). */
static k3_gnode *object_schema(ctx *c, const json_t *s, int depth, const char *lead_key, int lead);

static int get_count(ctx *c, const json_t *s, const char *key, int dflt, int *out) {
    json_t *v = json_object_get(s, key);
    if (!v) return *out = dflt, 0;
    if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > 1000000) {
        fail(c, "'%s' must be a non-negative integer", key);
        return -1;
    }
    *out = (int)json_integer_value(v);
    return 0;
}

static k3_gnode *compile_enum(ctx *c, const json_t *vals) {
    size_t n = json_array_size(vals);
    if (n == 0) return fail(c, "'enum' must not be empty");
    if (n > MAX_ENUM) return fail(c, "'enum' has more than %d values", MAX_ENUM);
    char **texts = k3_xcalloc(n, sizeof *texts);
    for (size_t i = 0; i < n; i++)
        texts[i] = json_dumps(json_array_get(vals, i), JSON_COMPACT | JSON_ENCODE_ANY);
    /* a literal that is a prefix of another must be a number ending where the
     * other continues with a digit/./e: the matcher handles that; strings,
     * objects, arrays and keywords are self-delimiting */
    k3_gnode *r = k3_g_enum(c->g, (const char *const *)texts, (int)n);
    for (size_t i = 0; i < n; i++) free(texts[i]);
    free(texts);
    return r;
}

/* propertyNames with an enum and no properties (zod's record over an enum):
 * an object with those keys, each valued by additionalProperties. */
static k3_gnode *enum_keyed_object(ctx *c, const json_t *s, const json_t *names, int depth) {
    json_t *en = json_object_get(names, "enum");
    json_t *addl = json_object_get(s, "additionalProperties");
    json_t *props = json_object(), *fixed = json_deep_copy(s);
    size_t i;
    json_t *v;
    json_array_foreach(en, i, v) {
        if (!json_is_string(v)) {
            json_decref(props), json_decref(fixed);
            return fail(c, "'propertyNames' 'enum' must hold strings");
        }
        json_object_set(props, json_string_value(v), json_is_object(addl) ? addl : json_true());
    }
    json_object_set_new(fixed, "properties", props);
    json_object_del(fixed, "propertyNames");
    json_object_set_new(fixed, "additionalProperties", json_false());
    k3_gnode *r = object_schema(c, fixed, depth, NULL, 0);
    json_decref(fixed);
    return r;
}

/* An object without properties: any keys (held to propertyNames, a string
 * schema) valued by additionalProperties. */
static k3_gnode *free_object(ctx *c, const json_t *s, const json_t *names, int depth) {
    json_t *addl = json_object_get(s, "additionalProperties");
    if (addl && json_is_false(addl)) return k3_g_lit_str(c->g, "{}");
    k3_gnode *v = addl && json_is_object(addl) ? sub(c, addl, depth, ".additionalProperties")
                                               : k3_g_any(c->g);
    if (!v || !names) return v ? k3_g_freeobj(c->g, v) : NULL;
    k3_gnode *key = sub(c, names, depth, ".propertyNames");
    if (!key) return NULL;
    for (int sym = 0; sym < K3_SYM_COUNT; sym++)
        if (k3_gnode_has_first(key, sym) != (sym == '"'))
            return fail(c, "'propertyNames' must describe strings");
    return k3_g_freeobj_keys(c->g, v, key);
}

/* propertyNames: {"type": "string"} says nothing; an enum of keys is a
 * fixed object (when nothing else constrains it); else NULL. */
static int names_trivial(const json_t *names) {
    const char *t = json_string_value(json_object_get(names, "type"));
    return !names || (json_object_size(names) == 1 && t && !strcmp(t, "string"));
}

static k3_gnode *object_schema(ctx *c, const json_t *s, int depth, const char *lead_key, int lead) {
    json_t *props = json_object_get(s, "properties");
    json_t *req = json_object_get(s, "required");
    json_t *addl = json_object_get(s, "additionalProperties");
    json_t *names = json_object_get(s, "propertyNames");
    if (props && !json_is_object(props)) return fail(c, "'properties' must be an object");
    if (req && !json_is_array(req)) return fail(c, "'required' must be an array");
    if (addl && !json_is_boolean(addl) && !json_is_object(addl))
        return fail(c, "'additionalProperties' must be a boolean or a schema");
    if (names && !json_is_object(names)) return fail(c, "'propertyNames' must be a schema");
    size_t n = props ? json_object_size(props) : 0;
    if (n == 0 && json_is_array(json_object_get(names, "enum")) && json_object_size(names) <= 2 &&
        (!addl || json_is_object(addl)))
        return enum_keyed_object(c, s, names, depth);
    if (n && !names_trivial(names))
        return fail(c, "'propertyNames' beside 'properties' is only supported as "
                       "{\"type\":\"string\"}");
    size_t i;
    json_t *r;
    json_array_foreach(req, i, r) {
        if (!json_is_string(r)) return fail(c, "'required' must hold strings");
        if (!props || !json_object_get(props, json_string_value(r)))
            return fail(c, "required property '%s' is not in 'properties'", json_string_value(r));
    }
    if (n == 0) return free_object(c, s, names_trivial(names) ? NULL : names, depth);
    if (n > K3_G_MAX_PROPS)
        return fail(c, "an object with more than %d properties is not supported", K3_G_MAX_PROPS);
    const char **keys = k3_xcalloc(n, sizeof *keys);
    char **quoted = k3_xcalloc(n, sizeof *quoted);
    k3_gnode **vals = k3_xcalloc(n, sizeof *vals);
    unsigned char *required = k3_xcalloc(n, 1);
    const char *k;
    json_t *v;
    size_t j = lead_key ? 1 : 0;
    k3_gnode *out = NULL;
    json_object_foreach(props, k, v) {
        size_t at = lead_key && !strcmp(k, lead_key) ? 0 : j++;
        json_t *ks = json_string(k);
        quoted[at] = json_dumps(ks, JSON_ENCODE_ANY);
        json_decref(ks);
        keys[at] = quoted[at];
        json_array_foreach(req, i, r) if (!strcmp(json_string_value(r), k)) required[at] = 1;
        vals[at] = sub(c, v, depth, ".properties.%.60s", k);
        if (!vals[at]) goto done;
    }
    out = k3_g_object_tail(c->g, keys, vals, required, (int)n, lead_key ? lead : 0);
done:
    for (size_t q = 0; q < n; q++) free(quoted[q]);
    free(quoted);
    free(keys);
    free(vals);
    free(required);
    return out;
}

/* A numeric keyword's value (0 absent, 1 read, -1 + message: not a number). */
static int num_kw(ctx *c, const json_t *s, const char *key, long double *v, int *is_int,
                  long long *iv) {
    json_t *j = json_object_get(s, key);
    if (!j) return 0;
    if (!json_is_number(j)) return fail(c, "'%s' must be a number", key), -1;
    *is_int = json_is_integer(j);
    *iv = *is_int ? json_integer_value(j) : 0;
    *v = *is_int ? (long double)*iv : (long double)json_real_value(j);
    return 1;
}

/* Raise lo / lower hi to bound v (already scaled). 1 when it leaves
 * nothing inside [-lim, lim]. */
static int tighten(long long *lo, long long *hi, long double v, int upper, int excl,
                   long long lim) {
    long double x;
    if (!upper)
        x = excl ? floorl(v) + 1 : ceill(v);
    else
        x = excl ? ceill(v) - 1 : floorl(v);
    if ((!upper && x > (long double)lim) || (upper && x < -(long double)lim)) return 1;
    if (x < -(long double)lim || x > (long double)lim) return 0; /* no tighter than the grid */
    long long b = (long long)x;
    if (!upper && b > *lo) *lo = b;
    if (upper && b < *hi) *hi = b;
    return 0;
}

/* integer / number with minimum, maximum, exclusiveMinimum/Maximum (as
 * numbers, or draft-4 booleans) and multipleOf; exact for integers, for
 * numbers on the K3_G_FRAC-digit grid (grammar.h). */
static k3_gnode *compile_number(ctx *c, const json_t *s, int integer) {
    static const char *const kw[] = {"minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum",
                                     "multipleOf"};
    long double v[5];
    int is_int[5], has[5], any = 0;
    long long iv[5];
    for (int i = 0; i < 5; i++) {
        json_t *j = json_object_get(s, kw[i]);
        has[i] = 0;
        if ((i == 1 || i == 3) && json_is_boolean(j)) continue; /* draft 4 */
        if ((has[i] = num_kw(c, s, kw[i], &v[i], &is_int[i], &iv[i])) < 0) return NULL;
        any |= has[i];
    }
    if (!any) return k3_g_number(c->g, integer);
    int excl_min = json_is_true(json_object_get(s, "exclusiveMinimum"));
    int excl_max = json_is_true(json_object_get(s, "exclusiveMaximum"));
    long double scale = integer ? 1 : 1e6L; /* 10^K3_G_FRAC */
    long long lim = integer ? LLONG_MAX : 999999999999999999LL;
    k3_numrange r = {-lim, lim, 0};
    int empty = 0;
    for (int i = 0; i < 4; i++) {
        if (!has[i]) continue;
        int upper = i >= 2, excl = i == 1 || i == 3 || (i == 0 && excl_min) || (i == 2 && excl_max);
        if (integer && is_int[i]) { /* exact, whatever the size */
            long long b = iv[i];
            if (excl && !upper) b = b == LLONG_MAX ? b : b + 1;
            if (excl && upper) b = b == LLONG_MIN ? b : b - 1;
            if (!upper && b > r.lo) r.lo = b;
            if (upper && b < r.hi) r.hi = b;
        } else {
            empty |= tighten(&r.lo, &r.hi, v[i] * scale, upper, excl, lim);
        }
    }
    if (has[4]) {
        long double m = v[4];
        if (!(m >= 1 && m == floorl(m) && m * scale < 1.8e19L))
            return fail(c, "'multipleOf' must be a positive integer (below 2^63)");
        r.mult = (unsigned long long)(m * scale);
    }
    k3_gnode *n = empty || r.lo > r.hi ? NULL : k3_g_number_range(c->g, integer, &r);
    if (!n)
        return fail(c, "'minimum'/'maximum'/'multipleOf' leave no %s to write",
                    integer ? "integer" : "number (at most 12 integer and 6 fraction digits)");
    return n;
}

/* What each supported format writes: regular subsets of what the format
 * allows (and of what zod's patterns for it accept), so every output
 * validates. */
static const char *format_regex(const char *f) {
    static const char *const map[][2] = {
        {"date", "^[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|1[0-9]|2[0-8])$"},
        {"time", "^([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9]Z$"},
        {"date-time",
         "^[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|1[0-9]|2[0-8])T([01][0-9]|2[0-3]):[0-5][0-9]:[0-5]"
         "[0-9]Z$"},
        {"uuid", "^[0-9a-f]{8}-[0-9a-f]{4}-[1-8][0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$"},
        {"email", "^[a-z0-9]{1,16}([._+-][a-z0-9]{1,16}){0,2}@[a-z0-9]{1,16}(-[a-z0-9]{1,16})?\\."
                  "[a-z]{2,6}$"},
        {"hostname",
         "^[a-z0-9]{1,20}(-[a-z0-9]{1,20})?(\\.[a-z0-9]{1,20}(-[a-z0-9]{1,20})?){0,3}$"},
        {"ipv4", "^((25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])\\.){3}(25[0-5]|2[0-4][0-9]|1[0-9]"
                 "[0-9]|[1-9]?[0-9])$"},
        {"ipv6", "^[0-9a-f]{1,4}(:[0-9a-f]{1,4}){7}$"},
        {"uri",
         "^https://[a-z0-9]{1,20}(\\.[a-z0-9]{1,20}){0,2}\\.[a-z]{2,6}(/[a-z0-9._~-]{1,20}){0,4}$"},
    };
    for (size_t i = 0; i < sizeof map / sizeof *map; i++)
        if (!strcmp(f, map[i][0])) return map[i][1];
    return NULL;
}

/* A DFA for one regex (within another DFA, or NULL), or NULL + message
 * (too_complex when a bound). */
static k3_redfa *regex_dfa(ctx *c, const char *rx, k3_redfa *within, const char *kw) {
    char msg[256];
    int big = 0;
    k3_redfa *d = k3_re_compile(c->g, rx, within, msg, sizeof msg, &big);
    if (!d) c->too_complex |= big, fail(c, "'%s': %s", kw, msg);
    return d;
}

/* Strings: minLength/maxLength (code points), or a format and/or a pattern
 * (a DFA over printable ASCII; both: their intersection). */
static k3_gnode *compile_string(ctx *c, const json_t *s) {
    int mn, mx;
    if (get_count(c, s, "minLength", 0, &mn) || get_count(c, s, "maxLength", -1, &mx)) return NULL;
    if (mx >= 0 && mx < mn) return fail(c, "'maxLength' is below 'minLength'");
    json_t *f = json_object_get(s, "format"), *pat = json_object_get(s, "pattern");
    if (f && !json_is_string(f)) return fail(c, "'format' must be a string");
    if (pat && !json_is_string(pat)) return fail(c, "'pattern' must be a string");
    const char *frx = f ? format_regex(json_string_value(f)) : NULL;
    if (f && !frx)
        return fail(c,
                    "string format '%.60s' is not supported (supported: date, time, date-time, "
                    "uuid, email, uri, hostname, ipv4, ipv6)",
                    json_string_value(f));
    if (!frx && !pat) return k3_g_string(c->g, mn, mx, NULL);
    k3_redfa *d = frx ? regex_dfa(c, frx, NULL, "format") : NULL;
    if (frx && !d) return NULL;
    if (pat &&
        !(d = regex_dfa(c, json_string_value(pat), d, frx ? "format' and 'pattern" : "pattern")))
        return NULL;
    /* lengths: enforced when the automaton's strings already fit them */
    int lo, hi;
    k3_re_lengths(d, &lo, &hi);
    if (lo < mn || (mx >= 0 && (hi < 0 || hi > mx)))
        return fail(c,
                    "'minLength'/'maxLength' that narrow a 'format' or 'pattern' are not "
                    "supported (its strings are %d to %d characters)",
                    lo, hi);
    return k3_g_string_re(c->g, d);
}

static k3_gnode *compile_type(ctx *c, const json_t *s, const char *t, int depth) {
    if (!strcmp(t, "null")) return k3_g_lit_str(c->g, "null");
    if (!strcmp(t, "boolean")) {
        static const char *const tf[] = {"true", "false"};
        return k3_g_enum(c->g, tf, 2);
    }
    if (!strcmp(t, "integer") || !strcmp(t, "number"))
        return compile_number(c, s, !strcmp(t, "integer"));
    if (!strcmp(t, "string")) return compile_string(c, s);
    if (!strcmp(t, "array")) {
        int mn, mx;
        if (get_count(c, s, "minItems", 0, &mn) || get_count(c, s, "maxItems", -1, &mx))
            return NULL;
        if (mx >= 0 && mx < mn) return fail(c, "'maxItems' is below 'minItems'");
        json_t *u = json_object_get(s, "uniqueItems");
        if (u && !json_is_false(u)) return fail(c, "'uniqueItems' is not supported");
        json_t *items = json_object_get(s, "items");
        if (items && !json_is_object(items) && !json_is_boolean(items))
            return fail(c, "'items' must be a schema (tuple 'items' are not supported)");
        k3_gnode *it = items ? sub(c, items, depth, ".items") : k3_g_any(c->g);
        return it ? k3_g_array(c->g, it, mn, mx) : NULL;
    }
    if (!strcmp(t, "object")) return object_schema(c, s, depth, NULL, 0);
    return fail(c, "unknown type '%.40s'", t);
}

/* The JSON types a schema without "type" implies from its keywords. */
static const char *implied_type(const json_t *s) {
    if (json_object_get(s, "properties") || json_object_get(s, "additionalProperties") ||
        json_object_get(s, "required"))
        return "object";
    if (json_object_get(s, "items") || json_object_get(s, "minItems") ||
        json_object_get(s, "maxItems"))
        return "array";
    if (json_object_get(s, "minLength") || json_object_get(s, "maxLength") ||
        json_object_get(s, "format") || json_object_get(s, "pattern"))
        return "string";
    return NULL;
}

static k3_gnode *compile_ref(ctx *c, const char *ref, int depth) {
    int form_ok;
    const json_t *target = k3_sch_ref_lookup(c->root, ref, &form_ok);
    if (!form_ok)
        return fail(c, "'$ref' '%.80s' is not supported (only #/$defs/NAME, #/definitions/NAME)",
                    ref);
    if (!target) return fail(c, "'$ref' '%.80s' does not resolve", ref);
    const char *name = strrchr(ref, '/') + 1;
    for (int i = 0; i < c->n_refs; i++)
        if (!strcmp(c->refs[i], ref))
            return fail(c, "recursive '$ref' '%.80s' is not supported", ref);
    k3_gnode *r = memo_get(&c->done, target);
    if (r) return r; /* built once, shared by every use */
    if (c->n_refs == MAX_REFS) return fail(c, "'$ref' nesting is too deep");
    c->refs[c->n_refs++] = ref;
    r = sub(c, target, depth, "->%.60s", name);
    c->n_refs--;
    if (r) memo_put(&c->done, target, r);
    return r;
}

static k3_gnode *compile(ctx *c, const json_t *s, int depth) {
    if (depth > MAX_NEST) return fail(c, "the schema is nested too deeply");
    if (over_budget(c)) return NULL;
    if (json_is_true(s)) return k3_g_any(c->g);
    if (json_is_false(s)) return fail(c, "the schema 'false' matches nothing");
    if (!json_is_object(s)) return fail(c, "a schema must be an object or a boolean");
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)s, k, v) {
        if (in_list(k, IGNORED, sizeof IGNORED / sizeof *IGNORED)) continue;
        if (!in_list(k, HANDLED, sizeof HANDLED / sizeof *HANDLED))
            return fail(c, "keyword '%.60s' is not supported", k);
    }
    json_t *ref = json_object_get(s, "$ref");
    json_t *any = json_object_get(s, "anyOf"), *one = json_object_get(s, "oneOf");
    json_t *all = json_object_get(s, "allOf");
    int combos = (ref != NULL) + (any != NULL) + (one != NULL) + (all != NULL);
    json_t *type = json_object_get(s, "type");
    json_t *en = json_object_get(s, "enum"), *cn = json_object_get(s, "const");
    if (combos > 1 || (combos && (type || en || cn)))
        return fail(c, "'$ref', 'anyOf', 'oneOf' and 'allOf' cannot be combined with each other "
                       "or with 'type', 'enum', 'const'");
    k3_gnode *r = NULL;
    if (ref) {
        if (!json_is_string(ref)) return fail(c, "'$ref' must be a string");
        r = compile_ref(c, json_string_value(ref), depth);
    } else if (any || one) {
        /* alternatives that start differently are mutually exclusive, so oneOf == anyOf */
        r = k3_sch_alternatives(c, any ? any : one, any ? "anyOf" : "oneOf", depth);
    } else if (all) {
        if (!json_is_array(all) || json_array_size(all) != 1)
            return fail(c, "'allOf' is only supported with exactly one schema");
        r = sub(c, json_array_get(all, 0), depth, ".allOf[0]");
    } else if (cn) {
        json_t *one_val = json_pack("[O]", cn);
        r = compile_enum(c, one_val);
        json_decref(one_val);
    } else if (en) {
        if (!json_is_array(en)) return fail(c, "'enum' must be an array");
        r = compile_enum(c, en);
    } else if (json_is_string(type)) {
        r = compile_type(c, s, json_string_value(type), depth);
    } else if (json_is_array(type)) {
        size_t n = json_array_size(type);
        if (n == 0 || n > 7) return fail(c, "'type' must list 1 to 7 types");
        k3_gnode *alts[7];
        for (size_t i = 0; i < n; i++) {
            json_t *t = json_array_get(type, i);
            if (!json_is_string(t)) return fail(c, "'type' must hold strings");
            for (size_t j = 0; j < i; j++) /* before compiling: each type once */
                if (json_equal(t, json_array_get(type, j)))
                    return fail(c, "'type' lists '%.20s' twice", json_string_value(t));
            alts[i] = compile_type(c, s, json_string_value(t), depth);
            if (!alts[i]) return NULL;
        }
        r = n == 1 ? alts[0] : k3_g_union(c->g, alts, (int)n);
        if (!r) return fail(c, "'type': %s", k3_errmsg());
    } else if (type) {
        return fail(c, "'type' must be a string or an array of strings");
    } else if (implied_type(s)) {
        r = compile_type(c, s, implied_type(s), depth);
    } else {
        static const char *const num[] = {"minimum", "maximum", "exclusiveMinimum",
                                          "exclusiveMaximum", "multipleOf"};
        for (int i = 0; i < 5; i++)
            if (json_object_get(s, num[i]))
                return fail(c, "'%s' without 'type' is not supported", num[i]);
        r = k3_g_any(c->g);
    }
    if (r && json_is_true(json_object_get(s, "nullable"))) {
        k3_gnode *alts[2] = {r, k3_g_lit_str(c->g, "null")};
        k3_gnode *u = k3_g_union(c->g, alts, 2);
        if (!u) return fail(c, "'nullable': %s", k3_errmsg());
        r = u;
    }
    return r;
}

k3_gnode *k3_schema_compile(k3_gram *g, const json_t *schema, char *err, size_t cap,
                            int *too_complex) {
    ctx c = {.g = g,
             .root = schema,
             .err = err,
             .cap = cap,
             .compile = compile,
             .object = object_schema};
    err[0] = 0;
    k3_gnode *r = compile(&c, schema, 0);
    if (r && k3_gram_over(g)) r = NULL, over_budget(&c);
    if (r && r->minlen > K3_SCHEMA_MAX_MINLEN) {
        /* shared definitions can describe a document no context could hold */
        fail(&c, "the smallest JSON valid under the schema has more than %d characters (the limit)",
             K3_SCHEMA_MAX_MINLEN);
        c.too_complex = 1;
        r = NULL;
    }
    free(c.done.keys);
    free(c.done.vals);
    if (too_complex) *too_complex = !r && c.too_complex;
    return r;
}
