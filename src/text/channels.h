/* channels.h — streaming output parser: routes generated tokens into the
 * reasoning, content and tool-call channels and strips the XTML structural
 * markers (chat.md §3.2–3.3).
 *
 * STRUCTURE COMES ONLY FROM CONTROL-TOKEN IDS. A marker is the control
 * token <|open|> or <|close|> (by id), the tag name as text, then the
 * control token <|sep|> (by id). The same characters written as ordinary
 * text ("<|open|>tools<|sep|>" spelled out in BPE tokens, e.g. a user
 * message or tool result the model repeats) are content and come out
 * exactly as written. Internally the stream is kept in the token form of
 * xtml.h, where a control token is a byte no text can contain.
 *
 * Input, per generated token (ids from the model; the detokenizer is the
 * caller's, created with skip_special = 1):
 *
 *     k3_xtml x; k3_xtml_init(&x, tok);
 *     k3_chan *ch = k3_chan_new(&x, k3_chan_initial_state(&x, tok, prompt, n),
 *                               tools_allowed);
 *     for each generated id (not a stop id):
 *         size_t n; const k3_chan_event *ev = k3_chan_push_token(ch, detok, id, &n);
 *         for (i < n) switch (ev[i].kind) {
 *             case K3_EV_REASONING: send delta.reasoning = ev[i].text
 *             case K3_EV_CONTENT:   send delta.content = ev[i].text
 *             case K3_EV_TOOL_CALL: send tool_calls[{index, name, arguments}]
 *             case K3_EV_TOOLS_END: (raw section text, number of valid calls)
 *         }
 *     ev = k3_chan_finish(ch, &n);   // same handling; then k3_chan_free(ch)
 *
 * k3_chan_push_token = k3_chan_push(text of an ordinary token) or, for the
 * id of <|open|>/<|close|>/<|sep|>, the detokenizer's held bytes then
 * k3_chan_push_ctrl. Callers that split text and control tokens themselves
 * use those two directly. The event interface (k3_chan_event) is unchanged
 * from the earlier text-level parser; only the input side changed.
 *
 * States and transitions (marker tokens are consumed, never emitted):
 *   REASONING: THINK_CLOSE -> CONTENT, RESP_OPEN -> CONTENT, TOOLS_OPEN -> TOOL,
 *              THINK_OPEN -> REASONING (a repeated opener is stripped)
 *   CONTENT:   THINK_OPEN -> REASONING, TOOLS_OPEN -> TOOL,
 *              RESP_OPEN / RESP_CLOSE / MSG_CLOSE stripped
 *   TOOL:      TOOLS_CLOSE -> CONTENT; the tokens are buffered as the tools
 *              section and each call is reported as soon as its closing tag
 *              arrives (toolcall.h).
 * Each emitted span is attributed to the state it was produced in.
 *
 * tools_allowed = 0 (no tools declared, or tool_choice "none"): TOOLS_OPEN
 * is not a marker, so a tools section the model writes with real control
 * tokens stays in the current channel as text, spelled out, and no
 * TOOL_CALL / TOOLS_END event is ever produced.
 *
 * What a REASONING / CONTENT event's text can contain: the UTF-8 text of the
 * ordinary tokens of that channel, exactly as generated (invalid bytes as
 * U+FFFD), and the spelling of any control token that did not complete a
 * marker active in that state (e.g. "<|open|>x<|sep|>", or a whole tools
 * section when tools are not allowed). Structural markers never appear.
 *
 * Only text that may still become a marker is held back, i.e. text after a
 * <|open|>/<|close|> token; a token that cannot continue one releases it
 * at once. End of stream (k3_chan_finish): held text outside TOOL is a
 * dangling marker cut by the end (it starts with a control token) and is
 * dropped, as SGLang does. Inside TOOL, the held text joins the section,
 * complete calls are reported and TOOLS_END is sent.
 *
 * Events and their strings stay valid until the next push/finish/free.
 * Not thread-safe per object; one object per generation stream. */
#ifndef K3_TEXT_CHANNELS_H
#define K3_TEXT_CHANNELS_H

#include <stddef.h>

#include <stdint.h>

#include "text/tokenizer.h"
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

/* initial: K3_CHAN_REASONING when the prompt ends inside the think channel.
 * tools_allowed: 1 only when the request declared tools and tool_choice is
 * not "none" (see above). x: from k3_xtml_init with the tokenizer (its ids
 * are what make markers). */
k3_chan *k3_chan_new(const k3_xtml *x, k3_chan_state initial, int tools_allowed);
/* REASONING if the prompt's last THINK_OPEN comes after its last
 * THINK_CLOSE (the generation prompt opened think), else CONTENT; markers
 * by id, as in the output (mlx-lm compares the id subsequences), so a user
 * message that spells "<|open|>think<|sep|>" as text changes nothing. */
k3_chan_state k3_chan_initial_state(const k3_xtml *x, const k3_tokenizer *tok, const int32_t *ids,
                                    size_t n);

/* One generated id: see above. d: the stream's detokenizer (skip_special). */
const k3_chan_event *k3_chan_push_token(k3_chan *c, k3_detok *d, int32_t id, size_t *n_events);
/* Text of ordinary tokens (any chunking; marker spellings in it are text). */
const k3_chan_event *k3_chan_push(k3_chan *c, const char *text, size_t len, size_t *n_events);
/* One control token (by kind; K3_XC_EOM is text-like: never a marker). */
const k3_chan_event *k3_chan_push_ctrl(k3_chan *c, k3_xtml_ctrl ctrl, size_t *n_events);
const k3_chan_event *k3_chan_finish(k3_chan *c, size_t *n_events);

k3_chan_state k3_chan_state_now(const k3_chan *c);
/* Valid tool calls reported so far, and whether a tools section was opened
 * (for finish_reason "tool_calls"). */
int k3_chan_tool_calls(const k3_chan *c);
int k3_chan_saw_tools(const k3_chan *c);
void k3_chan_free(k3_chan *c);

#endif
