/* test_text_schema_limits.c — the JSON Schema compiler's size guarantees
 * (text/jsonschema.h, text/grammar.h): $ref'd definitions are shared, not
 * copied, so schemas that would expand exponentially compile to a small
 * graph; the grammar's node budget refuses what would still be too large;
 * and random schemas built from $ref, anyOf, nesting and arrays compile to
 * at most a linear number of nodes in their JSON size. Counts only: no
 * timing is asserted. */
#include <jansson.h>
#include <string.h>

#include "t.h"
#include "text/grammar.h"
#include "text/jsonschema.h"

/* $defs d_i = object with required a and b, both $ref d_{i-1}; d0 a short
 * string; root $ref d_{n-1}. A tree would have 2^n copies of d0. */
static json_t *doubling_refs(int n) {
    json_t *defs = json_object();
    json_object_set_new(defs, "d0", json_pack("{s:s, s:i}", "type", "string", "maxLength", 3));
    for (int i = 1; i < n; i++) {
        char prev[40], name[32];
        snprintf(prev, sizeof prev, "#/$defs/d%d", i - 1);
        snprintf(name, sizeof name, "d%d", i);
        json_object_set_new(defs, name,
                            json_pack("{s:s, s:{s:{s:s}, s:{s:s}}, s:[s,s], s:b}", "type", "object",
                                      "properties", "a", "$ref", prev, "b", "$ref", prev,
                                      "required", "a", "b", "additionalProperties", 0));
    }
    char root[40];
    snprintf(root, sizeof root, "#/$defs/d%d", n - 1);
    return json_pack("{s:o, s:s}", "$defs", defs, "$ref", root);
}

/* l_i = anyOf [array of $ref l_{i-1}, object {x: $ref l_{i-1}}, string]. */
static json_t *anyof_refs(int n) {
    json_t *defs = json_object();
    json_object_set_new(defs, "l0", json_pack("{s:s}", "type", "integer"));
    for (int i = 1; i < n; i++) {
        char prev[40], name[32];
        snprintf(prev, sizeof prev, "#/$defs/l%d", i - 1);
        snprintf(name, sizeof name, "l%d", i);
        json_object_set_new(defs, name,
                            json_pack("{s:[{s:s, s:{s:s}}, {s:s, s:{s:{s:s}}, s:[s]}, {s:s}]}",
                                      "anyOf", "type", "array", "items", "$ref", prev, "type",
                                      "object", "properties", "x", "$ref", prev, "required", "x",
                                      "type", "string"));
    }
    char root[40];
    snprintf(root, sizeof root, "#/$defs/l%d", n - 1);
    return json_pack("{s:o, s:s}", "$defs", defs, "$ref", root);
}

static size_t json_len(const json_t *j) {
    char *t = json_dumps(j, JSON_COMPACT);
    size_t n = strlen(t);
    free(t);
    return n;
}

/* Compile; *nodes = grammar nodes after, *tc = the too-complex flag. */
static k3_gnode *compile_count(k3_gram *g, const json_t *s, size_t *nodes, int *tc) {
    char err[512];
    k3_gnode *r = k3_schema_compile(g, s, err, sizeof err, tc);
    *nodes = k3_gram_nodes(g);
    if (!r && !*tc) printf("  refused: %s\n", err);
    return r;
}

