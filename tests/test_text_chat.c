/* test_text_chat.c — the XTML renderer against the worked examples of
 * chat.md §2.8 (byte for byte), its variants and error cases, and the
 * control-token id layout of the encoded prompts. */
#include "t.h"

#include <jansson.h>

#include "base/err.h"
#include "text/chat.h"
#include "text/pyjson.h"
#include "text/tokenizer.h"

#define O "<|open|>"
#define C "<|close|>"
#define S "<|sep|>"
#define E "<|end_of_msg|>"
#define END C "message" S E

#define EFFORT_BODY(e)                                                                             \
    "`thinking_effort` guides on how much to think in your thinking channel (not including the "   \
    "response channel), supported values include `low`, `medium`, `high`, and `max`.\nNow the "    \
    "system is invoked with `thinking_effort=" e "`."
#define EFFORT(e) O "message role=\"system\" type=\"thinking-effort\"" S EFFORT_BODY(e) END
#define EFFORT_MAX EFFORT("max")
#define GEN_THINK O "message role=\"assistant\"" S O "think" S
#define GEN_RESP O "message role=\"assistant\"" S O "response" S

static k3_xtml X;

/* Render a request given as JSON text; NULL on error (message in k3_errmsg). */
static char *render(const char *req_json) {
    json_error_t jerr;
    json_t *req = json_loads(req_json, JSON_ALLOW_NUL, &jerr);
    if (!req) {
        printf("  bad test JSON: %s\n", jerr.text);
        return NULL;
    }
    size_t len;
    char *s = k3_chat_render(&X, req, &len);
    json_decref(req);
    return s;
}

static int same(const char *got, const char *want) {
    if (!got) {
        printf("  render failed: %s\n", k3_errmsg());
        return 0;
    }
    if (!strcmp(got, want)) return 1;
    size_t i = 0;
    while (got[i] && got[i] == want[i]) i++;
    printf("  first difference at byte %zu\n    got:  %.120s\n    want: %.120s\n", i, got + i,
           want + i);
    return 0;
}

static void check_render(const char *req, const char *want) {
    char *got = render(req);
    CHECK(same(got, want));
    free(got);
}

static void check_error(const char *req, const char *needle) {
    char *got = render(req);
    CHECK(!got, "rendered although invalid: %s", req);
    CHECK(strstr(k3_errmsg(), needle), "error '%s' lacks '%s'", k3_errmsg(), needle);
    free(got);
}

TEST(example1_single_user_turn) {
    check_render("{\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}]}",
                 EFFORT_MAX O "message role=\"user\"" S "Hi" END GEN_THINK);
}

#define EX2_MESSAGES                                                                               \
    "[{\"role\":\"system\",\"content\":\"You are "                                                 \
    "helpful\"},{\"role\":\"user\",\"content\":\"Hi\"},"                                           \
    "{\"role\":\"assistant\",\"content\":\"Hello!\",\"reasoning_content\":\"think a bit\"},"       \
    "{\"role\":\"user\",\"content\":\"Bye\"}]"

TEST(example2_history_with_reasoning) {
    check_render("{\"messages\":" EX2_MESSAGES "}",
                 EFFORT_MAX O "message role=\"system\"" S "You are helpful" END O
                              "message role=\"user\"" S "Hi" END O "message role=\"assistant\"" S O
                              "think" S "think a bit" C "think" S O "response" S "Hello!" C
                              "response" S END O "message role=\"user\"" S "Bye" END GEN_THINK);
}

TEST(example3_thinking_off) {
    const char *want =
        O "message role=\"system\"" S "You are helpful" END O "message role=\"user\"" S "Hi" END O
          "message role=\"assistant\"" S O "response" S "Hello!" C "response" S END O
          "message role=\"user\"" S "Bye" END GEN_RESP;
    check_render("{\"chat_template_kwargs\":{\"thinking\":false},\"messages\":" EX2_MESSAGES "}",
                 want);
    check_render("{\"thinking\":{\"type\":\"disabled\"},\"messages\":" EX2_MESSAGES "}", want);
    check_render("{\"enable_thinking\":false,\"messages\":" EX2_MESSAGES "}", want);
    /* effort is ignored (not even validated) with thinking off */
    check_render("{\"chat_template_kwargs\":{\"thinking\":false,\"thinking_effort\":\"medium\"},"
                 "\"messages\":" EX2_MESSAGES "}",
                 want);
}

TEST(assistant_without_reasoning_keeps_empty_think) {
    check_render("{\"add_generation_prompt\":false,\"chat_template_kwargs\":{\"thinking_effort\":"
                 "null},\"messages\":[{\"role\":\"assistant\",\"content\":\"Hello!\"}]}",
                 O "message role=\"assistant\"" S O "think" S C "think" S O "response" S "Hello!" C
                   "response" S END);
}

