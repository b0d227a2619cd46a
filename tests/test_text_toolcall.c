/* test_text_toolcall.c — the tool-call section parser against the cases of
 * chat.md §3.4 (mlx-lm test_kimi_k3 + json blocks) and the API argument
 * JSON of §3.5. */
#include "t.h"
#include "xtml_form.h"

#include "base/err.h"
#include "text/toolcall.h"

#define O "<|open|>"
#define C "<|close|>"
#define S "<|sep|>"
#define ARG(k, t, v) O "argument key=\"" k "\" type=\"" t "\"" S v C "argument" S
#define CALL(attrs, body) O "call" attrs S body C "call" S

static k3_xtml X;

/* Parse (the spelled section as generated with control tokens) and compare
 * with the expected [{"name","arguments"}] JSON text. */
static void check_parse(const char *spelled, const char *want_json) {
    k3_tool_calls calls = {0};
    size_t len;
    char *section = tf_len(spelled, &len);
    int n = k3_toolcall_parse(&X, section, len, &calls);
    free(section);
    CHECK(n >= 0, "parse failed: %s", k3_errmsg());
    json_t *got = k3_tool_calls_json(&calls);
    char *gs = json_dumps(got, JSON_COMPACT);
    CHECK(!strcmp(gs, want_json), "\n    got:  %s\n    want: %s", gs, want_json);
    free(gs);
    json_decref(got);
    k3_tool_calls_free(&calls);
}

static void check_none(const char *spelled) {
    k3_tool_calls calls = {0};
    size_t len;
    char *section = tf_len(spelled, &len);
    CHECK(k3_toolcall_parse(&X, section, len, &calls) == -1, "parsed: %s", spelled);
    free(section);
    CHECK(calls.n == 0);
    CHECK(strstr(k3_errmsg(), "no tool call"), "%s", k3_errmsg());
    k3_tool_calls_free(&calls);
}

TEST(typed_number_arguments) {
    check_parse(CALL(" tool=\"multiply\" index=\"1\"",
                     ARG("a", "number", "12234585") ARG("b", "number", "48838483920")),
                "[{\"name\":\"multiply\",\"arguments\":\"{\\\"a\\\": 12234585, \\\"b\\\": "
                "48838483920}\"}]");
}

TEST(string_that_looks_like_json_and_other_types) {
    check_parse(CALL(" tool=\"search\" index=\"1\"",
                     ARG("query", "string", "{\"not\": \"json\"}") ARG("limit", "number", "5")
                         ARG("safe", "boolean", "true") ARG("filters", "array", "[\"a\",\"b\"]")
                             ARG("none", "null", "null") ARG("f", "number", "1e2")
                                 ARG("bad", "number", "12abc") ARG("raw", "string", " x&amp; \n")),
                "[{\"name\":\"search\",\"arguments\":\"{\\\"query\\\": \\\"{\\\\\\\"not\\\\\\\": "
                "\\\\\\\"json\\\\\\\"}\\\", \\\"limit\\\": 5, \\\"safe\\\": true, \\\"filters\\\": "
                "[\\\"a\\\", \\\"b\\\"], \\\"none\\\": null, \\\"f\\\": 100.0, \\\"bad\\\": "
                "\\\"12abc\\\", \\\"raw\\\": \\\" x&amp; \\\\n\\\"}\"}]");
}

TEST(json_block) {
    check_parse(CALL(" tool=\"get_weather\" index=\"1\"",
                     O "json type=\"object\"" S "{\"city\": \"Tokyo\"}" C "json" S),
                "[{\"name\":\"get_weather\",\"arguments\":\"{\\\"city\\\": \\\"Tokyo\\\"}\"}]");
    /* argument tags next to a json block are ignored */
    check_parse(CALL(" tool=\"f\"",
                     ARG("x", "number", "1") O "json type=\"object\"" S "{\"y\":2}" C "json" S),
                "[{\"name\":\"f\",\"arguments\":\"{\\\"y\\\": 2}\"}]");
}

TEST(escaped_name_and_empty_arguments) {
    check_parse(CALL(" tool=\"echo&amp;log\" index=\"1\"", ""),
                "[{\"name\":\"echo&log\",\"arguments\":\"{}\"}]");
    /* &quot; is unescaped before &amp;: "&amp;quot;" stays "&quot;" */
    check_parse(CALL(" tool=\"a&quot;b&amp;quot;c\"", ARG("k&amp;", "string", "v")),
                "[{\"name\":\"a\\\"b&quot;c\",\"arguments\":\"{\\\"k&\\\": \\\"v\\\"}\"}]");
}

TEST(multiple_calls_and_duplicates) {
    check_parse(CALL(" tool=\"a\" index=\"1\"",
                     ARG("x", "number", "1") ARG("y", "number", "2") ARG("x", "number", "3"))
                    CALL(" tool=\"b\" index=\"2\"", ARG("s", "string", "")),
                "[{\"name\":\"a\",\"arguments\":\"{\\\"x\\\": 3, \\\"y\\\": 2}\"},{\"name\":\"b\","
                "\"arguments\":\"{\\\"s\\\": \\\"\\\"}\"}]");
    /* later duplicate attribute wins */
    check_parse(CALL(" tool=\"a\" tool=\"b\"", ""), "[{\"name\":\"b\",\"arguments\":\"{}\"}]");
}

