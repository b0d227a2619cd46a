/* test_text_grammar.c — the grammar matcher and the JSON Schema compiler
 * (text/grammar.h, text/jsonschema.h): accepted and refused texts, refused
 * schemas, and random walks (every step a random accepted symbol, closed
 * within a budget by k3_gstate_rem) that must always end in JSON that
 * jansson parses, with the shape the schema asks for. */
#include <jansson.h>

#include "gram_walk.h"
#include "t.h"
#include "text/grammar.h"
#include "text/jsonschema.h"

static k3_gnode *compile(k3_gram *g, const char *schema, char *err, size_t cap) {
    json_t *s = json_loads(schema, JSON_DECODE_ANY, NULL);
    if (!s) {
        snprintf(err, cap, "bad test schema");
        return NULL;
    }
    k3_gnode *n = k3_schema_compile(g, s, err, cap, NULL);
    json_decref(s);
    return n;
}

/* 1 if text is matched completely by root. */
static int matches(const k3_gnode *root, const char *text) {
    k3_gstate st;
    k3_gstate_init(&st, root);
    for (const char *p = text; *p; p++)
        if (!k3_gstate_step(&st, (unsigned char)*p)) return 0;
    /* a trailing number is completed by any non-number symbol: use EOM */
    if (!k3_gstate_done(&st) && !k3_gstate_step(&st, K3_SYM_EOM)) return 0;
    return 1;
}

/* Wrap a value grammar the way the server does: value then <|end_of_msg|>. */
static k3_gnode *wrap(k3_gram *g, k3_gnode *v) {
    k3_gnode *kids[2] = {v, k3_g_lit_ctl(g, "{E}")};
    return k3_g_seq(g, kids, 2);
}

static int accepts(const char *schema, const char *text) {
    k3_gram *g = k3_gram_new();
    char err[512];
    k3_gnode *n = compile(g, schema, err, sizeof err);
    int ok = n && matches(wrap(g, n), text);
    k3_gram_free(g);
    return ok;
}

TEST(grammar_accepts) {
    const char *obj = "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\"},"
                      "\"age\":{\"type\":\"integer\"},\"tags\":{\"type\":\"array\",\"items\":"
                      "{\"type\":\"string\"}}},\"required\":[\"name\",\"tags\"],"
                      "\"additionalProperties\":false}";
    CHECK(accepts(obj, "{\"name\":\"Ann\",\"age\":42,\"tags\":[]}"));
    CHECK(accepts(obj, "{\"name\": \"Ann\", \"tags\": [\"a\", \"b\\n\\u00e9\"]}"));
    CHECK(accepts(obj, "{\"name\":\"\xe5\x9b\x9b\xf0\x9f\x9a\x80\",\"tags\":[]}"));
    CHECK(!accepts(obj, "{\"tags\":[],\"name\":\"x\"}"), "keys in declaration order");
    CHECK(!accepts(obj, "{\"name\":\"x\"}"), "required tags");
    CHECK(!accepts(obj, "{\"name\":\"x\",\"tags\":[],\"extra\":1}"));
    CHECK(!accepts(obj, "{\"name\":\"x\",\"age\":1.5,\"tags\":[]}"), "integer");
    CHECK(!accepts(obj, "{\"name\":\"\xc3\",\"tags\":[]}"), "cut UTF-8");
    CHECK(!accepts(obj, "{\"name\":\"\xed\xa0\x80\",\"tags\":[]}"), "surrogate");
    CHECK(!accepts(obj, "{\"name\":\"a\x01\",\"tags\":[]}"), "control character");
    CHECK(!accepts("{\"type\":\"object\"}", "{\"a\\u0000\":1}"),
          "\\u0000 (jansson: no NUL in keys)");
    CHECK(!accepts("{\"type\":\"string\"}", "\"\\u0000\""), "\\u0000");
    CHECK(accepts("{\"type\":\"object\"}", "{\"a\\u0001\":1,\"\\u0100\":2}"));
    CHECK(accepts("{\"enum\":[\"red\",\"green\",1,12,null]}", "\"green\""));
    CHECK(accepts("{\"enum\":[\"red\",\"green\",1,12,null]}", "1"));
    CHECK(accepts("{\"enum\":[\"red\",\"green\",1,12,null]}", "12"));
    CHECK(!accepts("{\"enum\":[\"red\",\"green\",1,12,null]}", "123"));
    CHECK(accepts("{\"const\":{\"a\":[1,2]}}", "{\"a\":[1,2]}"));
    CHECK(accepts("{\"type\":[\"string\",\"null\"]}", "null"));
    CHECK(accepts("{\"anyOf\":[{\"type\":\"number\"},{\"type\":\"boolean\"}]}", "-0.5e+3"));
    CHECK(!accepts("{\"type\":\"number\"}", "01"));
    CHECK(accepts("{\"type\":\"number\",\"minimum\":0}", "0.5"));
    CHECK(!accepts("{\"type\":\"number\",\"minimum\":0}", "-1"));
    CHECK(accepts("{\"type\":\"string\",\"minLength\":2,\"maxLength\":3}", "\"ab\""));
    CHECK(!accepts("{\"type\":\"string\",\"minLength\":2,\"maxLength\":3}", "\"a\""));
    CHECK(!accepts("{\"type\":\"string\",\"minLength\":2,\"maxLength\":3}", "\"abcd\""));
    CHECK(accepts("{\"type\":\"string\",\"format\":\"date\"}", "\"2024-02-28\""));
    CHECK(!accepts("{\"type\":\"string\",\"format\":\"date\"}", "\"2024-13-01\""));
    CHECK(accepts("{\"type\":\"string\",\"format\":\"uuid\"}",
                  "\"123e4567-e89b-12d3-a456-426614174000\""));
    CHECK(accepts("{\"type\":\"array\",\"items\":{\"type\":\"integer\"},\"minItems\":1,"
                  "\"maxItems\":2}",
                  "[1, 2]"));
    CHECK(!accepts("{\"type\":\"array\",\"items\":{\"type\":\"integer\"},\"minItems\":1,"
                   "\"maxItems\":2}",
                   "[1,2,3]"));
    CHECK(!accepts("{\"type\":\"array\",\"items\":{\"type\":\"integer\"},\"minItems\":1}", "[]"));
    CHECK(accepts("{\"type\":\"object\"}", "{\"x\":[{\"y\":null},true,\"s\",-1.5e3]}"));
    CHECK(accepts("{\"$defs\":{\"P\":{\"type\":\"object\",\"properties\":{\"x\":{\"type\":"
                  "\"number\"}},\"required\":[\"x\"]}},\"type\":\"object\",\"properties\":"
                  "{\"p\":{\"$ref\":\"#/$defs/P\"}},\"required\":[\"p\"]}",
                  "{\"p\":{\"x\":1}}"));
    CHECK(accepts("true", "[1,{\"a\":\"b\"}]"));
}