TEST(schema_shared_refs_stay_small) {
    static const int sizes[] = {6, 16, 22, 25, 30};
    for (int si = 0; si < 5; si++) {
        int n = sizes[si];
        json_t *s = doubling_refs(n);
        k3_gram *g = k3_gram_new();
        size_t nodes;
        int tc;
        k3_gnode *r = compile_count(g, s, &nodes, &tc);
        /* N >= 20: the smallest valid document (2^N strings) passes
         * K3_SCHEMA_MAX_MINLEN and is refused as too complex, at once */
        CHECK(n < 20 ? r != NULL : (!r && tc), "N=%d: compiled %d, too complex %d", n, r != NULL,
              tc);
        /* one node per definition and a few literals: not 2^N */
        CHECK(nodes <= (size_t)(4 * n + 16), "N=%d: %zu nodes", n, nodes);
        printf("  doubling $ref N=%d: %zu bytes of schema, %zu nodes\n", n, json_len(s), nodes);
        /* the shared graph matches what the tree would: the leftmost path
         * down to d0, then the rest closed by the cheapest completion */
        if (r) {
            k3_gstate st;
            k3_gstate_init(&st, r);
            /* the smallest document: L0 = 2 (""), L_i = 2 L_{i-1} + 11 */
            long want = 2;
            for (int i = 1; i < n; i++) want = 2 * want + 11;
            CHECK(k3_gstate_rem(&st) == want, "N=%d: rem %d, want %ld", n, k3_gstate_rem(&st),
                  want);
            int ok = 1;
            for (int i = 1; i < n; i++)
                for (const char *p = "{\"a\":"; *p; p++) ok &= k3_gstate_step(&st, *p);
            ok &= k3_gstate_step(&st, '"') && k3_gstate_step(&st, 'x');
            CHECK(ok && k3_gstate_rem(&st) > 2 * (n - 1), "N=%d: the deepest leaf is reachable", n);
            for (int steps = 0; n < 8 && ok && !k3_gstate_done(&st) && steps < 1 << 20; steps++) {
                int rem = k3_gstate_rem(&st), moved = 0;
                for (const char *c = "\"}{,:ab"; *c && !moved; c++) {
                    k3_gstate t;
                    k3_gstate_copy(&t, &st);
                    if (k3_gstate_step(&t, *c) && k3_gstate_rem(&t) < rem)
                        k3_gstate_copy(&st, &t), moved = 1;
                }
                ok = moved;
            }
            CHECK(n >= 8 || (ok && k3_gstate_done(&st)), "N=%d: the document closes", n);
        }
        k3_gram_free(g);
        json_decref(s);
    }
    json_t *s = anyof_refs(16);
    k3_gram *g = k3_gram_new();
    size_t nodes;
    int tc;
    CHECK(compile_count(g, s, &nodes, &tc), "16 anyOf levels compile");
    CHECK(nodes <= 16 * 8 + 16, "anyOf levels: %zu nodes", nodes);
    printf("  anyOf $ref 16 levels: %zu bytes of schema, %zu nodes\n", json_len(s), nodes);
    k3_gram_free(g);
    json_decref(s);
}

/* Wide, not deep: many distinct definitions pass the node budget and are
 * refused as too complex, naming the limit. */