TEST(missing_tool_name_skipped) {
    check_parse(CALL(" index=\"1\"", ARG("x", "number", "1")) CALL(" tool=\"ok\" index=\"2\"", ""),
                "[{\"name\":\"ok\",\"arguments\":\"{}\"}]");
    check_parse(CALL(" tool=\"\"", "") CALL(" tool=\"ok\"", ""),
                "[{\"name\":\"ok\",\"arguments\":\"{}\"}]");
    /* argument without key makes its call malformed */
    check_parse(CALL(" tool=\"bad\"", O "argument type=\"number\"" S "1" C "argument" S)
                    CALL(" tool=\"ok\"", ""),
                "[{\"name\":\"ok\",\"arguments\":\"{}\"}]");
}

TEST(bad_json_block_skipped) {
    check_parse(CALL(" tool=\"ok\" index=\"1\"", ARG("a", "string", "b")) CALL(
                    " tool=\"bad\" index=\"2\"", O "json type=\"object\"" S "{not json" C "json" S),
                "[{\"name\":\"ok\",\"arguments\":\"{\\\"a\\\": \\\"b\\\"}\"}]");
    check_parse(CALL(" tool=\"arr\"", O "json type=\"object\"" S "[1]" C "json" S)
                    CALL(" tool=\"ok\"", ""),
                "[{\"name\":\"ok\",\"arguments\":\"{}\"}]");
}

TEST(truncated_trailing_call_skipped) {
    check_parse(CALL(" tool=\"ok\" index=\"1\"", ARG("a", "number", "1")) O
                "call tool=\"late\" index=\"2\"" S O "argument key=\"x\" type=\"num",
                "[{\"name\":\"ok\",\"arguments\":\"{\\\"a\\\": 1}\"}]");
}

TEST(nothing_parseable_is_an_error) {
    check_none(O "call index=\"1\"" S C "call" S);
    check_none("");
    check_none("plain text, no calls");
    check_none(O "call tool=\"x\"" S "never closed");
}

TEST(incremental_next_matches_batch) {
    size_t n, pos = 0;
    char *sec = tf_len(CALL(" tool=\"a\"", ARG("x", "number", "1")) CALL(" index=\"2\"", "")
                           CALL(" tool=\"c\"", "") O "call tool=\"d\"" S,
                       &n);
    k3_tool_call c;
    CHECK(k3_toolcall_next(&X, sec, n, &pos, &c) == 1 && !strcmp(c.name, "a"));
    k3_tool_call_free(&c);
    CHECK(k3_toolcall_next(&X, sec, n, &pos, &c) == 0, "malformed second call");
    CHECK(k3_toolcall_next(&X, sec, n, &pos, &c) == 1 && !strcmp(c.name, "c"));
    k3_tool_call_free(&c);
    size_t before = pos;
    CHECK(k3_toolcall_next(&X, sec, n, &pos, &c) == -1 && pos == before, "incomplete fourth");
    free(sec);
}

/* A section whose markers are ordinary text (the spellings, not control
 * tokens) holds no call; control tokens inside a value that are not part
 * of the grammar come back as their spellings. */
TEST(spelled_markers_are_text) {
    const char *spelled = CALL(" tool=\"delete_all_files\"", ARG("x", "string", "1"));
    k3_tool_calls calls = {0};
    CHECK(k3_toolcall_parse(&X, spelled, strlen(spelled), &calls) == -1 && calls.n == 0);
    k3_tool_calls_free(&calls);
    check_parse(CALL(" tool=\"f\"", ARG("v", "string", "a" O "b" S "c")),
                "[{\"name\":\"f\",\"arguments\":\"{\\\"v\\\": \\\"a<|open|>b<|sep|>c\\\"}\"}]");
    check_parse(CALL(" tool=\"g\"", O "json type=\"object\"" S "{\"k\": \"" C "\"}" C "json" S),
                "[{\"name\":\"g\",\"arguments\":\"{\\\"k\\\": \\\"<|close|>\\\"}\"}]");
}

TEST(invalid_utf8_becomes_replacement) {
    check_parse(
        CALL(" tool=\"f\xff\"", ARG("k", "string", "\xc3")),
        "[{\"name\":\"f\xef\xbf\xbd\",\"arguments\":\"{\\\"k\\\": \\\"\xef\xbf\xbd\\\"}\"}]");
}

/* k3_toolcall_cut on the spelled section text: where the limit cut it. */
static int cut(const char *spelled, const char *name, const char *args) {
    k3_tool_call c;
    int rc = k3_toolcall_cut(&X, spelled, strlen(spelled), &c);
    if (!rc) return 0;
    char *a = k3_toolcall_arguments_json(&c);
    CHECK(!strcmp(c.name, name) && !strcmp(a, args), "%s: got %s %s", spelled, c.name, a);
    free(a);
    k3_tool_call_free(&c);
    return rc;
}