TEST(grammar_refuses_schemas) {
    static const char *const bad[] = {
        "{\"type\":\"string\",\"pattern\":\"(a)\\\\1\"}",
        "{\"type\":\"string\",\"format\":\"idn-email\"}",
        "{\"type\":\"integer\",\"maximum\":5,\"minimum\":6}",
        "{\"type\":\"number\",\"multipleOf\":0.1}",
        "{\"anyOf\":[{\"type\":\"object\"},{\"type\":\"object\",\"properties\":{}}]}",
        "{\"$defs\":{\"N\":{\"type\":\"object\",\"properties\":{\"n\":{\"$ref\":\"#/$defs/N\"}}}},"
        "\"$ref\":\"#/$defs/N\"}",
        "{\"type\":\"object\",\"required\":[\"a\"]}",
        "{\"not\":{}}",
        "{\"type\":\"array\",\"uniqueItems\":true}",
        "{\"type\":\"array\",\"items\":[{\"type\":\"string\"}]}",
        "false",
        "{\"$ref\":\"http://example.com/s.json\"}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        k3_gram *g = k3_gram_new();
        char err[512];
        k3_gnode *n = compile(g, bad[i], err, sizeof err);
        CHECK(!n && err[0], "schema %zu compiled: %s", i, bad[i]);
        k3_gram_free(g);
    }
    k3_gram *g = k3_gram_new();
    char err[512];
    compile(
        g,
        "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"string\",\"pattern\":\"(?!x)\"}}}",
        err, sizeof err);
    CHECK(strstr(err, "pattern") && strstr(err, "properties.a"), "message: %s", err);
    k3_gram_free(g);
}

static uint64_t rng = 88172645463325252ull;

TEST(grammar_random_walks_close_in_budget) {
    static const char *const schemas[] = {
        "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\"},\"n\":{\"type\":"
        "\"integer\"},\"ok\":{\"type\":\"boolean\"},\"kids\":{\"type\":\"array\",\"items\":"
        "{\"type\":\"object\",\"properties\":{\"id\":{\"type\":\"number\"}},\"required\":"
        "[\"id\"]}}},\"required\":[\"name\",\"n\",\"kids\"]}",
        "{\"type\":\"object\"}",
        "{\"anyOf\":[{\"type\":\"string\",\"format\":\"date-time\"},{\"type\":\"null\"},"
        "{\"type\":\"array\",\"items\":{\"enum\":[\"a\",\"b\",3]},\"minItems\":2}]}",
    };
    int bad = 0, walks = 0;
    for (size_t i = 0; i < sizeof schemas / sizeof *schemas; i++) {
        for (int budget = 40; budget <= 220; budget += 9) {
            for (int rep = 0; rep < 20; rep++) {
                k3_gram *g = k3_gram_new();
                char err[512];
                k3_gnode *n = compile(g, schemas[i], err, sizeof err);
                CHECK(n, "%s", err);
                if (!n) {
                    k3_gram_free(g);
                    continue;
                }
                char *text = gram_walk(wrap(g, n), budget, &rng);
                walks++;
                json_error_t je;
                json_t *doc = text ? json_loads(text, JSON_DECODE_ANY, &je) : NULL;
                if (!doc) {
                    if (bad++ < 5)
                        printf("  schema %zu budget %d: %s\n", i, budget, text ? text : "(stuck)");
                } else if (i == 0) {
                    CHECK(json_is_string(json_object_get(doc, "name")) &&
                              json_is_integer(json_object_get(doc, "n")) &&
                              json_is_array(json_object_get(doc, "kids")),
                          "%s", text);
                }
                json_decref(doc);
                free(text);
                k3_gram_free(g);
            }
        }
    }
    CHECK(bad == 0, "%d of %d walks did not give JSON", bad, walks);
}

int main(void) {
    RUN(grammar_accepts);
    RUN(grammar_refuses_schemas);
    RUN(grammar_random_walks_close_in_budget);
    return t_done();
}
