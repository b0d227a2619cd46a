/* openai.h — OpenAI response shapes: SSE chunks and whole responses (used by
 * the chat renderer, render_chat.c).
 *
 * One serve_resp per request accumulates what the generation produced
 * (content, reasoning, tool calls) and turns each increment into the JSON
 * the OpenAI API returns:
 *
 *   chat, stream:      data: {"object":"chat.completion.chunk",...,"choices":[{"delta":...}]}
 *   chat, non-stream:  {"object":"chat.completion",...,"choices":[{"message":...}]}
 *   completions:       "text_completion" objects with choices[0].text
 *
 * Reasoning goes out under both `reasoning_content` and `reasoning` (clients
 * read either). Every function returns a malloc'd NUL-terminated string. */
#ifndef K3_SERVE_OPENAI_H
#define K3_SERVE_OPENAI_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "serve/events.h"
#include "serve/request.h"

typedef struct {
    serve_kind kind;
    char id[48];
    long long created;
    char model[128];
    /* accumulated output, for the non-streaming response */
    char *content, *reasoning;
    size_t content_len, reasoning_len, content_cap, reasoning_cap;
    json_t *tool_calls; /* array of {id,type,function:{name,arguments}} */
    /* logprob entries (serve/logprobs.h): all of them, and those not yet
     * attached to a streamed chunk */
    json_t *lp_all, *lp_pending;
    long long lp_offset; /* completions text_offset of the next streamed entry */
    int index;           /* the choice's index (n > 1: one serve_resp per choice) */
    int streaming;       /* set by the caller: lp_all is not kept (a stream's entries
                            go out with their chunks; keeping them all grew a long
                            stream with top_logprobs by ~20 KB per token) */
} serve_resp;

/* id_seq makes the response id unique within this process. */
void serve_resp_init(serve_resp *r, serve_kind kind, const char *model, unsigned long long id_seq);
void serve_resp_free(serve_resp *r);

/* Record output and return its SSE chunk ("data: {...}\n\n"). channel is
 * "content" or "reasoning". For completions every channel is `text`. */
char *serve_resp_text(serve_resp *r, const char *channel, const char *text, size_t len);
/* The first chunk of a chat stream: delta {"role":"assistant","content":""}. */
char *serve_resp_role_chunk(serve_resp *r);
/* Record a complete tool call (arguments: a JSON text) and return its two
 * chunks: the header (index, id, type, name) and the arguments fragment. */
char *serve_resp_tool_call(serve_resp *r, const char *name, const char *arguments);
/* Last chunk: empty delta + finish_reason ("stop", "length", "tool_calls"). */
char *serve_resp_finish_chunk(serve_resp *r, const char *finish_reason);
/* The usage chunk (choices: []) sent when stream_options.include_usage. */
char *serve_resp_usage_chunk(serve_resp *r, const serve_usage *u);
/* Record one generated token's logprob entry; it rides on the next chunk
 * and on the whole response. Steals entry. */
void serve_resp_add_logprob(serve_resp *r, json_t *entry);
/* The whole non-streaming response body. */
char *serve_resp_full(serve_resp *r, const char *finish_reason, const serve_usage *u);
/* One choice of it (new reference). */
json_t *serve_resp_choice(serve_resp *r, const char *finish_reason);
/* The body of n choices (rs[0] gives id, created and model). */
char *serve_resp_full_n(serve_resp *const *rs, const char *const *finish, int n,
                        const serve_usage *u);

/* The usage object (new reference). */
json_t *serve_usage_json(const serve_usage *u);

#endif
