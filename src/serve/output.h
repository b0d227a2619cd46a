/* output.h — one request's generated ids → what the client receives.
 *
 * The path every generated token takes (and the path the test-only forced
 * output takes too):
 *
 *   id → channel parser (text/channels.h): <|open|>/<|close|>/<|sep|> BY ID,
 *        other ids through the streaming detokenizer (whole UTF-8
 *        characters); reasoning / content / tool section, markers stripped;
 *        marker spellings the model wrote as text stay content
 *      → tool-call parser (each call when its closing tag arrives); only
 *        when the request declared tools and tool_choice is not "none"
 *      → stop-string filter on reasoning / content text (holds back a
 *        possible partial stop string; never matches marker tokens)
 *      → OpenAI serialization (SSE chunks when streaming, else accumulated)
 *
 * /v1/completions skips the channel parser: its text is the raw decoded
 * text with special tokens dropped (<|open|>, <|close|>, <|sep|> spelled). */
#ifndef K3_SERVE_OUTPUT_H
#define K3_SERVE_OUTPUT_H

#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "serve/openai.h"
#include "serve/request.h"

struct serve_engine;
struct k3_detok;
struct k3_chan;
struct k3_stopper;

typedef struct {
    serve_resp resp;
    struct k3_detok *detok;
    struct k3_chan *channels; /* NULL for completions */
    const struct serve_engine *engine;
    int stream, include_usage;
    struct k3_stopper *stopper; /* the request's stop strings; NULL when none */
    int held_reasoning;         /* the channel of the text the stopper holds */
    int stopped;                /* a stop string matched: nothing more is emitted */
    int n_tool_calls;
    int cut_by_limit; /* the generation ended at max_tokens: a tools section it
                         leaves open may end inside a call */
    int cut_call;     /* a call cut short was reported (finish stays "length") */
} serve_output;

/* prompt: the request's prompt ids (decides whether generation starts in
 * the think channel); seq_no makes the response id unique. 0 or -1 +
 * k3_errmsg. */
int serve_output_init(serve_output *o, const struct serve_engine *e, const serve_req *q,
                      const int32_t *prompt, int64_t n_prompt, unsigned long long seq_no);
void serve_output_free(serve_output *o);

/* The stream's first chunk (chat: delta.role), appended to out. */
void serve_output_begin(serve_output *o, k3_buf *out);
/* Feed one generated id (not a stop id). Appends SSE chunks to out when
 * streaming. Returns 1 when a stop string matched (generation must end). */
int serve_output_token(serve_output *o, int32_t id, k3_buf *out);
/* End: flush held text (a marker cut by the end of the stream is dropped),
 * parse a pending tools section, then
 * append the final chunk(s) + [DONE], or the whole non-streaming body.
 * finish_reason "stop" becomes "tool_calls" when a tool call was returned.
 * Returns the finish reason actually reported. */
const char *serve_output_end(serve_output *o, const char *finish_reason, const serve_usage *u,
                             k3_buf *out);

#endif
