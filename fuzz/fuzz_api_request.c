/* fuzz_api_request.c — libFuzzer target for the Responses API and Anthropic
 * Messages request translators (serve/apis.h): any bytes as a request of
 * each API. A translation must either fail with a 4xx message or give a
 * chat request that the chat parser (serve/request.h) then accepts or
 * refuses with a 4xx — never crash, leak or produce a non-object. */
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "serve/apis.h"
#include "serve/request.h"

static void check_err(const serve_err *e) {
    if (e->status < 400 || e->status > 499 || !e->message[0]) abort();
}

static void parse_chat(json_t *chat) {
    if (!json_is_object(chat)) abort();
    char *body = json_dumps(chat, JSON_COMPACT);
    if (!body) abort();
    serve_limits lim = {.model_name = "tiny", .max_tokens_cap = 64, .test_mode = 1};
    serve_req q;
    serve_err e;
    if (serve_req_parse(body, strlen(body), SERVE_CHAT, &lim, &q, &e))
        check_err(&e);
    else
        serve_req_free(&q);
    free(body);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static serve_rstore *store;
    static const char scope[] = "0:";
    if (!store) {
        store = serve_rstore_new(1 << 20);
        serve_rstore_put(store, scope, 2, "resp_0123456789abcdef0123456789abcdef",
                         "{\"output\":[{\"id\":\"rs_0123456789abcdef0123456789abcdef_1\","
                         "\"type\":\"reasoning\",\"summary\":[{\"type\":\"summary_text\","
                         "\"text\":\"r\"}]},{\"id\":\"fc_0123456789abcdef0123456789abcdef_2\","
                         "\"type\":\"function_call\",\"call_id\":\"c1\",\"name\":\"f\","
                         "\"arguments\":\"{}\"}]}",
                         "[{\"role\":\"user\",\"content\":\"x\"}]", "[]");
    }
    json_t *req = json_loadb((const char *)data, size, JSON_ALLOW_NUL, NULL); /* as the server */
    if (!json_is_object(req)) {
        json_decref(req);
        return 0;
    }
    serve_err e;
    char *text = serve_rstore_get(store, scope, 2, "resp_0123456789abcdef0123456789abcdef",
                                  SERVE_RS_MESSAGES);
    json_t *hist = json_loads(text, 0, NULL);
    free(text);
    serve_rscope rs = {store, scope, 2};
    json_t *stored = json_array();
    json_t *chat = serve_responses_to_chat(req, hist, &rs, stored, &e);
    json_decref(stored);
    if (chat) {
        parse_chat(chat);
        json_decref(chat);
    } else {
        check_err(&e);
    }
    for (int count_only = 0; count_only < 2; count_only++) {
        chat = serve_anthropic_to_chat(req, count_only, &e);
        if (chat) {
            parse_chat(chat);
            json_decref(chat);
        } else {
            check_err(&e);
        }
    }
    json_decref(req);
    return 0;
}
