/* test_serve_request.c — the server's request parser/validator (serve/request.h)
 * and its OpenAI response shapes (serve/openai.h). */
#include <jansson.h>

#include "serve/openai.h"
#include "serve/request.h"
#include "t.h"

static const serve_limits LIM = {.model_name = "tiny", .max_tokens_cap = 100, .test_mode = 0};

static int parse(const char *body, serve_kind kind, serve_req *q, serve_err *e) {
    return serve_req_parse(body, strlen(body), kind, &LIM, q, e);
}

/* The request must fail with this status, naming this param. */
static void expect_err(const char *body, int status, const char *param) {
    serve_req q;
    serve_err e;
    memset(&e, 0, sizeof e);
    int rc = parse(body, SERVE_CHAT, &q, &e);
    CHECK(rc == -1, "accepted: %s", body);
    if (rc == 0) {
        serve_req_free(&q);
        return;
    }
    CHECK(e.status == status, "%s: status %d, want %d (%s)", body, e.status, status, e.message);
    CHECK(!strcmp(e.param, param), "%s: param '%s', want '%s'", body, e.param, param);
    CHECK(e.message[0], "no message");
}

TEST(chat_defaults) {
    serve_req q;
    serve_err e;
    CHECK(!parse("{\"model\":\"tiny\",\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}]}",
                 SERVE_CHAT, &q, &e),
          "%s", e.message);
    CHECK(json_array_size(q.messages) == 1);
    CHECK(q.thinking == 1 && q.stream == 0 && q.max_tokens == 100);
    CHECK_NEAR(q.temperature, 1.0, 0);
    CHECK_NEAR(q.top_p, 1.0, 0);
    CHECK(q.top_k == 0 && q.n_stop == 0 && !q.has_seed && !q.force_tokens);
    serve_req_free(&q);
}

TEST(chat_all_fields) {
    const char *body =
        "{\"messages\":[{\"role\":\"system\",\"content\":\"S\"},{\"role\":\"user\",\"content\":"
        "[{\"type\":\"text\",\"text\":\"a\"},{\"type\":\"text\",\"text\":\"b\"}]},"
        "{\"role\":\"assistant\",\"content\":null,\"reasoning_content\":\"r\",\"tool_calls\":[{"
        "\"id\":\"c1\",\"type\":\"function\",\"function\":{\"name\":\"f\",\"arguments\":\"{}\"}}]},"
        "{\"role\":\"tool\",\"tool_call_id\":\"c1\",\"content\":\"ok\"}],"
        "\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\"}}],\"tool_choice\":"
        "\"auto\","
        "\"temperature\":0.5,\"top_p\":0.9,\"top_k\":40,\"min_p\":0.05,\"repetition_penalty\":1.1,"
        "\"seed\":7,\"max_tokens\":1000,\"max_completion_tokens\":20,\"stop\":[\"x\",\"yy\"],"
        "\"n\":3,\"stream\":true,\"stream_options\":{\"include_usage\":true},\"logprobs\":true,"
        "\"top_logprobs\":3,\"response_format\":{\"type\":\"json_object\"},"
        "\"chat_template_kwargs\":{\"thinking\":false},\"unknown_field\":{\"x\":[1]},"
        "\"user\":null}";
    serve_req q;
    serve_err e;
    CHECK(!parse(body, SERVE_CHAT, &q, &e), "%s", e.message);
    CHECK(q.tools && q.tool_choice && q.response_format);
    CHECK_NEAR(q.temperature, 0.5, 0);
    CHECK_NEAR(q.top_p, 0.9, 1e-12);
    CHECK_NEAR(q.min_p, 0.05, 1e-12);
    CHECK_NEAR(q.repetition_penalty, 1.1, 1e-12);
    CHECK(q.top_k == 40 && q.has_seed && q.seed == 7);
    CHECK(q.max_tokens == 20, "max_completion_tokens wins: %d", q.max_tokens);
    CHECK(q.n_stop == 2 && !strcmp(q.stop[1], "yy"));
    CHECK(q.n == 3, "n: %d", q.n);
    CHECK(q.stream && q.include_usage && q.logprobs && q.top_logprobs == 3);
    CHECK(q.thinking == 0);
    serve_req_free(&q);
}

TEST(max_tokens_clamped_and_thinking_forms) {
    serve_req q;
    serve_err e;
    CHECK(!parse("{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"max_tokens\":5000,"
                 "\"thinking\":{\"type\":\"disabled\"},\"stop\":\"END\"}",
                 SERVE_CHAT, &q, &e),
          "%s", e.message);
    CHECK(q.max_tokens == 100 && q.thinking == 0 && q.n_stop == 1);
    serve_req_free(&q);
    CHECK(!parse("{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"thinking\":true,"
                 "\"max_tokens\":16.0}",
                 SERVE_CHAT, &q, &e),
          "%s", e.message);
    CHECK(q.thinking == 1 && q.max_tokens == 16);
    serve_req_free(&q);
}

