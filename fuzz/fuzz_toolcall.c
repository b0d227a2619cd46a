/* fuzz_toolcall.c — libFuzzer target for the tool-call section parser:
 * arbitrary bytes as a tools section in token form (text/xtml.h: bytes
 * 0xF8..0xFB are control tokens). The batch and incremental parsers must
 * agree, every reported call must have a name and arguments that are a
 * valid JSON object text, and the same section with its control tokens
 * spelled out as text must hold no call. */
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "text/toolcall.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static k3_xtml x;
    static int ready;
    if (!ready) ready = !k3_xtml_init(&x, NULL);
    const char *s = (const char *)data;
    k3_tool_calls calls = {0};
    int n = k3_toolcall_parse(&x, s, size, &calls);
    if (n < 0 && (calls.n != 0 || !*k3_errmsg())) abort();
    if (n >= 0 && (size_t)n != calls.n) abort();
    size_t pos = 0, k = 0;
    k3_tool_call c;
    int rc;
    while ((rc = k3_toolcall_next(&x, s, size, &pos, &c)) >= 0) {
        if (rc == 0) continue;
        if (k >= calls.n || strcmp(c.name, calls.v[k].name) || !*c.name) abort();
        char *args = k3_toolcall_arguments_json(&c);
        json_t *back = json_loads(args, JSON_ALLOW_NUL, NULL);
        if (!json_is_object(back)) abort();
        json_decref(back);
        free(args);
        k3_tool_call_free(&c);
        k++;
    }
    if (k != calls.n) abort();
    json_t *j = k3_tool_calls_json(&calls);
    if (!j || json_array_size(j) != calls.n) abort();
    json_decref(j);
    k3_tool_calls_free(&calls);
    k3_buf spelled = {0};
    k3_xtml_spell(&x, s, size, &spelled);
    if (k3_toolcall_parse(&x, spelled.s ? spelled.s : "", spelled.n, &calls) != -1 || calls.n)
        abort();
    k3_buf_free(&spelled);
    k3_tool_calls_free(&calls);
    k3_clearerr();
    return 0;
}
