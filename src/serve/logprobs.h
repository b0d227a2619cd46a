/* logprobs.h — per-token log-probabilities for `logprobs` / `top_logprobs`.
 *
 * The values are the model's own distribution: log_softmax of the raw
 * logits at that step (before temperature, penalties or filters), as the
 * OpenAI API reports them. One entry per generated token, in the chat
 * shape {token, logprob, bytes, top_logprobs: [{token, logprob, bytes}]};
 * serve_logprobs_legacy converts a list of them to the /v1/completions
 * shape {tokens, token_logprobs, top_logprobs, text_offset}. */
#ifndef K3_SERVE_LOGPROBS_H
#define K3_SERVE_LOGPROBS_H

#include <jansson.h>
#include <stdint.h>

#include "text/tokenizer.h"

/* Entry for token id under logits[0..vocab), with the top_n (0..20) most
 * likely alternatives (ties: lower id first). A new reference. */
json_t *serve_logprob_entry(const k3_tokenizer *tok, const float *logits, int vocab, int32_t id,
                            int top_n);

/* entries: array of chat-shape entries; *offset: running text offset in
 * bytes (advanced). A new reference. */
json_t *serve_logprobs_legacy(const json_t *entries, long long *offset);

#endif