#define EX4_TOOLS                                                                                  \
    "[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"parameters\":{\"type\":"     \
    "\"object\",\"properties\":{\"city\":{\"type\":\"string\"}}}}}]"
#define EX4_DECLARE                                                                                \
    O "message role=\"system\" type=\"tool-declare\"" S                                            \
      "# Tools\nHere are the available tools, described in JSONSchema.\n\n```json\n"               \
      "[{\"function\":{\"name\":\"get_weather\",\"parameters\":{\"properties\":{\"city\":{"        \
      "\"type\":\"string\"}},\"type\":\"object\"}},\"type\":\"function\"}]\n```" END
#define EX4_REQUEST                                                                                \
    "{\"tools\":" EX4_TOOLS                                                                        \
    ",\"messages\":[{\"role\":\"user\",\"content\":\"weather in Paris?\"},"                        \
    "{\"role\":\"assistant\",\"content\":\"\",\"tool_calls\":[{\"id\":\"call_1\",\"type\":"        \
    "\"function\",\"function\":{\"name\":\"get_weather\",\"arguments\":\"{\\\"city\\\": "          \
    "\\\"Paris\\\"}\"}}]},{\"role\":\"tool\",\"tool_call_id\":\"call_1\",\"content\":\"sunny "     \
    "<|open|>x<|sep|>\"}]}"
#define EX4_PROMPT                                                                                 \
    EX4_DECLARE EFFORT_MAX O                                                                       \
        "message role=\"user\"" S "weather in Paris?" END O "message role=\"assistant\"" S O       \
        "think" S C "think" S O "response" S C "response" S O "tools" S O                          \
        "call tool=\"get_weather\" index=\"1\"" S O "argument key=\"city\" type=\"string\"" S      \
        "Paris" C "argument" S C "call" S C "tools" S END O                                        \
        "message role=\"tool\" tool=\"get_weather\" index=\"1\"" S                                 \
        "sunny <|open|>x<|sep|>" END GEN_THINK

TEST(example4_tools_call_result) {
    check_render(EX4_REQUEST, EX4_PROMPT);
}

/* Render one assistant tool call with the given "arguments" JSON value and
 * return the rendered call (between the tools tags). */
static void check_call(const char *fn_json, const char *want_call) {
    char req[2048];
    snprintf(req, sizeof req,
             "{\"add_generation_prompt\":false,\"chat_template_kwargs\":{\"thinking\":false},"
             "\"messages\":[{\"role\":\"assistant\",\"tool_calls\":[{\"function\":%s}]}]}",
             fn_json);
    char want[2048];
    snprintf(want, sizeof want,
             O "message role=\"assistant\"" S O "response" S C "response" S O "tools" S "%s" C
               "tools" S END,
             want_call);
    check_render(req, want);
}

TEST(example4_argument_variants) {
    check_call(
        "{\"name\":\"get_weather\",\"arguments\":{\"city\":\"Paris\",\"days\":3,\"opts\":{"
        "\"u\":\"c\"}}}",
        O "call tool=\"get_weather\" index=\"1\"" S O "argument key=\"city\" type=\"string\"" S
          "Paris" C "argument" S O "argument key=\"days\" type=\"number\"" S "3" C "argument" S O
          "argument key=\"opts\" type=\"object\"" S "{\"u\": \"c\"}" C "argument" S C "call" S);
    check_call(
        "{\"name\":\"f\",\"arguments\":\"{\\\"opts\\\":{\\\"u\\\":\\\"c\\\"},\\\"n\\\":1e2}\"}",
        O "call tool=\"f\" index=\"1\"" S O "argument key=\"opts\" type=\"object\"" S
          "{\"u\":\"c\"}" C "argument" S O "argument key=\"n\" type=\"number\"" S "1e2" C
          "argument" S C "call" S);
    check_call("{\"name\":\"f\",\"arguments\":\"{\\\"a\\\": 1\"}",
               O "call tool=\"f\" index=\"1\"" S O "json type=\"object\"" S "{\"a\": 1" C "json" S C
                 "call" S);
    check_call("{\"name\":\"a&b\\\"c\",\"arguments\":{\"k\\\"&\":\"v\"}}",
               O "call tool=\"a&amp;b&quot;c\" index=\"1\"" S O
                 "argument key=\"k&quot;&amp;\" type=\"string\"" S "v" C "argument" S C "call" S);
}

