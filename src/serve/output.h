/* output.h — one request's generated ids → the core's events (events.h).
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
 *      → events (text per channel, tool calls, logprobs, finish with usage),
        which the request's renderer turns into its API's bytes
 *
 * /v1/completions skips the channel parser: its text is the raw decoded
 * text with special tokens dropped (<|open|>, <|close|>, <|sep|> spelled). */
#ifndef K3_SERVE_OUTPUT_H
#define K3_SERVE_OUTPUT_H

#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "serve/events.h"
#include "serve/request.h"

struct serve_engine;
struct k3_detok;
struct k3_chan;
struct k3_stopper;

typedef struct {
    char id[48]; /* the request's id: chatcmpl-... / cmpl-... */
    long long created;
    const serve_render *render; /* the job's renderer (borrowed) */
    struct k3_detok *detok;
    struct k3_chan *channels; /* NULL for completions */
    const struct serve_engine *engine;
    struct k3_stopper *stopper; /* the request's stop strings; NULL when none */
    int held_reasoning;         /* the channel of the text the stopper holds */
    int stopped;                /* a stop string matched: nothing more is emitted */
    int n_tool_calls;
    int cut_by_limit; /* the generation ended at max_tokens: a tools section it
                         leaves open may end inside a call */
    int cut_call;     /* a call cut short was reported (finish stays "length") */
} serve_output;

/* prompt: the request's prompt ids (decides whether generation starts in
 * the think channel); seq_no makes the request id unique; events go to
 * render. 0 or -1 + k3_errmsg. */
int serve_output_init(serve_output *o, const struct serve_engine *e, const serve_req *q,
                      const int32_t *prompt, int64_t n_prompt, unsigned long long seq_no,
                      const serve_render *render);
void serve_output_free(serve_output *o);

/* The START event (a chat stream's first chunk: delta.role). Renderers
 * append to out throughout. */
void serve_output_begin(serve_output *o, k3_buf *out);
/* Feed one generated id (not a stop id). Returns 1 when a stop string
 * matched (generation must end). */
int serve_output_token(serve_output *o, int32_t id, k3_buf *out);
/* The LOGPROB event of the token about to be fed (steals entry). */
void serve_output_logprob(serve_output *o, json_t *entry, k3_buf *out);
/* End: flush held text (a marker cut by the end of the stream is dropped),
 * parse a pending tools section, then the FINISH event.
 * finish_reason "stop" becomes "tool_calls" when a tool call was returned.
 * Returns the finish reason actually reported. */
const char *serve_output_end(serve_output *o, const char *finish_reason, const serve_usage *u,
                             k3_buf *out);

#endif
