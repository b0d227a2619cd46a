/* session.h — what `k3 generate` and `k3 chat` share: a loaded model with its
 * tokenizer and XTML spellings, prompt building for one turn, and closing an
 * assistant message in the cache so the next turn can follow it.
 *
 * Multi-turn chat keeps the whole conversation in one k3_seq: each turn
 * renders only the new messages (no second thinking-effort message) and
 * prefills only those tokens; the model's own answer tokens stay in the cache
 * exactly as generated (re-rendering them would tokenize differently). */
#ifndef K3_GEN_SESSION_H
#define K3_GEN_SESSION_H

#include <stdio.h>

#include "gen/gen_opts.h"
#include "k3.h"
#include "text/channels.h"
#include "text/tokenizer.h"
#include "text/xtml.h"

typedef struct k3_session {
    char *dir;   /* model directory */
    int builtin; /* 1: the built-in random model */
    k3_model *m;
    k3_tokenizer *tok;
    k3_xtml x;
    double load_s;
} k3_session;

/* Resolve the model (o->model or the built-in one, announced on `note`),
 * load it (progress bar on a terminal) and its tokenizer. 0 or -1 + k3_errmsg. */
int k3_session_open(k3_session *s, const k3_gen_opts *o, FILE *note);
void k3_session_close(k3_session *s);

/* The ids of one turn, appended to *ids, and the initial output channel
 * (decided on the ids in *ids, control tokens by id).
 * first: include the thinking-effort message (only once per conversation).
 * system may be NULL. raw: the user text itself, control spellings allowed. */
int k3_session_turn(k3_session *s, const char *system, const char *user, int first, int thinking,
                    int raw, k3_ids *ids, k3_chan_state *initial);

/* After a generation stopped with `finish` while the output channel was in
 * `state`: the ids that complete the assistant message in the cache (the
 * unfed last token, closing tags, <|end_of_msg|>). Appended to *ids. */
int k3_session_close_turn(k3_session *s, int32_t last_id, int stopped_by_id, k3_chan_state state,
                          k3_ids *ids);

#endif