TEST(argument_value_types_and_dumps) {
    /* dict values: booleans before numbers, json.dumps default separators,
     * Python float repr, ensure_ascii=False, empty string -> no text */
    check_call("{\"name\":\"f\",\"arguments\":{\"b\":true,\"z\":null,\"x\":1.5,\"y\":1e-5,"
               "\"w\":[1,\"two\",{\"k\":2.0}],\"e\":\"\",\"u\":\"\\u00e9\"}}",
               O "call tool=\"f\" index=\"1\"" S O "argument key=\"b\" type=\"boolean\"" S "true" C
                 "argument" S O "argument key=\"z\" type=\"null\"" S "null" C "argument" S O
                 "argument key=\"x\" type=\"number\"" S "1.5" C "argument" S O
                 "argument key=\"y\" type=\"number\"" S "1e-05" C "argument" S O
                 "argument key=\"w\" type=\"array\"" S "[1, \"two\", {\"k\": 2.0}]" C "argument" S O
                 "argument key=\"e\" type=\"string\"" S C "argument" S O
                 "argument key=\"u\" type=\"string\"" S "\xc3\xa9" C "argument" S C "call" S);
    /* string arguments: literal slices, decoded strings, duplicates kept,
     * trailing text after the object ignored, NaN accepted */
    check_call("{\"name\":\"f\",\"arguments\":\" {\\\"a\\\" : [1,2] , \\\"s\\\":\\\"x\\\\ny\\\","
               "\\\"a\\\":NaN} trailing\"}",
               O "call tool=\"f\" index=\"1\"" S O "argument key=\"a\" type=\"array\"" S "[1,2]" C
                 "argument" S O "argument key=\"s\" type=\"string\"" S "x\ny" C "argument" S O
                 "argument key=\"a\" type=\"number\"" S "NaN" C "argument" S C "call" S);
    check_call("{\"name\":\"f\",\"arguments\":\"{}\"}",
               O "call tool=\"f\" index=\"1\"" S C "call" S);
    check_call("{\"name\":\"f\",\"arguments\":\"\"}", O "call tool=\"f\" index=\"1\"" S C "call" S);
    check_call("{\"name\":\"f\",\"arguments\":null}", O "call tool=\"f\" index=\"1\"" S C "call" S);
    check_call("{\"name\":\"f\",\"arguments\":\"[1]\"}",
               O "call tool=\"f\" index=\"1\"" S O "json type=\"object\"" S "[1]" C "json" S C
                 "call" S);
    check_call("{\"name\":\"f\",\"arguments\":\"{\\\"a\\\":01}\"}",
               O "call tool=\"f\" index=\"1\"" S O "json type=\"object\"" S "{\"a\":01}" C
                 "json" S C "call" S);
}

TEST(example5_tool_choice_response_format) {
    check_render(
        "{\"tool_choice\":\"required\",\"response_format\":{\"type\":\"json_object\"},\"chat_"
        "template_kwargs\":{\"thinking_effort\":null},\"messages\":[]}",
        O "message role=\"system\" type=\"tool-choice\"" S
          "The system is invoked with `tool_choice=required`.\nYou MUST call tools in the next "
          "message." END O "message role=\"system\" type=\"response-format\"" S
          "The system is invoked with `response_format=json_object`.\nYour response must be raw "
          "JSON data without markdown code blocks (```json) or any additional formatting." END
              GEN_THINK);
    check_render("{\"tool_choice\":\"none\",\"response_format\":\"text\",\"chat_template_kwargs\":{"
                 "\"thinking\":false},\"messages\":[]}",
                 O "message role=\"system\" type=\"tool-choice\"" S
                   "The system is invoked with `tool_choice=none`.\nYou MUST NOT call any tools in "
                   "the next message." END GEN_RESP);
    check_render("{\"tool_choice\":{\"type\":\"function\",\"function\":{\"name\":\"f\"}},\"tool_"
                 "choice_unused\":1,\"chat_template_kwargs\":{\"thinking\":false},\"messages\":[]}",
                 GEN_RESP);
}

TEST(json_schema_response_format) {
    const char *pre = O "message role=\"system\" type=\"response-format\"" S
                        "The system is invoked with `response_format=json_schema`.\nYour response "
                        "must be raw JSON data without markdown code blocks (```json) or any "
                        "additional formatting.\nThe JSON data must match the following schema:\n"
                        "```json\n";
    char want[1024];
    /* keys sorted recursively: {"a":..,"b":..}; arrays keep order */
    snprintf(want, sizeof want, "%s{\"a\":{\"x\":true,\"y\":[2,1]},\"b\":1}\n```" END GEN_RESP,
             pre);
    check_render("{\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"n\","
                 "\"schema\":{\"b\":1,\"a\":{\"y\":[2,1],\"x\":true}}}},\"chat_template_kwargs\":{"
                 "\"thinking\":false},\"messages\":[]}",
                 want);
    snprintf(want, sizeof want, "%snull\n```" END GEN_RESP, pre);
    check_render("{\"response_format\":{\"type\":\"json_schema\"},\"chat_template_kwargs\":{"
                 "\"thinking\":false},\"messages\":[]}",
                 want);
}

