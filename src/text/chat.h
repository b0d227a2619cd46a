/* chat.h — render an OpenAI-style chat request as a Kimi K3 XTML prompt
 * (chat.md §2), as a list of segments and as token ids.
 *
 * The reference renderer does not produce one string: it produces segments,
 * each either a "control" segment (exactly one control token spelling, or
 * an image placeholder) encoded with special-token recognition on, or a
 * "text" segment (tag names, attributes, message bodies, JSON) encoded with
 * it off, each on its own (chat.md §1.6). So marker spellings typed by a
 * user stay ordinary text, and BPE never merges across segment boundaries.
 *
 *     k3_xtml x; k3_xtml_init(&x, tok);          // or NULL: K3 spellings
 *     k3_chat_input in;
 *     if (k3_chat_input_from_request(req, &in)) error(k3_errmsg());
 *     k3_chat_segs segs = {0};
 *     if (k3_chat_build(&x, &in, &segs)) error(k3_errmsg());
 *     char *prompt = k3_chat_segs_join(&segs, &len);      // diagnostic form
 *     k3_ids ids = {0}; k3_chat_segs_encode(tok, &segs, &ids);
 *     k3_chat_segs_free(&segs);
 *
 * or in one call: k3_chat_render(&x, req, &len) / k3_chat_encode(tok, req, &ids).
 *
 * Request fields read (everything else is ignored):
 *   messages (required), tools, tool_choice, response_format,
 *   chat_template_kwargs.{thinking, enable_thinking, thinking_effort,
 *   add_generation_prompt}, and the top-level aliases thinking (bool or
 *   {"type": "enabled"|"disabled"}), enable_thinking, thinking_effort,
 *   add_generation_prompt, reasoning_effort (OpenAI's values, mapped by
 *   k3_chat_effort_map). Kwargs win over top-level fields.
 * Defaults as the reference: thinking on, effort "max", generation prompt on.
 *
 * Errors: -1 and a k3_errmsg naming the field ("messages[2].role: ..."). */
#ifndef K3_TEXT_CHAT_H
#define K3_TEXT_CHAT_H

#include <jansson.h>
#include <stddef.h>

#include "text/tokenizer.h"
#include "text/xtml.h"

typedef struct {
    char *text; /* NUL-terminated (may also contain NUL bytes; use len) */
    size_t len;
    int control; /* 1: encode with special tokens allowed */
} k3_chat_seg;

typedef struct {
    k3_chat_seg *v;
    size_t n, cap;
} k3_chat_segs;

typedef struct {
    int thinking;              /* 1: think channels and the effort message */
    int has_effort;            /* 0: no thinking-effort message */
    char thinking_effort[16];  /* "low" | "high" | "max" (validated in build) */
    char effort_field[48];     /* request field it came from, for errors */
    int add_generation_prompt; /* 1: end with the assistant opener */
} k3_chat_opts;

/* What the renderer needs; the json_t pointers are borrowed. */
typedef struct {
    const json_t *messages;        /* array (required) */
    const json_t *tools;           /* array or NULL */
    const json_t *tool_choice;     /* string / object / NULL */
    const json_t *response_format; /* object / string / NULL */
    k3_chat_opts opts;
} k3_chat_input;

/* The reference defaults: thinking on, effort max, generation prompt on. */
void k3_chat_opts_default(k3_chat_opts *o);

/* OpenAI's reasoning_effort values on K3's thinking, the one mapping every
 * API route uses: "none" -> thinking off (returns 0); "minimal", "low" ->
 * "low"; "medium", "high" -> "high"; "xhigh", "max" -> "max" (returns 1,
 * *effort set). -1 for any other value. */
int k3_chat_effort_map(const char *value, const char **effort);
#define K3_CHAT_EFFORT_VALUES "none, minimal, low, medium, high, xhigh or max"
/* Pick the fields of an OpenAI chat request (see the list above). */
int k3_chat_input_from_request(const json_t *req, k3_chat_input *in);

/* Render into *out (appends). Returns 0 or -1 + k3_errmsg. */
int k3_chat_build(const k3_xtml *x, const k3_chat_input *in, k3_chat_segs *out);
void k3_chat_segs_free(k3_chat_segs *s);
/* Concatenated segment texts (the prompt string), malloc'd. */
char *k3_chat_segs_join(const k3_chat_segs *s, size_t *len);
/* Encode each segment on its own and append the ids. */
int k3_chat_segs_encode(const k3_tokenizer *tok, const k3_chat_segs *s, k3_ids *out);

/* One call each: request -> prompt string / -> token ids (appended). */
char *k3_chat_render(const k3_xtml *x, const json_t *req, size_t *len);
int k3_chat_encode(const k3_tokenizer *tok, const json_t *req, k3_ids *out);

#endif
