/* apis.h — the request side of the non-chat APIs, as pure functions over
 * JSON (no HTTP): the Responses API (responses_req.c) and the Anthropic
 * Messages API (anthropic_req.c) each turn a request into the equivalent
 * chat-completions request, which then takes the normal validation and
 * generation path; the answers are re-shaped by responses.c / anthropic.c.
 * Errors fill serve_err (400, with the field in param). */
#ifndef K3_SERVE_APIS_H
#define K3_SERVE_APIS_H

#include <jansson.h>

#include "serve/request.h"

/* previous_response_id store: the last max_entries conversations and their
 * output items; oldest evicted first. Thread safe. */
typedef struct serve_rstore serve_rstore;
serve_rstore *serve_rstore_new(int max_entries);
void serve_rstore_free(serve_rstore *s);
/* Keep a conversation (steals messages) and the output items (copied). */
void serve_rstore_put(serve_rstore *s, const char *id, json_t *messages, const json_t *output);
/* A copy of the conversation of response id, or NULL (unknown or evicted). */
json_t *serve_rstore_get(serve_rstore *s, const char *id);

/* Responses request → chat request (new reference). history: the stored
 * conversation to continue (stolen) or NULL; store resolves item_reference
 * (may be NULL: then every reference is unknown). NULL + e on error. */
json_t *serve_responses_to_chat(const json_t *req, json_t *history, serve_rstore *store,
                                serve_err *e);
/* Messages request → chat request (new reference); count_only: max_tokens
 * is not required (count_tokens). NULL + e on error. */
json_t *serve_anthropic_to_chat(const json_t *req, int count_only, serve_err *e);
/* The validator both Anthropic routes share (anthropic_check.c; called by
 * serve_anthropic_to_chat): 0, or -1 + e naming the field. */
int serve_anthropic_check(const json_t *req, int count_only, serve_err *e);

#endif
