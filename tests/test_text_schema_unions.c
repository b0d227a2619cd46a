/* test_text_schema_unions.c — anyOf / oneOf of object schemas
 * (text/jsonschema_union.c), records (additionalProperties with
 * propertyNames) and their refusals: accepted and refused texts, and random
 * walks whose every result must be an instance of exactly the alternative
 * its leading property names. */
#include <jansson.h>
#include <string.h>

#include "gram_walk.h"
#include "schema_check.h"
#include "t.h"
#include "text/grammar.h"
#include "text/jsonschema.h"

/* Refused with a message containing want (and too_complex as given). */
static int refused(const char *schema, const char *want, int too_complex) {
    k3_gram *g = k3_gram_new();
    char err[512];
    int tc = -1;
    k3_gnode *n = sch_compile(g, schema, err, sizeof err, &tc);
    k3_gram_free(g);
    if (n || !strstr(err, want) || tc != too_complex)
        printf("  %s: %s (too_complex %d)\n", schema, n ? "accepted" : err, tc);
    return !n && strstr(err, want) && tc == too_complex;
}

static uint64_t rng = 0x9E3779B97F4A7C15ull;

static int walks_ok(const char *schema, int (*check)(const json_t *), int budget) {
    k3_gram *g = k3_gram_new();
    char err[512];
    k3_gnode *n = sch_compile(g, schema, err, sizeof err, NULL);
    int bad = 0, seen = 0;
    if (!n) printf("  refused %s: %s\n", schema, err), bad = 1;
    for (int rep = 0; n && rep < 300; rep++) {
        char *t = gram_walk(sch_wrap(g, n), budget, &rng);
        json_t *d = t ? json_loads(t, JSON_DECODE_ANY, NULL) : NULL;
        int r = d ? check(d) : 0;
        if (!r && bad++ < 3) printf("  %s: bad walk %s\n", schema, t ? t : "(stuck)");
        seen |= r;
        json_decref(d);
        free(t);
    }
    k3_gram_free(g);
    if (n && (seen & 3) != 3) printf("  %s: walks reached alternatives %d only\n", schema, seen);
    return bad == 0 && (seen & 3) == 3;
}

static size_t cps(const char *s) { /* code points */
    size_t n = 0;
    for (; s && *s; s++) n += ((unsigned char)*s & 0xC0) != 0x80;
    return n;
}

static const char *str(const json_t *o, const char *k) {
    return json_string_value(json_object_get(o, k));
}

/* zod: z.discriminatedUnion("kind", [{kind:"a", x:number}, {kind:"b", y:string}]) */
static const char *const DISC =
    "{\"oneOf\":[{\"type\":\"object\",\"properties\":{\"x\":{\"type\":\"number\"},\"kind\":{"
    "\"type\":\"string\",\"const\":\"a\"}},\"required\":[\"kind\",\"x\"],"
    "\"additionalProperties\":false},{\"type\":\"object\",\"properties\":{\"kind\":{\"type\":"
    "\"string\",\"const\":\"b\"},\"y\":{\"type\":\"string\",\"maxLength\":4}},\"required\":["
    "\"kind\",\"y\"],\"additionalProperties\":false}]}";

/* 1: alternative a, 2: b, 0: neither or both */
static int disc_ok(const json_t *d) {
    const char *k = str(d, "kind");
    int a =
        k && !strcmp(k, "a") && json_is_number(json_object_get(d, "x")) && json_object_size(d) == 2;
    int b =
        k && !strcmp(k, "b") && str(d, "y") && cps(str(d, "y")) <= 4 && json_object_size(d) == 2;
    return a ? 1 : b ? 2 : 0;
}

/* Pydantic: Union[Cat, Dog] with no discriminator, through $defs */
static const char *const LONE =
    "{\"$defs\":{\"Cat\":{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\","
    "\"maxLength\":3},\"meows\":{\"type\":\"integer\",\"minimum\":0,\"maximum\":9}},\"required\":["
    "\"name\",\"meows\"]},\"Dog\":{\"type\":\"object\",\"properties\":{\"name\":{\"type\":"
    "\"string\",\"maxLength\":3},\"barks\":{\"type\":\"boolean\"},\"age\":{\"type\":\"integer\"}},"
    "\"required\":[\"name\",\"barks\"]}},\"type\":\"object\",\"properties\":{\"pet\":{\"anyOf\":[{"
    "\"$ref\":\"#/$defs/Cat\"},{\"$ref\":\"#/$defs/Dog\"},{\"type\":\"null\"}]}},\"required\":["
    "\"pet\"]}";

/* 1 cat, 2 dog, 4 null */
static int lone_ok(const json_t *d) {
    const json_t *p = json_object_get(d, "pet");
    if (json_is_null(p)) return 4;
    json_t *m = json_object_get(p, "meows"), *b = json_object_get(p, "barks");
    int cat = cps(str(p, "name")) <= 3 && str(p, "name") && json_is_integer(m) &&
              json_integer_value(m) >= 0 && json_integer_value(m) <= 9 && !b;
    int dog = str(p, "name") && json_is_boolean(b) && !m;
    return cat ? 1 : dog ? 2 : 0;
}

