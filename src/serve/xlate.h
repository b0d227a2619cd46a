/* xlate.h — reads the chat-completions SSE stream a job produces and turns
 * it back into semantic events, so other API shapes (Responses, Anthropic
 * Messages) are served by the same generation path: the request is
 * translated to a chat request with stream + include_usage, and its chunks
 * come back here as reasoning / content deltas, complete tool calls, the
 * finish reason with the usage, or an error.
 *
 * Pure (no I/O): feed it the bytes in any pieces. */
#ifndef K3_SERVE_XLATE_H
#define K3_SERVE_XLATE_H

#include <jansson.h>
#include <stddef.h>

#include "base/buf.h"
#include "serve/openai.h"

typedef struct {
    void (*reasoning)(void *ctx, const char *text, size_t len, k3_buf *out);
    void (*content)(void *ctx, const char *text, size_t len, k3_buf *out);
    void (*tool_call)(void *ctx, const char *id, const char *name, const char *arguments,
                      k3_buf *out);
    /* once, at the end: "stop", "length", "tool_calls" (or "error" after error()) */
    void (*finish)(void *ctx, const char *finish_reason, const serve_usage *u, k3_buf *out);
    /* an engine error mid-stream: the {"error":{...}} object */
    void (*error)(void *ctx, const json_t *err, k3_buf *out);
} serve_xlate_ops;

typedef struct {
    k3_buf line;       /* the partial SSE event */
    char finish[16];   /* finish_reason seen */
    serve_usage usage; /* from the usage chunk */
    json_t *calls;     /* index -> {id, name, arguments, sent} */
    int ended;         /* finish() was called */
    int failed;
} serve_xlate;

void serve_xlate_init(serve_xlate *x);
void serve_xlate_free(serve_xlate *x);
/* Feed bytes of the chat stream; calls ops as events complete. `done`:
 * the job has ended (finish is called if [DONE] was not seen). */
void serve_xlate_feed(serve_xlate *x, const serve_xlate_ops *ops, void *ctx, const char *b,
                      size_t n, int done, k3_buf *out);

#endif