TEST(bad_requests_name_the_field) {
    expect_err("{", 400, "");
    expect_err("[]", 400, "");
    expect_err("{\"messages\":[]}", 400, "messages");
    expect_err("{}", 400, "messages");
    expect_err("{\"messages\":\"hi\"}", 400, "messages");
    expect_err("{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"model\":\"gpt-4\"}", 404,
               "model");
    expect_err("{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"model\":3}", 400, "model");
    expect_err("{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"max_tokens\":0}", 400,
               "max_tokens");
    expect_err("{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"max_tokens\":-5}", 400,
               "max_tokens");
    expect_err("{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"max_tokens\":\"9\"}", 400,
               "max_tokens");
    expect_err("{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"temperature\":\"hot\"}",
               400, "temperature");
    expect_err("{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"temperature\":3}", 400,
               "temperature");
    expect_err("{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"stream\":1}", 400,
               "stream");
    expect_err("{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"n\":9}", 400, "n");
    expect_err("{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"stop\":[1]}", 400,
               "stop[0]");
    expect_err("{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"stop\":[\"a\",\"b\",\"c\","
               "\"d\",\"e\"]}",
               400, "stop");
    expect_err("{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"stream_options\":{"
               "\"include_usage\":\"yes\"}}",
               400, "stream_options.include_usage");
    expect_err("{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"tools\":{}}", 400, "tools");
    expect_err("{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"tools\":[{\"type\":"
               "\"function\"}]}",
               400, "tools[0].function");
    expect_err("{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"tool_choice\":\"maybe\"}",
               400, "tool_choice");
    expect_err("{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"response_format\":{"
               "\"type\":\"yaml\"}}",
               400, "response_format.type");
    expect_err("{\"messages\":[{\"role\":\"wizard\",\"content\":\"x\"}]}", 400, "messages[0].role");
    expect_err("{\"messages\":[{\"role\":\"user\"}]}", 400, "messages[0].content");
    expect_err("{\"messages\":[{\"role\":\"user\",\"content\":5}]}", 400, "messages[0].content");
    expect_err("{\"messages\":[{\"role\":\"user\",\"content\":\"a\"},{\"role\":\"user\","
               "\"content\":[{\"type\":\"text\",\"text\":7}]}]}",
               400, "messages[1].content[0].text");
    expect_err("{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"image_url\"}]}]}", 400,
               "messages[0].content[0]");
    expect_err("{\"messages\":[{\"role\":\"assistant\",\"content\":\"\",\"tool_calls\":[{"
               "\"function\":{}}]}]}",
               400, "messages[0].tool_calls[0].function.name");
    expect_err("{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"chat_template_kwargs\":{"
               "\"thinking\":\"no\"}}",
               400, "chat_template_kwargs.thinking");
    expect_err("{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"k3_test_force_text\":"
               "\"hi\"}",
               400, "k3_test_force_text");
}

/* logit_bias / penalties parsed; every OpenAI field k3 does not implement is
 * refused by name, never silently accepted. */