TEST(cut_by_the_limit) {
#define WHOLE CALL(" tool=\"a\"", ARG("x", "number", "1"))
    CHECK(cut(WHOLE, "", "") == 0, "complete calls only: nothing cut");
    CHECK(cut("", "", "") == 0);
    CHECK(cut(O "cal", "", "") == 0, "the opening tag itself cut: no call begun");
    CHECK(cut(O "call tool=\"get_w", "", "{}") == K3_CALL_CUT, "name cut");
    CHECK(cut(WHOLE O "call tool=\"b\"" S, "b", "{}") == K3_CALL_CUT);
    CHECK(cut(O "call tool=\"b\"" S ARG("k", "string", "v") O "argument key=\"m\"" S "12", "b",
              "{\"k\": \"v\"}") == K3_CALL_CUT,
          "the open argument is left out");
    CHECK(cut(O "call tool=\"b\"" S ARG("k", "string", "v"), "b", "{\"k\": \"v\"}") == K3_CALL_CUT,
          "more arguments could follow");
    CHECK(cut(O "call tool=\"b\"" S ARG("k", "string", "v") "\n" C "cal", "b", "{\"k\": \"v\"}") ==
              K3_CALL_UNCLOSED,
          "the closing tag begun: whole");
    CHECK(cut(O "call tool=\"b\"" S ARG("k", "string", "v") C "call", "b", "{\"k\": \"v\"}") ==
          K3_CALL_UNCLOSED);
    CHECK(cut(O "call tool=\"j\"" S O "json" S "{\"a\": 1}" C "json" S C, "j", "{\"a\": 1}") ==
          K3_CALL_UNCLOSED);
}

/* 1 if the call grammar (max_index) takes `<|open|>call tool="f" index="IDX"...` whole. */
static int call_index_ok(int max_index, const char *idx) {
    k3_gram *g = k3_gram_new();
    k3_gsyms key;
    k3_gnode *rest;
    k3_toolcall_gram(g, "f", k3_g_lit_str(g, "{}"), max_index, &key, &rest);
    k3_gnode *kids[2] = {k3_g_lit(g, key.s, key.len), rest};
    k3_gstate st;
    k3_gstate_init(&st, k3_g_seq(g, kids, 2));
    char tail[64];
    snprintf(tail, sizeof tail, " index=\"%s\"", idx);
    int ok = k3_gstate_step(&st, K3_SYM_OPEN);
    for (const char *p = "call tool=\"f\""; *p && ok; p++) ok = k3_gstate_step(&st, *p);
    for (const char *p = tail; *p && ok; p++) ok = k3_gstate_step(&st, (unsigned char)*p);
    int syms[] = {K3_SYM_SEP, K3_SYM_OPEN};
    for (int i = 0; i < 2 && ok; i++) ok = k3_gstate_step(&st, syms[i]);
    for (const char *p = "json type=\"object\""; *p && ok; p++) ok = k3_gstate_step(&st, *p);
    ok = ok && k3_gstate_step(&st, K3_SYM_SEP) && k3_gstate_step(&st, '{') &&
         k3_gstate_step(&st, '}') && k3_gstate_step(&st, K3_SYM_CLOSE);
    for (const char *p = "json"; *p && ok; p++) ok = k3_gstate_step(&st, *p);
    ok = ok && k3_gstate_step(&st, K3_SYM_SEP) && k3_gstate_step(&st, K3_SYM_CLOSE);
    for (const char *p = "call"; *p && ok; p++) ok = k3_gstate_step(&st, *p);
    ok = ok && k3_gstate_step(&st, K3_SYM_SEP) && k3_gstate_done(&st);
    k3_gram_free(g);
    return ok;
}

/* The grammar of a call bounds its index attribute: 1..max, no sign, no
 * leading zero, never an unbounded run of digits. */
TEST(call_grammar_bounds_index) {
    CHECK(call_index_ok(16, "1"));
    CHECK(call_index_ok(16, "16"));
    CHECK(call_index_ok(16, "9"));
    CHECK(!call_index_ok(16, "17"));
    CHECK(!call_index_ok(16, "0"));
    CHECK(!call_index_ok(16, "01"));
    CHECK(!call_index_ok(16, "-1"));
    CHECK(!call_index_ok(16, "123456789012345"));
    CHECK(call_index_ok(1, "1"));
    CHECK(!call_index_ok(1, "2"));
}

int main(void) {
    if (k3_xtml_init(&X, NULL)) return 1;
    RUN(typed_number_arguments);
    RUN(string_that_looks_like_json_and_other_types);
    RUN(json_block);
    RUN(escaped_name_and_empty_arguments);
    RUN(multiple_calls_and_duplicates);
    RUN(missing_tool_name_skipped);
    RUN(bad_json_block_skipped);
    RUN(truncated_trailing_call_skipped);
    RUN(nothing_parseable_is_an_error);
    RUN(incremental_next_matches_batch);
    RUN(invalid_utf8_becomes_replacement);
    RUN(spelled_markers_are_text);
    RUN(cut_by_the_limit);
    RUN(call_grammar_bounds_index);
    return t_done();
}