TEST(schema_object_unions) {
    CHECK(walks_ok(DISC, disc_ok, 60));
    CHECK(sch_accepts(DISC, "{\"kind\":\"b\",\"y\":\"ab\"}"));
    CHECK(sch_accepts(DISC, "{\"kind\":\"a\", \"x\":-1.5}"));
    CHECK(!sch_accepts(DISC, "{\"kind\":\"a\",\"y\":\"ab\"}"));
    CHECK(!sch_accepts(DISC, "{\"kind\":\"c\",\"x\":1}"));
    CHECK(!sch_accepts(DISC, "{\"x\":1,\"kind\":\"a\"}")); /* the discriminator leads */
    CHECK(walks_ok(LONE, lone_ok, 80));
    CHECK(sch_accepts(LONE, "{\"pet\":{\"meows\":3,\"name\":\"tom\"}}"));
    CHECK(sch_accepts(LONE, "{\"pet\":{\"barks\":true,\"name\":\"rex\",\"age\":4}}"));
    CHECK(sch_accepts(LONE, "{\"pet\":null}"));
    CHECK(!sch_accepts(LONE, "{\"pet\":{\"name\":\"tom\",\"meows\":3}}"));
    /* enum discriminators and Pydantic's discriminator annotation */
    CHECK(sch_accepts(
        "{\"oneOf\":[{\"properties\":{\"t\":{\"enum\":[\"x\",\"y\"]}},\"required\":[\"t\"]},"
        "{\"properties\":{\"t\":{\"enum\":[\"z\"]},\"v\":{\"type\":\"null\"}}}],"
        "\"discriminator\":{\"propertyName\":\"t\"}}",
        "{\"t\":\"z\",\"v\":null}"));
    /* refusals name what is missing */
    CHECK(refused("{\"anyOf\":[{\"properties\":{\"a\":{}},\"required\":[\"a\"]},{\"properties\":{"
                  "\"a\":{}}}]}",
                  "cannot be told apart", 0));
    CHECK(refused("{\"oneOf\":[{\"properties\":{\"a\":{},\"b\":{}}},{\"properties\":{\"a\":{},"
                  "\"c\":{}}}]}",
                  "could also match", 0));
    { /* the discriminator's values are bounded: a 400 naming the limit */
        json_t *en = json_array();
        for (int i = 0; i < 300; i++) json_array_append_new(en, json_sprintf("v%d", i));
        json_t *s = json_pack("{s:[{s:{s:{s:o}}}, {s:{s:{s:[s]}}}]}", "anyOf", "properties", "t",
                              "enum", en, "properties", "t", "enum", "w");
        char *text = json_dumps(s, JSON_COMPACT);
        CHECK(refused(text, "more than 256 values (the limit)", 1));
        free(text);
        json_decref(s);
    }
    CHECK(refused("{\"$defs\":{\"A\":{\"properties\":{\"a\":{\"anyOf\":[{\"$ref\":\"#/$defs/A\"},{"
                  "\"$ref\":\"#/$defs/B\"}]}}},\"B\":{\"properties\":{\"b\":{}}}},\"$ref\":\"#/$"
                  "defs/A\"}",
                  "recursive", 0));
}

static int record_ok(const json_t *d) {
    const char *k;
    json_t *v;
    int r = 1;
    json_object_foreach((json_t *)d, k, v) {
        r &= json_is_integer(v) && cps(k) >= 1 && cps(k) <= 3;
    }
    return r ? 3 : 0;
}

TEST(schema_records) {
    const char *rec = "{\"type\":\"object\",\"propertyNames\":{\"type\":\"string\",\"minLength\":1,"
                      "\"maxLength\":3},\"additionalProperties\":{\"type\":\"integer\"}}";
    CHECK(walks_ok(rec, record_ok, 60));
    CHECK(sch_accepts(rec, "{\"ab\":1,\"c\":-2}"));
    CHECK(!sch_accepts(rec, "{\"abcd\":1}"));
    CHECK(!sch_accepts(rec, "{\"\":1}"));
    CHECK(sch_accepts("{\"type\":\"object\",\"propertyNames\":{\"type\":\"string\"},"
                      "\"additionalProperties\":{\"type\":\"integer\"}}",
                      "{\"\":1}"));
    /* zod's record over an enum: every key, required */
    const char *en = "{\"type\":\"object\",\"propertyNames\":{\"type\":\"string\",\"enum\":[\"x\","
                     "\"y\"]},\"additionalProperties\":{\"type\":\"string\"},\"required\":[\"x\","
                     "\"y\"]}";
    CHECK(sch_accepts(en, "{\"x\":\"a\",\"y\":\"b\"}"));
    CHECK(!sch_accepts(en, "{\"x\":\"a\"}"));
    CHECK(!sch_accepts(en, "{\"x\":\"a\",\"z\":\"b\"}"));
    CHECK(refused("{\"type\":\"object\",\"propertyNames\":{\"type\":\"integer\"}}",
                  "must describe strings", 0));
    CHECK(refused("{\"properties\":{\"a\":{}},\"propertyNames\":{\"maxLength\":1}}",
                  "propertyNames", 0));
}

int main(void) {
    RUN(schema_object_unions);
    RUN(schema_records);
    return t_done();
}
