/* apis.h — the request side of the non-chat APIs, as pure functions over
 * JSON (no HTTP): the Responses API (responses_req.c) and the Anthropic
 * Messages API (anthropic_req.c) each turn a request into the core's
 * request as a chat-shaped JSON tree, which serve_req_from_json validates
 * without serializing it again; the answers are rendered from the core's
 * events by responses.c / anthropic.c.
 * Errors fill serve_err (400, with the field in param). */
#ifndef K3_SERVE_APIS_H
#define K3_SERVE_APIS_H

#include <jansson.h>

#include "serve/request.h"
#include "serve/rstore.h"

/* Where previous_response_id and item_reference look: the store and the
 * requester's scope (rstore.h). */
typedef struct {
    serve_rstore *store; /* NULL: every reference is unknown */
    const char *key;
    size_t key_len;
} serve_rscope;

/* Responses request → chat request (new reference). history: the stored
 * conversation to continue (stolen) or NULL; rs resolves item_reference (may
 * be NULL). stored (may be NULL): the input items in their stored form are
 * appended (message text parts joined into one). NULL + e on error (400;
 * item_not_found for an unknown item_reference). */
json_t *serve_responses_to_chat(const json_t *req, json_t *history, const serve_rscope *rs,
                                json_t *stored, serve_err *e);
/* Messages request → chat request (new reference); count_only: max_tokens
 * is not required (count_tokens). NULL + e on error. */
json_t *serve_anthropic_to_chat(const json_t *req, int count_only, serve_err *e);
/* The validator both Anthropic routes share (anthropic_check.c; called by
 * serve_anthropic_to_chat): 0, or -1 + e naming the field. */
int serve_anthropic_check(const json_t *req, int count_only, serve_err *e);

#endif
