/* events.h — what the serving core says about one request's answer, and the
 * renderers that turn it into an API's bytes.
 *
 * The core (output.c, driven by the scheduler) knows channels, tool calls,
 * logprobs, usage and why the answer ended; it never writes a byte of any
 * wire format. Each API has a renderer (render_chat.c for OpenAI chat and
 * completions, anthropic.c for Messages, responses.c for Responses) that
 * turns the events into its own JSON body or server-sent events. A renderer
 * runs on the scheduler's worker thread and appends to the job's output.
 *
 * The events of one request, in order:
 *   START                              once, when the job leaves the queue
 *   TEXT (channel content | reasoning) any number
 *   TOOL_START, TOOL_ARGS..., TOOL_END one call (index counts from 0)
 *   LOGPROB                            one generated token's entry
 *   FINISH (reason, usage)             last, when the answer ended normally
 *   ERROR (the error)                  last, instead of FINISH; a cancelled
 *                                      stream ends with neither */
#ifndef K3_SERVE_EVENTS_H
#define K3_SERVE_EVENTS_H

#include <jansson.h>
#include <stddef.h>

#include "base/buf.h"
#include "serve/request.h"

typedef struct {
    int prompt_tokens;
    int completion_tokens;
    int cached_tokens; /* prompt tokens served from the prompt cache */
} serve_usage;

typedef enum {
    SERVE_EV_START,
    SERVE_EV_TEXT,
    SERVE_EV_TOOL_START,
    SERVE_EV_TOOL_ARGS,
    SERVE_EV_TOOL_END,
    SERVE_EV_LOGPROB,
    SERVE_EV_FINISH,
    SERVE_EV_ERROR,
} serve_ev_kind;

typedef enum { SERVE_CH_CONTENT, SERVE_CH_REASONING } serve_channel;

typedef struct {
    serve_ev_kind kind;
    /* START: the request's id (unique in the process) and start time */
    const char *id;
    long long created;
    /* TEXT, TOOL_ARGS: the text (not NUL-terminated in TEXT) */
    serve_channel channel;
    const char *text;
    size_t len;
    /* TOOL_*: which call; TOOL_START: its id and function name */
    int index;
    const char *call_id, *name;
    /* TOOL_END: the call was cut by max_tokens (its arguments are incomplete) */
    int cut;
    /* LOGPROB: the entry (serve/logprobs.h); the renderer takes it */
    json_t *logprob;
    /* FINISH: "stop", "length" or "tool_calls", and the token counts */
    const char *finish;
    const serve_usage *usage;
    /* ERROR: what went wrong (status, message) */
    const serve_err *err;
} serve_ev;

/* One API's renderer. begin runs on the connection's thread before the job
 * is queued (the first bytes of a stream; may be NULL); on runs on the
 * worker for each event; release frees ctx once the job is done. */
typedef struct {
    void (*begin)(void *ctx, k3_buf *out);
    void (*on)(void *ctx, const serve_ev *ev, k3_buf *out);
    void (*release)(void *ctx);
} serve_render_ops;

typedef struct {
    const serve_render_ops *ops;
    void *ctx;
} serve_render;

/* The renderer of OpenAI chat completions and completions (render_chat.c),
 * for a request of kind `kind`; stream / include_usage as the request says. */
serve_render serve_render_chat(serve_kind kind, const char *model, int stream, int include_usage);

/* A chat request with n > 1 choices runs one job per choice, each with a
 * choice renderer: its chunks carry `index` and the response's id and time
 * (the same for all choices); FINISH writes neither the usage chunk nor
 * [DONE], and nothing at all when not streaming: the connection ends the
 * stream with serve_render_chat_tail and builds the whole body with
 * serve_render_chat_body once all are done. */
serve_render serve_render_chat_choice(const char *model, int stream, int index, const char *id,
                                      long long created);
/* The usage chunk (when include_usage) and [DONE], malloc'd. */
char *serve_render_chat_tail(const serve_render *first, int include_usage, const serve_usage *u);
/* The body of n finished choices. */
char *serve_render_chat_body(const serve_render *choices, const char *const *finish, int n,
                             const serve_usage *u);

static inline void serve_render_emit(const serve_render *r, const serve_ev *ev, k3_buf *out) {
    if (r->ops) r->ops->on(r->ctx, ev, out);
}

#endif