TEST(example6_named_user) {
    check_render("{\"chat_template_kwargs\":{\"thinking\":false},\"add_generation_prompt\":false,"
                 "\"messages\":[{\"role\":\"user\",\"name\":\".hidden\",\"content\":\"Hi\"}]}",
                 O "message role=\"user\" name=\".hidden\"" S "Hi" END);
    /* falsy name -> no attribute; non-string name -> str() */
    check_render("{\"chat_template_kwargs\":{\"thinking\":false},\"add_generation_prompt\":false,"
                 "\"messages\":[{\"role\":\"user\",\"name\":\"\",\"content\":\"a\"},{\"role\":"
                 "\"system\",\"name\":7,\"content\":\"b\"}]}",
                 O "message role=\"user\"" S "a" END O "message role=\"system\" name=\"7\"" S
                   "b" END);
}

TEST(efforts_and_generation_prompt) {
    check_render("{\"reasoning_effort\":\"low\",\"messages\":[]}", EFFORT("low") GEN_THINK);
    check_render("{\"reasoning_effort\":\"medium\",\"messages\":[]}", EFFORT("high") GEN_THINK);
    check_render("{\"reasoning_effort\":\"minimal\",\"messages\":[]}", EFFORT("low") GEN_THINK);
    check_render("{\"reasoning_effort\":\"xhigh\",\"messages\":[]}", EFFORT("max") GEN_THINK);
    /* "none": thinking off, even against an explicit thinking: true */
    check_render("{\"reasoning_effort\":\"none\",\"messages\":[]}", GEN_RESP);
    check_render("{\"thinking\":true,\"reasoning_effort\":\"none\",\"messages\":[]}", GEN_RESP);
    check_render("{\"chat_template_kwargs\":{\"thinking_effort\":\"high\"},\"reasoning_effort\":"
                 "\"low\",\"messages\":[]}",
                 EFFORT("high") GEN_THINK);
    check_render("{\"add_generation_prompt\":false,\"messages\":[]}", EFFORT_MAX);
    check_error("{\"chat_template_kwargs\":{\"thinking_effort\":\"medium\"},\"messages\":[]}",
                "thinking_effort");
    check_error("{\"reasoning_effort\":\"huge\",\"messages\":[]}", "reasoning_effort");
}

TEST(content_parts_and_images) {
    check_render(
        "{\"chat_template_kwargs\":{\"thinking\":false},\"add_generation_prompt\":false,"
        "\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"first "
        "\"},{\"type\":\"image_url\",\"image_url\":{\"url\":\"x\"}},{\"type\":\"text\","
        "\"text\":\"second\"}]},{\"role\":\"user\",\"content\":null}]}",
        O "message role=\"user\"" S "first <|kimi_image_placeholder|>second" END O
          "message role=\"user\"" S END);
    check_error("{\"messages\":[{\"role\":\"user\",\"content\":[{\"text\":\"a\"}]}]}",
                "messages[0].content[0].type");
    check_error("{\"messages\":[{\"role\":\"user\",\"content\":[\"a\"]}]}",
                "messages[0].content[0]");
    check_error("{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\"}]}]}",
                "content[0].text");
    check_error("{\"messages\":[{\"role\":\"user\",\"content\":5}]}", "messages[0].content");
}

TEST(dynamic_tools_system_message) {
    check_render(
        "{\"chat_template_kwargs\":{\"thinking\":false},\"add_generation_prompt\":false,"
        "\"messages\":[{\"role\":\"system\",\"content\":\"ignored\",\"tools\":[{\"b\":1,"
        "\"a\":\"\\u00fc/\\n\"}]}]}",
        O "message role=\"system\" type=\"tool-declare\"" S
          "## New Tools Available\nThe system dynamically extends the toolset via "
          "lazy-loading.\nYou have access to all existing and extended tools.\nHere are the "
          "specs for the extended tools.\n\n```json\n[{\"a\":\"\xc3\xbc/\\n\",\"b\":1}]\n```" END);
    /* static declaration precedes a leading system message */
    check_render(
        "{\"tools\":" EX4_TOOLS ",\"chat_template_kwargs\":{\"thinking\":false},\"add_"
        "generation_prompt\":false,\"messages\":[{\"role\":\"system\",\"content\":\"s\"}]}",
        EX4_DECLARE O "message role=\"system\"" S "s" END);
}