TEST(schema_node_budget_refuses) {
    json_t *defs = json_object(), *props = json_object();
    for (int i = 0; i < 700; i++) {
        char name[32], ref[48];
        snprintf(name, sizeof name, "o%d", i);
        snprintf(ref, sizeof ref, "#/$defs/o%d", i);
        json_t *p = json_object();
        for (int k = 0; k < 40; k++) {
            char key[16];
            snprintf(key, sizeof key, "k%d", k);
            json_object_set_new(p, key, json_pack("{s:s}", "type", "integer"));
        }
        json_object_set_new(defs, name, json_pack("{s:s, s:o}", "type", "object", "properties", p));
        json_object_set_new(props, name, json_pack("{s:s}", "$ref", ref));
    }
    /* 700 x 41 nodes > the budget (object properties are capped at 64, so
     * nest: root -> 11 groups of 64 refs) */
    json_t *groups = json_object();
    const char *k;
    json_t *v;
    int i = 0;
    json_t *grp = NULL;
    json_object_foreach(props, k, v) {
        if (i % 64 == 0) {
            char gname[16];
            snprintf(gname, sizeof gname, "g%d", i / 64);
            grp = json_object();
            json_object_set_new(groups, gname,
                                json_pack("{s:s, s:o}", "type", "object", "properties", grp));
        }
        json_object_set(grp, k, v);
        i++;
    }
    json_t *s = json_pack("{s:o, s:s, s:o}", "$defs", defs, "type", "object", "properties", groups);
    json_decref(props);
    k3_gram *g = k3_gram_new();
    char err[512];
    int tc = 0;
    k3_gnode *r = k3_schema_compile(g, s, err, sizeof err, &tc);
    CHECK(!r && tc, "refused as too complex: %s", err);
    CHECK(strstr(err, "20000 grammar nodes") != NULL, "names the limit: %s", err);
    CHECK(k3_gram_nodes(g) <= K3_G_MAX_NODES + 64, "stopped at the budget: %zu", k3_gram_nodes(g));
    k3_gram_free(g);
    json_decref(s);
    /* an unsupported keyword is not "too complex" */
    json_t *bad = json_pack("{s:s, s:b}", "type", "string", "not", 1);
    g = k3_gram_new();
    tc = 1;
    CHECK(!k3_schema_compile(g, bad, err, sizeof err, &tc) && !tc);
    k3_gram_free(g);
    json_decref(bad);
    /* a type list repeating a type is refused before compiling anything twice */
    bad = json_pack("{s:[s,s], s:{}}", "type", "array", "array", "items");
    g = k3_gram_new();
    CHECK(!k3_schema_compile(g, bad, err, sizeof err, &tc) && strstr(err, "twice"), "%s", err);
    k3_gram_free(g);
    json_decref(bad);
}

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static uint64_t next(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

/* A random schema of up to `depth` levels: leaves, arrays, objects, anyOf
 * of distinct JSON types, and $refs to the definitions made so far. */
static json_t *random_schema(int depth, int n_defs) {
    int pick = (int)(next() % (depth > 0 ? 6 : 2));
    char ref[32];
    switch (pick) {
    case 0:
        return json_pack("{s:s}", "type",
                         (const char *[]){"string", "integer", "boolean"}[next() % 3]);
    case 1:
        if (!n_defs) return json_pack("{s:s}", "type", "null");
        snprintf(ref, sizeof ref, "#/$defs/d%d", (int)(next() % (uint64_t)n_defs));
        return json_pack("{s:s}", "$ref", ref);
    case 2:
        return json_pack("{s:s, s:o, s:i}", "type", "array", "items",
                         random_schema(depth - 1, n_defs), "maxItems", (int)(next() % 4));
    case 3: {
        json_t *p = json_object();
        int n = 1 + (int)(next() % 4);
        for (int i = 0; i < n; i++) {
            char key[16];
            snprintf(key, sizeof key, "p%d", i);
            json_object_set_new(p, key, random_schema(depth - 1, n_defs));
        }
        return json_pack("{s:s, s:o}", "type", "object", "properties", p);
    }
    default: {
        /* anyOf: an array alternative, an object alternative and a number */
        json_t *a =
            json_pack("{s:s, s:o}", "type", "array", "items", random_schema(depth - 1, n_defs));
        json_t *o = json_pack("{s:s, s:{s:o}}", "type", "object", "properties", "v",
                              random_schema(depth - 1, n_defs));
        return json_pack("{s:[o,o,{s:s}]}", "anyOf", a, o, "type", "number");
    }
    }
}

TEST(schema_nodes_linear_in_size) {
    size_t worst_num = 0, worst_den = 1;
    int compiled = 0;
    for (int rep = 0; rep < 300; rep++) {
        json_t *defs = json_object();
        int n_defs = 1 + (int)(next() % 12);
        for (int i = 0; i < n_defs; i++) {
            char name[16];
            snprintf(name, sizeof name, "d%d", i);
            json_object_set_new(defs, name, random_schema(3, i)); /* refs point backwards */
        }
        json_t *s = random_schema(4, n_defs);
        json_object_set_new(s, "$defs", defs);
        size_t len = json_len(s), nodes;
        int tc;
        k3_gram *g = k3_gram_new();
        compiled += compile_count(g, s, &nodes, &tc) != NULL;
        CHECK(nodes <= len / 4 + 16, "rep %d: %zu nodes for %zu bytes", rep, nodes, len);
        if (nodes * worst_den > worst_num * len) worst_num = nodes, worst_den = len;
        k3_gram_free(g);
        json_decref(s);
    }
    printf("  %d of 300 random schemas compiled; most nodes per schema byte: %zu/%zu\n", compiled,
           worst_num, worst_den);
    CHECK(compiled > 150, "most random schemas are supported (%d)", compiled);
}

int main(void) {
    RUN(schema_shared_refs_stay_small);
    RUN(schema_node_budget_refuses);
    RUN(schema_nodes_linear_in_size);
    return t_done();
}
