/* toolcall.h — parse the tool calls of a generated tools section
 * (chat.md §3.4–3.5) into {name, arguments} via jansson.
 *
 * Grammar (section body, between <|open|>tools<|sep|> and <|close|>tools<|sep|>):
 *   call     = <|open|>call ATTRS <|sep|> (jsonblock | argument*) <|close|>call<|sep|>
 *   argument = <|open|>argument ATTRS <|sep|> VALUE <|close|>argument<|sep|>
 *   jsonblock= <|open|>json ATTRS <|sep|> JSON <|close|>json<|sep|>
 *   ATTRS    = ( NAME="VALUE" )*, VALUE unescaped &quot; then &amp;
 * Behaviour is mlx-lm's parser plus json blocks: a call needs a non-empty
 * tool attribute; a json block must decode to an object; an argument needs
 * a key, its type defaults to string; string values stay raw (no trimming,
 * no unescaping), other types are JSON-decoded, falling back to the raw
 * string when that fails. A malformed or truncated call is skipped and its
 * valid siblings are kept; no valid call at all is an error.
 *
 * Input is a section in TOKEN FORM (xtml.h): the control tokens <|open|>,
 * <|close|>, <|sep|> are their K3_XTML_CTRL_BYTE bytes, everything else is
 * the text of ordinary tokens. A spelling such as "<|open|>call" typed as
 * text is therefore never a call. x is the spelled k3_xtml (from the
 * tokenizer): a control token inside a value or attribute that is not part
 * of the grammar is given back as its spelling; a k3_xtml with no control
 * spellings (failed init) finds no call. */
#ifndef K3_TEXT_TOOLCALL_H
#define K3_TEXT_TOOLCALL_H

#include <jansson.h>
#include <stddef.h>

#include "text/grammar.h"
#include "text/xtml.h"

typedef struct {
    char *name;        /* NUL-terminated, unescaped */
    json_t *arguments; /* a JSON object (owned) */
} k3_tool_call;

typedef struct {
    k3_tool_call *v;
    size_t n, cap;
} k3_tool_calls;

/* Parse every complete call in token-form s[0..n) and append the valid ones to *out.
 * Returns the number appended, or -1 + k3_errmsg ("no tool call found")
 * when there is none. */
int k3_toolcall_parse(const k3_xtml *x, const char *s, size_t n, k3_tool_calls *out);

/* Incremental form, for streaming: look for the next complete call block
 * at or after s[*pos]. Returns 1 with *call filled (caller frees) and *pos
 * past the block; 0 when a complete block was malformed (skipped, *pos past
 * it); -1 when no complete block follows yet (*pos unchanged). */
int k3_toolcall_next(const k3_xtml *x, const char *s, size_t n, size_t *pos, k3_tool_call *call);

/* A tools section cut by the token limit, as spelled text (the channel
 * parser's K3_EV_TOOLS_END text; the control spellings are read back as
 * control tokens, so text in the cut call that spells one counts as one):
 * the call it ends inside, after its complete ones. Returns 0 when it ends
 * inside no call; K3_CALL_CUT with *call holding the call's tool name ("" if
 * that was cut too) and the arguments whose blocks closed; K3_CALL_UNCLOSED
 * when only the call's closing tag was cut (it had begun: the call is
 * whole). The caller frees *call when nonzero. */
enum { K3_CALL_CUT = 1, K3_CALL_UNCLOSED = 2 };
int k3_toolcall_cut(const k3_xtml *x, const char *spelled, size_t n, k3_tool_call *call);

/* function.arguments for the API: json.dumps(arguments, ensure_ascii=False)
 * (", " / ": " separators, keys in parse order). malloc'd. */
char *k3_toolcall_arguments_json(const k3_tool_call *c);
/* [{"name": ..., "arguments": "<arguments JSON string>"}, ...] (new ref). */
json_t *k3_tool_calls_json(const k3_tool_calls *calls);

void k3_tool_call_free(k3_tool_call *c);
void k3_tool_calls_free(k3_tool_calls *calls);

/* The grammar of one call of tool `name` whose arguments follow args
 * (toolcall_gram.c): *key is its opening literal `<|open|>call
 * tool="NAME"` (for a KEYED node over the declared tools), *rest the index
 * attribute (1..max_index: calls are numbered from 1 as chat rendering
 * writes them), the arguments and the closing tags. */
void k3_toolcall_gram(k3_gram *g, const char *name, k3_gnode *args, int max_index, k3_gsyms *key,
                      k3_gnode **rest);

#endif