TEST(tool_results_reordered_and_named) {
    const char *head =
        "{\"chat_template_kwargs\":{\"thinking\":false},\"add_generation_prompt\":"
        "false,\"messages\":[{\"role\":\"assistant\",\"tool_calls\":[{\"id\":\"a\","
        "\"function\":{\"name\":\"fa\"}},{\"id\":\"b\",\"function\":{\"name\":\"fb\"}"
        "}]},";
    const char *asst = O "message role=\"assistant\"" S O "response" S C "response" S O "tools" S O
                         "call tool=\"fa\" index=\"1\"" S C "call" S O
                         "call tool=\"fb\" index=\"2\"" S C "call" S C "tools" S END;
    char req[1024], want[2048];
    /* all ids match: sorted by call position, names taken from the calls */
    snprintf(req, sizeof req,
             "%s{\"role\":\"tool\",\"tool_call_id\":\"b\",\"name\":\"zz\",\"content\":\"B\"},"
             "{\"role\":\"tool\",\"tool_call_id\":\"a\",\"content\":\"A\"}]}",
             head);
    snprintf(want, sizeof want,
             "%s" O "message role=\"tool\" tool=\"fa\" index=\"1\"" S "A" END O
             "message role=\"tool\" tool=\"fb\" index=\"2\"" S "B" END,
             asst);
    check_render(req, want);
    /* one id unknown: run left as given; names from "name" or by position */
    snprintf(req, sizeof req,
             "%s{\"role\":\"tool\",\"tool_call_id\":\"b\",\"name\":\"zz\",\"content\":\"B\"},"
             "{\"role\":\"tool\",\"tool_call_id\":\"q\",\"content\":\"A\"}]}",
             head);
    snprintf(want, sizeof want,
             "%s" O "message role=\"tool\" tool=\"zz\" index=\"1\"" S "B" END O
             "message role=\"tool\" tool=\"fb\" index=\"2\"" S "A" END,
             asst);
    check_render(req, want);
    check_error("{\"messages\":[{\"role\":\"tool\",\"content\":\"x\"}]}", "messages[0]");
    /* ids that differ only after a U+0000 are different ids */
    snprintf(req, sizeof req,
             "{\"chat_template_kwargs\":{\"thinking\":false},\"add_generation_prompt\":false,"
             "\"messages\":[{\"role\":\"assistant\",\"tool_calls\":[{\"id\":\"x\\u0000a\","
             "\"function\":{\"name\":\"fa\"}},{\"id\":\"x\\u0000b\",\"function\":{\"name\":"
             "\"fb\"}}]},{\"role\":\"tool\",\"tool_call_id\":\"x\\u0000b\",\"content\":\"B\"},"
             "{\"role\":\"tool\",\"tool_call_id\":\"x\\u0000a\",\"content\":\"A\"}]}");
    snprintf(want, sizeof want,
             "%s" O "message role=\"tool\" tool=\"fa\" index=\"1\"" S "A" END O
             "message role=\"tool\" tool=\"fb\" index=\"2\"" S "B" END,
             asst);
    check_render(req, want);
}

TEST(bad_requests_name_the_field) {
    check_error("{}", "messages");
    check_error("[]", "request");
    check_error("{\"messages\":{}}", "messages");
    check_error("{\"messages\":[3]}", "messages[0]");
    check_error("{\"messages\":[{\"content\":\"x\"}]}", "messages[0].role");
    check_error("{\"messages\":[{\"role\":\"developer\",\"content\":\"x\"}]}", "developer");
    check_error("{\"messages\":[{\"role\":\"assistant\",\"tool_calls\":[{\"function\":{}}]}]}",
                "messages[0].tool_calls[0].function.name");
    check_error("{\"messages\":[{\"role\":\"assistant\",\"tool_calls\":[{\"function\":{\"name\":"
                "\"f\",\"arguments\":3}}]}]}",
                "arguments");
    check_error("{\"tools\":{},\"messages\":[]}", "tools");
    check_error("{\"chat_template_kwargs\":{\"thinking\":1},\"messages\":[]}", "thinking");
}

/* ---- ids: control segments become control ids, text stays bytes ----------- */

static const int32_t EFFORT_IDS[] = {
    163587, 2778,   6244,   878,    14062, 1,      1798,  878,   130400, 59991, 470,    1,
    163589, 63,     130400, 123074, 470,   63,     28560, 418,   1632,   2455,  308,    2704,
    306,    651,    9545,   8491,   347,   2976,   3411,  276,   4503,   8491,  904,    9141,
    4661,   3867,   1268,   1332,   5713,  1268,   50004, 5713,  1268,   19421, 5713,   316,
    1268,   5354,   16518,  10048,  276,   2403,   387,   42070, 472,    1268,  130400, 123074,
    470,    105281, 11369,  163588, 2778,  163589, 163586};
static const int32_t EX1_TAIL[] = {163587, 2778, 6244,   878,    2482,   1,     163589, 18699,
                                   163588, 2778, 163589, 163586, 163587, 2778,  6244,   878,
                                   69702,  1,    163589, 163587, 39964,  163589};