TEST(openai_fields_implemented_or_refused) {
    serve_limits lim = LIM;
    lim.vocab = 1000;
    const char *b = "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"logit_bias\":{\"5\":"
                    "-100,\"999\":2.5},\"presence_penalty\":0.5,\"frequency_penalty\":-1.25,"
                    "\"user\":\"u\",\"metadata\":{\"a\":\"b\"},\"store\":false,\"n\":1,"
                    "\"parallel_tool_calls\":true,\"modalities\":[\"text\"]}";
    serve_req q;
    serve_err e;
    CHECK(!serve_req_parse(b, strlen(b), SERVE_CHAT, &lim, &q, &e), "%s", e.message);
    CHECK(q.n_logit_bias == 2);
    for (int i = 0; i < q.n_logit_bias; i++)
        CHECK((q.logit_bias[i].id == 5 && q.logit_bias[i].bias == -100.0f) ||
              (q.logit_bias[i].id == 999 && q.logit_bias[i].bias == 2.5f));
    CHECK_NEAR(q.presence_penalty, 0.5, 0);
    CHECK_NEAR(q.frequency_penalty, -1.25, 0);
    serve_req_free(&q);
    const char *m = "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],";
    const struct {
        const char *tail, *param;
    } bad[] = {{"\"logit_bias\":{\"1000\":1}}", "logit_bias"},
               {"\"logit_bias\":{\"01\":1}}", "logit_bias"},
               {"\"logit_bias\":{\"-1\":1}}", "logit_bias"},
               {"\"logit_bias\":{\"7\":101}}", "logit_bias"},
               {"\"logit_bias\":{\"7\":\"x\"}}", "logit_bias"},
               {"\"logit_bias\":[1]}", "logit_bias"},
               {"\"presence_penalty\":2.5}", "presence_penalty"},
               {"\"frequency_penalty\":\"x\"}", "frequency_penalty"},
               {"\"n\":9}", "n"},
               {"\"audio\":{\"voice\":\"x\"}}", "audio"},
               {"\"prediction\":{\"type\":\"content\"}}", "prediction"},
               {"\"functions\":[]}", "functions"},
               {"\"parallel_tool_calls\":false}", "parallel_tool_calls"},
               {"\"store\":true}", "store"},
               {"\"modalities\":[\"text\",\"audio\"]}", "modalities"},
               {"\"web_search_options\":{}}", "web_search_options"}};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        char body[512];
        snprintf(body, sizeof body, "%s%s", m, bad[i].tail);
        memset(&e, 0, sizeof e);
        int rc = serve_req_parse(body, strlen(body), SERVE_CHAT, &lim, &q, &e);
        CHECK(rc == -1 && e.status == 400 && !strcmp(e.param, bad[i].param), "%s: %d %s %s", body,
              rc, e.param, e.message);
        if (!rc) serve_req_free(&q);
    }
    const struct {
        const char *body, *param;
    } comp[] = {{"{\"prompt\":\"a\",\"echo\":true}", "echo"},
                {"{\"prompt\":\"a\",\"suffix\":\"b\"}", "suffix"},
                {"{\"prompt\":\"a\",\"best_of\":2}", "best_of"},
                {"{\"prompt\":\"a\",\"n\":2,\"best_of\":2}", "n"}};
    for (size_t i = 0; i < sizeof comp / sizeof *comp; i++) {
        int rc =
            serve_req_parse(comp[i].body, strlen(comp[i].body), SERVE_COMPLETION, &lim, &q, &e);
        CHECK(rc == -1 && !strcmp(e.param, comp[i].param), "%s: %s", comp[i].body, e.param);
        if (!rc) serve_req_free(&q);
    }
    b = "{\"prompt\":\"a\",\"echo\":false,\"suffix\":\"\",\"best_of\":1,\"logit_bias\":{\"3\":1}}";
    CHECK(!serve_req_parse(b, strlen(b), SERVE_COMPLETION, &lim, &q, &e), "%s", e.message);
    CHECK(q.n_logit_bias == 1);
    serve_req_free(&q);
}

TEST(invalid_utf8_and_bad_escapes) {
    expect_err("{\"messages\":[{\"role\":\"user\",\"content\":\"\xff\"}]}", 400, "");
    expect_err("{\"messages\":[{\"role\":\"user\",\"content\":\"\xc0\xaf\"}]}", 400, "");
    expect_err("{\"messages\":[{\"role\":\"user\",\"content\":\"\xed\xa0\x80\"}]}", 400, "");
    expect_err("{\"messages\":[{\"role\":\"user\",\"content\":\"\\ud800\"}]}", 400, "");
    CHECK(serve_utf8_valid("h\xc3\xa9 \xe4\xbd\xa0 \xf0\x9f\x9a\x80", 12));
    CHECK(!serve_utf8_valid("\xe4\xbd", 2));
    CHECK(!serve_utf8_valid("\xf4\x90\x80\x80", 4)); /* > U+10FFFF */
}

TEST(completions_prompt) {
    serve_req q;
    serve_err e;
    CHECK(!parse("{\"prompt\":\"Once\",\"logprobs\":2}", SERVE_COMPLETION, &q, &e), "%s",
          e.message);
    CHECK(q.prompt_len == 4 && !strcmp(q.prompt, "Once") && q.logprobs && q.top_logprobs == 2);
    serve_req_free(&q);
    CHECK(!parse("{\"prompt\":[\"x\"]}", SERVE_COMPLETION, &q, &e), "%s", e.message);
    serve_req_free(&q);
    CHECK(parse("{\"prompt\":7}", SERVE_COMPLETION, &q, &e) == -1 && !strcmp(e.param, "prompt"));
    CHECK(parse("{}", SERVE_COMPLETION, &q, &e) == -1 && !strcmp(e.param, "prompt"));
}

TEST(test_mode_fields) {
    serve_limits lim = LIM;
    lim.test_mode = 1;
    serve_req q;
    serve_err e;
    const char *b = "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],"
                    "\"k3_test_force_tokens\":[1,2,3]}";
    CHECK(!serve_req_parse(b, strlen(b), SERVE_CHAT, &lim, &q, &e), "%s", e.message);
    CHECK(json_array_size(q.force_tokens) == 3);
    serve_req_free(&q);
    b = "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"k3_test_force_tokens\":[-1]}";
    CHECK(serve_req_parse(b, strlen(b), SERVE_CHAT, &lim, &q, &e) == -1);
}

