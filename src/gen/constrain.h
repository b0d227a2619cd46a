/* constrain.h — constrained decoding: mask the logits to the tokens that
 * keep the output inside a grammar (text/grammar.h), at decode speed.
 *
 * A k3_vtrie is built once per tokenizer: every ordinary token's bytes in a
 * byte trie laid out depth first (each node knows where its subtree ends
 * and which tokens it holds), plus the four control tokens the grammar uses
 * as symbols (<|open|>, <|close|>, <|sep|>, <|end_of_msg|>). Masking walks
 * the trie with the grammar state, skipping a whole subtree as soon as its
 * first byte is refused; a subtree the state accepts wholesale (free text,
 * or plain ASCII inside an unbounded JSON string) is taken in one step.
 *
 * Budget: with `budget` tokens left (this one included), a token is only
 * allowed if the grammar can still be completed after it within the rest
 * (k3_gstate_rem symbols, one token each), so a sampled output closes its
 * JSON and its message before max_tokens instead of being cut. If nothing
 * fits, the token that leaves the least to complete is allowed.
 *
 * Control tokens other than the four are never allowed while a constraint
 * is active. Not thread safe per constraint; the trie is read-only. */
#ifndef K3_GEN_CONSTRAIN_H
#define K3_GEN_CONSTRAIN_H

#include <stddef.h>
#include <stdint.h>

#include "text/grammar.h"
#include "text/tokenizer.h"

typedef struct k3_vtrie k3_vtrie;

/* tok must outlive the trie. ctl_ids: the ids of <|open|>, <|close|>, <|sep|>, <|end_of_msg|> (-1:
 * absent). */
k3_vtrie *k3_vtrie_build(const k3_tokenizer *tok, const int32_t ctl_ids[4], int vocab);
void k3_vtrie_free(k3_vtrie *t);
size_t k3_vtrie_nodes(const k3_vtrie *t);

typedef struct k3_constraint k3_constraint;

/* Takes ownership of g; root is a node of g. */
k3_constraint *k3_constraint_new(const k3_vtrie *t, k3_gram *g, const k3_gnode *root);
void k3_constraint_free(k3_constraint *c);

/* Set logits[id] = -INFINITY for every token not allowed now. Returns the
 * number of allowed tokens (0 only if the grammar is already complete or
 * broken: then the caller should end the generation). */
int k3_constraint_mask(k3_constraint *c, float *logits, int budget);
/* Advance by a chosen token. 0, or -1 if the token does not fit (a bug or a
 * forced token). */
int k3_constraint_accept(k3_constraint *c, int32_t id);
/* How many of ids[0..n), in order, the grammar takes from its present state
 * (speculative drafts: the first one refused ends the run). The state is
 * left as it was. */
int k3_constraint_fits(k3_constraint *c, const int32_t *ids, int n);
/* 1 once the grammar is complete. */
int k3_constraint_done(const k3_constraint *c);
/* 1 once a token was refused only because the budget could not fit its
 * completion (the output was closed early: report finish "length"). */
int k3_constraint_budget_cut(const k3_constraint *c);
/* Trie nodes visited by the last mask (cost measurement). */
size_t k3_constraint_last_visits(const k3_constraint *c);

#endif