static const int32_t EX4_TAIL[] = {
    163587, 2778,   6244,   878,    69702,  1,      163589, 163587, 39964,  163589, 163588, 39964,
    163589, 163587, 12092,  163589, 163588, 12092,  163589, 163587, 25385,  163589, 163587, 10257,
    4453,   878,    618,    21055,  2800,   1,      4002,   878,    16,     1,      163589, 163587,
    47185,  2355,   878,    37666,  1,      1798,   878,    2033,   1,      163589, 113476, 163588,
    47185,  163589, 163588, 10257,  163589, 163588, 25385,  163589, 163588, 2778,   163589, 163586,
    163587, 2778,   6244,   878,    20960,  1,      4453,   878,    618,    21055,  2800,   1,
    4002,   878,    16,     1,      163589, 82,     38975,  22652,  4454,   91,     29,     87,
    27,     91,     40433,  91,     29,     163588, 2778,   163589, 163586, 163587, 2778,   6244,
    878,    69702,  1,      163589, 163587, 39964,  163589};

/* The control ids (>= 163584) of a vector, in order. */
static size_t control_ids(const int32_t *v, size_t n, int32_t *out) {
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        if (v[i] >= 163584) out[m++] = v[i];
    return m;
}

static void check_ids(const char *req_json, const int32_t *const *parts, const size_t *lens,
                      size_t nparts) {
    k3_tokenizer *tok = k3_tok_byte_level(163840);
    CHECK(tok != NULL, "%s", k3_errmsg());
    if (!tok) return;
    json_t *req = json_loads(req_json, 0, NULL);
    k3_ids ids = {0};
    CHECK(k3_chat_encode(tok, req, &ids) == 0, "%s", k3_errmsg());
    int32_t want[1024], got[1024];
    size_t nw = 0;
    for (size_t p = 0; p < nparts; p++) nw += control_ids(parts[p], lens[p], want + nw);
    size_t ng = ids.n <= 4096 ? control_ids(ids.ids, ids.n, got) : 0;
    CHECK(ng == nw, "control ids: got %zu want %zu", ng, nw);
    for (size_t i = 0; i < ng && i < nw; i++) CHECK(got[i] == want[i], "control id %zu", i);
    /* decoding with specials kept gives back the rendered prompt */
    size_t dl, rl;
    char *dec = k3_tok_decode_bytes(tok, ids.ids, ids.n, 0, &dl);
    char *ren = k3_chat_render(&X, req, &rl);
    CHECK(dec && ren && dl == rl && !memcmp(dec, ren, rl), "decode(encode(prompt)) != prompt");
    free(dec);
    free(ren);
    k3_ids_free(&ids);
    json_decref(req);
    k3_tok_free(tok);
}

TEST(ids_example1_control_layout) {
    const int32_t *parts[] = {EFFORT_IDS, EX1_TAIL};
    size_t lens[] = {sizeof EFFORT_IDS / 4, sizeof EX1_TAIL / 4};
    check_ids("{\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}]}", parts, lens, 2);
}

TEST(ids_example4_control_layout_no_injection) {
    /* declare: open, sep (body is text), close, sep, eom */
    static const int32_t declare[] = {163587, 163589, 163588, 163589, 163586};
    static const int32_t user[] = {163587, 163589, 163588, 163589, 163586};
    const int32_t *parts[] = {declare, EFFORT_IDS, user, EX4_TAIL};
    size_t lens[] = {5, sizeof EFFORT_IDS / 4, 5, sizeof EX4_TAIL / 4};
    check_ids(EX4_REQUEST, parts, lens, 4);
}

/* ---- spellings come from the tokenizer's control table ------------------- */

static const char B64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/* A 256-byte ranks file: every single byte, rank = byte value. */
static char *byte_ranks(size_t *len) {
    static char buf[256 * 12];
    size_t n = 0;
    for (int b = 0; b < 256; b++)
        n += (size_t)sprintf(buf + n, "%c%c== %d\n", B64[b >> 2], B64[(b & 3) << 4], b);
    *len = n;
    return buf;
}

