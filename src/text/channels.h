/* channels.h — streaming output parser: routes generated text into the
 * reasoning, content and tool-call channels and strips the XTML structural
 * markers (chat.md §3.2–3.3).
 *
 * Feed it decoded text (with control tokens kept, i.e. k3_detok with
 * skip_special = 0) in whatever chunks generation produces; it is correct
 * when a marker such as "<|close|>think<|sep|>" is split across chunks at
 * any offset, and text that merely looks like the start of a marker ("a<|")
 * is released as soon as it can no longer become one.
 *
 *     k3_xtml x; k3_xtml_init(&x, tok);
 *     k3_chan *ch = k3_chan_new(&x, k3_chan_initial_state(&x, prompt, plen));
 *     for each decoded chunk:
 *         size_t n; const k3_chan_event *ev = k3_chan_push(ch, text, len, &n);
 *         for (i < n) switch (ev[i].kind) {
 *             case K3_EV_REASONING: send delta.reasoning = ev[i].text
 *             case K3_EV_CONTENT:   send delta.content = ev[i].text
 *             case K3_EV_TOOL_CALL: send tool_calls[{index, name, arguments}]
 *             case K3_EV_TOOLS_END: (raw section text, number of valid calls)
 *         }
 *     ev = k3_chan_finish(ch, &n);   // same handling; then k3_chan_free(ch)
 *
 * States and transitions (marker text is consumed, never emitted):
 *   REASONING: THINK_CLOSE -> CONTENT, RESP_OPEN -> CONTENT, TOOLS_OPEN -> TOOL,
 *              THINK_OPEN -> REASONING (a repeated opener is stripped)
 *   CONTENT:   THINK_OPEN -> REASONING, TOOLS_OPEN -> TOOL,
 *              RESP_OPEN / RESP_CLOSE / MSG_CLOSE stripped
 *   TOOL:      TOOLS_CLOSE -> CONTENT; text is buffered as the tools section
 *              and each call is reported as soon as its closing tag arrives.
 * Each emitted span is attributed to the state it was produced in.
 *
 * End of stream (k3_chan_finish): held text that begins with a complete
 * <|open|> / <|close|> spelling is a dangling marker cut by the end and is
 * dropped (as SGLang does); anything else held ("a<|") is emitted as text,
 * also after a stop token (mlx-lm would drop it). Inside TOOL, the held text
 * joins the section, complete calls are reported and TOOLS_END is sent.
 *
 * Events and their strings stay valid until the next push/finish/free.
 * Not thread-safe per object; one object per generation stream. */
#ifndef K3_TEXT_CHANNELS_H
#define K3_TEXT_CHANNELS_H

#include <stddef.h>

#include "text/xtml.h"

typedef enum { K3_CHAN_REASONING, K3_CHAN_CONTENT, K3_CHAN_TOOL } k3_chan_state;

typedef enum {
    K3_EV_REASONING, /* text: a reasoning delta */
    K3_EV_CONTENT,   /* text: a content delta */
    K3_EV_TOOL_CALL, /* a complete valid tool call: index, name, arguments */
    K3_EV_TOOLS_END  /* a tools section ended: text = its raw body, index = valid calls in it */
} k3_chan_kind;

typedef struct {
    k3_chan_kind kind;
    const char *text; /* NUL-terminated; deltas or the section body */
    size_t len;
    int index;             /* TOOL_CALL: 0-based over the whole output */
    const char *name;      /* TOOL_CALL: function name */
    const char *arguments; /* TOOL_CALL: JSON object text, json.dumps style */
} k3_chan_event;

typedef struct k3_chan k3_chan;

/* initial: K3_CHAN_REASONING when the prompt ends inside the think channel. */
k3_chan *k3_chan_new(const k3_xtml *x, k3_chan_state initial);
/* REASONING if the prompt's last THINK_OPEN comes after its last
 * THINK_CLOSE (the generation prompt opened think), else CONTENT. */
k3_chan_state k3_chan_initial_state(const k3_xtml *x, const char *prompt, size_t len);

const k3_chan_event *k3_chan_push(k3_chan *c, const char *text, size_t len, size_t *n_events);
const k3_chan_event *k3_chan_finish(k3_chan *c, size_t *n_events);

k3_chan_state k3_chan_state_now(const k3_chan *c);
/* Valid tool calls reported so far, and whether a tools section was opened
 * (for finish_reason "tool_calls"). */
int k3_chan_tool_calls(const k3_chan *c);
int k3_chan_saw_tools(const k3_chan *c);
void k3_chan_free(k3_chan *c);

#endif
