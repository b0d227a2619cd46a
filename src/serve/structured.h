/* structured.h — structured output for a chat request: the grammar its
 * output must follow (gen/constrain.h enforces it token by token).
 *
 *   response_format json_schema (or guided_json / json_schema): the
 *     response channel is exactly one JSON value valid under the schema;
 *   response_format json_object: one JSON object;
 *   tools with tool_choice auto (or absent): free text, then either the end
 *     of the message or a tools section whose calls name declared tools with
 *     arguments valid under their parameters;
 *   tool_choice "required": a tools section with one or more such calls, no
 *     text; a named function: exactly one call of it.
 * A prompt that opened the think channel keeps free reasoning first, then
 * <|close|>think<|sep|><|open|>response<|sep|>. Schemas that cannot be
 * enforced are a 400 (for tool_choice auto, a tool whose parameters cannot
 * be enforced only has its arguments held to a JSON object, logged once per
 * request). grammar / guided_regex / guided_grammar / guided_choice are
 * refused with 400. */
#ifndef K3_SERVE_STRUCTURED_H
#define K3_SERVE_STRUCTURED_H

#include <stdint.h>

#include "serve/request.h"

struct serve_engine;
struct k3_constraint;

/* *out: the constraint, or NULL when the request needs none. 0, or -1 + err. */
int serve_structured_new(const struct serve_engine *e, const serve_req *q, const int32_t *prompt,
                         int64_t n_prompt, struct k3_constraint **out, serve_err *err);

#endif