TEST(spellings_from_tokenizer_config) {
    size_t rl;
    char *ranks = byte_ranks(&rl);
    /* the K3 <|open|> slot (block + 3) renamed; the others keep K3 names */
    const char *cfg = "{\"added_tokens_decoder\":{\"259\":{\"content\":\"<|begin|>\",\"special\":"
                      "false},\"260\":{\"content\":\"<|close|>\",\"special\":false},\"261\":{"
                      "\"content\":\"<|sep|>\",\"special\":false},\"258\":{\"content\":\"<|end_"
                      "of_msg|>\",\"special\":true}}}";
    k3_tokenizer *tok = k3_tok_from_memory(ranks, rl, cfg, strlen(cfg), "test");
    CHECK(tok != NULL, "%s", k3_errmsg());
    if (!tok) return;
    k3_xtml x;
    CHECK(k3_xtml_init(&x, tok) == 0, "%s", k3_errmsg());
    CHECK(!strcmp(x.ctrl[K3_XC_OPEN], "<|begin|>") && x.ctrl_id[K3_XC_OPEN] == 259);
    CHECK(x.ctrl_id[K3_XC_SEP] == 261 && x.ctrl_id[K3_XC_EOM] == 258);
    CHECK(!strcmp(x.marker[K3_XM_THINK_OPEN], "<|begin|>think<|sep|>"), "%s",
          x.marker[K3_XM_THINK_OPEN]);
    json_t *req = json_loads("{\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}],\"chat_"
                             "template_kwargs\":{\"thinking\":false}}",
                             0, NULL);
    size_t len;
    char *p = k3_chat_render(&x, req, &len);
    CHECK(p &&
              !strcmp(p, "<|begin|>message role=\"user\"<|sep|>Hi<|close|>message<|sep|><|end_of_"
                         "msg|><|begin|>message role=\"assistant\"<|sep|><|begin|>response<|sep|>"),
          "%s", p ? p : k3_errmsg());
    k3_ids ids = {0};
    CHECK(k3_chat_encode(tok, req, &ids) == 0 && ids.n > 0 && ids.ids[0] == 259);
    k3_ids_free(&ids);
    free(p);
    json_decref(req);
    k3_tok_free(tok);
}

/* Segments are encoded separately, so BPE never merges across them
 * (chat.md §1.6): with merges for `="` and `.h`, name=".hidden" gives
 * `="` then `.h`..., while one string would pre-tokenize `=".` + `hidden`. */
TEST(segments_encoded_separately) {
    static char ranks[256 * 12 + 64];
    size_t rl;
    const char *base = byte_ranks(&rl);
    memcpy(ranks, base, rl);
    rl += (size_t)sprintf(ranks + rl, "PSI= 256\nLmg= 257\n"); /* `="`, `.h` */
    k3_tokenizer *tok = k3_tok_from_memory(ranks, rl, NULL, 0, "test ranks");
    CHECK(tok != NULL, "%s", k3_errmsg());
    if (!tok) return;
    json_t *req = json_loads("{\"chat_template_kwargs\":{\"thinking\":false},\"add_generation_"
                             "prompt\":false,\"messages\":[{\"role\":\"user\",\"name\":\".hidden\","
                             "\"content\":\"Hi\"}]}",
                             0, NULL);
    k3_ids ids = {0};
    CHECK(k3_chat_encode(tok, req, &ids) == 0, "%s", k3_errmsg());
    /* <|open|> message ` role` `="` user `"` ` name` `="` `.h`idden `"` <|sep|> ... */
    int32_t open = k3_tok_special_id(tok, "<|open|>");
    CHECK(open == 258 + 3 && ids.n > 0 && ids.ids[0] == open, "open id %d", open);
    size_t seen = 0;
    for (size_t i = 0; i + 1 < ids.n; i++)
        if (ids.ids[i] == 256 && ids.ids[i + 1] == 257) seen++;
    CHECK(seen == 1, "`=\"` followed by `.h` %zu times", seen);
    int32_t *flat;
    size_t nflat;
    CHECK(k3_tok_encode(tok, " name=\".hidden\"", 15, 0, &flat, &nflat) == 0);
    CHECK(nflat >= 3 && flat[5] == 256 && flat[6] == '.', "one string merges differently");
    free(flat);
    k3_ids_free(&ids);
    json_decref(req);
    k3_tok_free(tok);
}

/* ---- Python-compatible JSON (pyjson.h) ------------------------------------ */

TEST(python_float_repr) {
    static const struct {
        double v;
        const char *want;
    } cases[] = {{0.1, "0.1"},
                 {1e16, "1e+16"},
                 {1e15, "1000000000000000.0"},
                 {1e-5, "1e-05"},
                 {0.0001, "0.0001"},
                 {1.5e-7, "1.5e-07"},
                 {123456789012345678.0, "1.2345678901234568e+17"},
                 {-0.0, "-0.0"},
                 {5e-324, "5e-324"},
                 {1.7976931348623157e308, "1.7976931348623157e+308"},
                 {100.0, "100.0"},
                 {1.0, "1.0"},
                 {12345.678, "12345.678"},
                 {1.0 / 3, "0.3333333333333333"},
                 {1e22, "1e+22"},
                 {-1.25e-10, "-1.25e-10"},
                 {9007199254740993.0, "9007199254740992.0"}};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char out[40];
        k3_pyfloat_repr(cases[i].v, out);
        CHECK(!strcmp(out, cases[i].want), "repr(%.17g): got %s want %s", cases[i].v, out,
              cases[i].want);
    }
}

