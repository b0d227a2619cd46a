/* error.c — the error a request gets: serve_err filled with escaped
 * fields, and its JSON body in OpenAI's or Anthropic's shape. A leaf of serve/: every parser
 * (request.c, request_openai.c, the Anthropic and Responses translators)
 * fills its errors here. */
#include "serve/request.h"

#include "base/utf8safe.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define INVALID "invalid_request_error"

int serve_err_set(serve_err *err, int status, const char *type, const char *param, const char *code,
                  const char *fmt, ...) {
    /* every field may carry client bytes: escaped, cut on character boundaries */
    err->status = status;
    type = type ? type : INVALID;
    param = param ? param : "";
    code = code ? code : "";
    k3_utf8_escape(err->type, sizeof err->type, type, strlen(type), 0);
    k3_utf8_escape(err->param, sizeof err->param, param, strlen(param), 0);
    k3_utf8_escape(err->code, sizeof err->code, code, strlen(code), 0);
    va_list ap;
    va_start(ap, fmt);
    k3_utf8_vsnprintf(err->message, sizeof err->message, 0, fmt, ap);
    va_end(ap);
    return -1;
}

/* The body sent when even an error cannot be serialized (out of memory, or a
 * field that is not valid UTF-8 despite serve_err_set). Never NULL. */
char *serve_err_fallback_json(void) {
    static const char body[] = "{\"error\":{\"message\":\"The server could not build the error "
                               "message.\",\"type\":\"server_error\",\"param\":null,\"code\":"
                               "\"internal_error\"}}";
    char *s = malloc(sizeof body);
    if (s) memcpy(s, body, sizeof body);
    return s;
}

char *serve_err_json(const serve_err *err) {
    json_t *e = json_pack("{s:s,s:s}", "message", err->message, "type", err->type);
    if (!e) return serve_err_fallback_json();
    json_object_set_new(e, "param", err->param[0] ? json_string(err->param) : json_null());
    json_object_set_new(e, "code", err->code[0] ? json_string(err->code) : json_null());
    json_t *doc = json_pack("{s:o}", "error", e);
    char *s = doc ? json_dumps(doc, JSON_COMPACT) : NULL;
    json_decref(doc);
    return s ? s : serve_err_fallback_json();
}

char *serve_anthropic_err_json(const serve_err *e) {
    const char *t = e->status == 401   ? "authentication_error"
                    : e->status == 403 ? "permission_error"
                    : e->status == 404 ? "not_found_error"
                    : e->status == 413 ? "request_too_large"
                    : e->status == 429 ? "rate_limit_error"
                    : e->status == 503 ? "overloaded_error"
                    : e->status >= 500 ? "api_error"
                                       : "invalid_request_error";
    char msg[700];
    if (e->param[0])
        snprintf(msg, sizeof msg, "%s: %s", e->param, e->message);
    else
        snprintf(msg, sizeof msg, "%s", e->message);
    json_t *doc =
        json_pack("{s:s,s:{s:s,s:s}}", "type", "error", "error", "type", t, "message", msg);
    char *s = doc ? json_dumps(doc, JSON_COMPACT) : NULL;
    json_decref(doc);
    return s ? s : serve_err_fallback_json();
}

int serve_utf8_valid(const char *s, size_t len) {
    return k3_utf8_valid(s, len);
}