TEST(error_json_shape) {
    serve_err e;
    serve_err_set(&e, 400, NULL, "max_tokens", "invalid_value", "bad %d", 3);
    char *s = serve_err_json(&e);
    json_t *d = json_loads(s, 0, NULL);
    CHECK(d != NULL);
    json_t *er = json_object_get(d, "error");
    CHECK(!strcmp(json_string_value(json_object_get(er, "message")), "bad 3"));
    CHECK(!strcmp(json_string_value(json_object_get(er, "type")), "invalid_request_error"));
    CHECK(!strcmp(json_string_value(json_object_get(er, "param")), "max_tokens"));
    CHECK(!strcmp(json_string_value(json_object_get(er, "code")), "invalid_value"));
    json_decref(d);
    free(s);
}

/* Strip "data: " and the blank line; parse. */
static json_t *chunk_json(char *s) {
    CHECK(!strncmp(s, "data: ", 6) && strlen(s) > 8 && !strcmp(s + strlen(s) - 2, "\n\n"));
    json_t *d = json_loads(s + 6, JSON_DISABLE_EOF_CHECK, NULL);
    free(s);
    return d;
}

TEST(response_shapes) {
    serve_resp r;
    serve_resp_init(&r, SERVE_CHAT, "tiny", 1);
    json_t *d = chunk_json(serve_resp_role_chunk(&r));
    json_t *ch = json_array_get(json_object_get(d, "choices"), 0);
    CHECK(!strcmp(json_string_value(json_object_get(d, "object")), "chat.completion.chunk"));
    CHECK(!strcmp(json_string_value(json_object_get(json_object_get(ch, "delta"), "role")),
                  "assistant"));
    json_decref(d);
    d = chunk_json(serve_resp_text(&r, "reasoning", "th", 2));
    json_t *delta = json_object_get(json_array_get(json_object_get(d, "choices"), 0), "delta");
    CHECK(!strcmp(json_string_value(json_object_get(delta, "reasoning_content")), "th"));
    CHECK(!strcmp(json_string_value(json_object_get(delta, "reasoning")), "th"));
    json_decref(d);
    free(serve_resp_text(&r, "content", "Hel", 3));
    free(serve_resp_text(&r, "content", "lo", 2));
    char *two = serve_resp_tool_call(&r, "get_weather", "{\"city\": \"Tokyo\"}");
    char *second = strstr(two, "\n\ndata: ");
    CHECK(second != NULL);
    json_t *frag = json_loads(second + 8, JSON_DISABLE_EOF_CHECK, NULL);
    json_t *ftc = json_array_get(
        json_object_get(
            json_object_get(json_array_get(json_object_get(frag, "choices"), 0), "delta"),
            "tool_calls"),
        0);
    CHECK(!strcmp(json_string_value(json_object_get(json_object_get(ftc, "function"), "arguments")),
                  "{\"city\": \"Tokyo\"}"));
    json_decref(frag);
    second[2] = 0; /* keep the header chunk */
    d = chunk_json(two);
    json_t *tc = json_array_get(
        json_object_get(json_object_get(json_array_get(json_object_get(d, "choices"), 0), "delta"),
                        "tool_calls"),
        0);
    CHECK(json_integer_value(json_object_get(tc, "index")) == 0);
    CHECK(!strcmp(json_string_value(json_object_get(json_object_get(tc, "function"), "name")),
                  "get_weather"));
    json_decref(d);
    serve_usage u = {.prompt_tokens = 10, .completion_tokens = 4, .cached_tokens = 2};
    char *full = serve_resp_full(&r, "tool_calls", &u);
    d = json_loads(full, 0, NULL);
    free(full);
    json_t *m = json_object_get(json_array_get(json_object_get(d, "choices"), 0), "message");
    CHECK(!strcmp(json_string_value(json_object_get(m, "content")), "Hello"));
    CHECK(!strcmp(json_string_value(json_object_get(m, "reasoning_content")), "th"));
    CHECK(json_array_size(json_object_get(m, "tool_calls")) == 1);
    json_t *us = json_object_get(d, "usage");
    CHECK(json_integer_value(json_object_get(us, "total_tokens")) == 14);
    json_decref(d);
    serve_resp_free(&r);
}

int main(void) {
    RUN(chat_defaults);
    RUN(chat_all_fields);
    RUN(max_tokens_clamped_and_thinking_forms);
    RUN(bad_requests_name_the_field);
    RUN(openai_fields_implemented_or_refused);
    RUN(invalid_utf8_and_bad_escapes);
    RUN(completions_prompt);
    RUN(test_mode_fields);
    RUN(error_json_shape);
    RUN(response_shapes);
    return t_done();
}