TEST(python_json_dumps_styles) {
    json_t *v =
        json_loads("{\"b\":[1,{\"z\":null,\"a\":true}],\"a\":\"\\u001f\\u007f\\u2028\\\"\\\\/"
                   "\\u00e9\",\"c\":1.0}",
                   0, NULL);
    char *compact = k3_pyjson_dumps(v, K3_PYJSON_COMPACT_SORTED, NULL);
    char *dflt = k3_pyjson_dumps(v, K3_PYJSON_DEFAULT, NULL);
    CHECK(!strcmp(compact,
                  "{\"a\":\"\\u001f\x7f\xe2\x80\xa8\\\"\\\\/\xc3\xa9\",\"b\":[1,{\"a\":true,"
                  "\"z\":null}],\"c\":1.0}"),
          "%s", compact);
    CHECK(!strcmp(dflt,
                  "{\"b\": [1, {\"z\": null, \"a\": true}], \"a\": \"\\u001f\x7f\xe2\x80\xa8\\\""
                  "\\\\/\xc3\xa9\", \"c\": 1.0}"),
          "%s", dflt);
    free(compact);
    free(dflt);
    json_decref(v);
}

TEST(python_json_scan) {
    static const struct {
        const char *src;
        int ok;
        size_t end;
    } cases[] = {{"\"a\\u00e9\\ud83d\\ude00\"x", 1, 21},
                 {"-0.5e+3,", 1, 7},
                 {"01", 1, 1},
                 {"1.", 1, 1},
                 {"1e", 1, 1},
                 {"-Infinity]", 1, 9},
                 {"[1, [2, {\"a\": {}}]]", 1, 19},
                 {"[1,]", 0, 0},
                 {"{\"a\" 1}", 0, 0},
                 {"\"\\x\"", 0, 0},
                 {"\"open", 0, 0},
                 {"tru", 0, 0},
                 {"\"raw\ttab\"", 1, 9},
                 {"-", 0, 0}};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        k3_pyvalue v;
        size_t pos = 0;
        int rc = k3_pyjson_scan(cases[i].src, strlen(cases[i].src), &pos, &v);
        CHECK((rc == 0) == cases[i].ok, "scan('%s') rc %d", cases[i].src, rc);
        if (rc == 0) CHECK(pos == cases[i].end, "scan('%s') end %zu", cases[i].src, pos);
        k3_buf_free(&v.str);
    }
    k3_pyvalue v;
    size_t pos = 0;
    const char *s = "\"\\ud800x\\u00e9\"";
    CHECK(k3_pyjson_scan(s, strlen(s), &pos, &v) == 0 && !strcmp(v.str.s, "\xef\xbf\xbdx\xc3\xa9"),
          "lone surrogate -> U+FFFD");
    k3_buf_free(&v.str);
}

TEST(lone_surrogates_become_replacement) {
    const char *src =
        "{\"messages\":[{\"role\":\"user\",\"content\":\"a\\ud800b\\ud83d\\ude00c\\\\ud800"
        "\\udc00\"}],\"add_generation_prompt\":false,\"chat_template_kwargs\":{"
        "\"thinking\":false}}";
    json_error_t err;
    json_t *req = k3_pyjson_loads(src, strlen(src), &err);
    CHECK(req != NULL, "%s", err.text);
    size_t len;
    char *p = req ? k3_chat_render(&X, req, &len) : NULL;
    CHECK(p && strstr(p, "a\xef\xbf\xbd"
                         "b\xf0\x9f\x98\x80"
                         "c\\ud800\xef\xbf\xbd<|close|>"),
          "%s", p ? p : "(null)");
    free(p);
    json_decref(req);
    CHECK(k3_pyjson_loads("{\"a\":", 5, &err) == NULL);
}

int main(void) {
    if (k3_xtml_init(&X, NULL)) return 1;
    RUN(example1_single_user_turn);
    RUN(example2_history_with_reasoning);
    RUN(example3_thinking_off);
    RUN(assistant_without_reasoning_keeps_empty_think);
    RUN(example4_tools_call_result);
    RUN(example4_argument_variants);
    RUN(argument_value_types_and_dumps);
    RUN(example5_tool_choice_response_format);
    RUN(json_schema_response_format);
    RUN(example6_named_user);
    RUN(efforts_and_generation_prompt);
    RUN(content_parts_and_images);
    RUN(dynamic_tools_system_message);
    RUN(tool_results_reordered_and_named);
    RUN(bad_requests_name_the_field);
    RUN(ids_example1_control_layout);
    RUN(ids_example4_control_layout_no_injection);
    RUN(spellings_from_tokenizer_config);
    RUN(segments_encoded_separately);
    RUN(python_float_repr);
    RUN(python_json_dumps_styles);
    RUN(python_json_scan);
    RUN(lone_surrogates_become_replacement);
    return t_done();
}
