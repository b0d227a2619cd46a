/* engine.h — what the server holds of the model: weights, tokenizer, the
 * XTML vocabulary, stop ids, and the request → prompt-ids step.
 *
 * Loaded once at start-up and read-only afterwards; every HTTP thread may
 * call serve_engine_prompt concurrently (the tokenizer is thread safe), the
 * scheduler's worker is the only thread that runs the model. */
#ifndef K3_SERVE_ENGINE_H
#define K3_SERVE_ENGINE_H

#include <stdint.h>

#include "k3.h"
#include "serve/request.h"
#include "text/tokenizer.h"
#include "text/xtml.h"

#define SERVE_MAX_STOP_IDS 20 /* 2 + up to 16 config eos ids (K3_CONFIG_MAX_EOS) */

typedef struct serve_engine {
    k3_model *model;
    k3_tokenizer *tok;
    k3_xtml xtml;
    int vocab;
    int32_t stop_ids[SERVE_MAX_STOP_IDS]; /* <|end_of_msg|>, [EOS], config eos */
    int n_stop_ids;
    char name[128];          /* the model id clients must send (or omit) */
    int n_ctx_train;         /* config.json max_position_embeddings, 0 if absent */
    struct k3_vtrie *vtrie;  /* vocabulary trie for structured output (NULL: no XTML tokens) */
    int threads;             /* OpenMP threads for the model (0: the OpenMP default) */
    int spec_max;            /* drafts per decode step (--spec-max; 0: --spec off) */
    const double *spec_cost; /* the drafters' verify costs [0..K3_DRAFT_MAX]: --spec-cost's
                                table or the model's (k3_spec_cost_default), set at start;
                                NULL: the drafter's built-in table */
} serve_engine;

/* Load dir. name NULL: the directory's base name. threads 0: OpenMP default.
 * cache_type: the MLA caches' element (k3.h: K3_CACHE_F32 or K3_CACHE_BF16).
 * Returns 0 or -1 + k3_errmsg. */
int serve_engine_open(serve_engine *e, const char *dir, const char *name, int threads,
                      int cache_type);
void serve_engine_close(serve_engine *e);

int serve_engine_is_stop(const serve_engine *e, int32_t id);

/* The prompt ids of a request (chat: XTML rendering; completions: the text
 * encoded without special tokens), malloc'd into *ids. 0, or -1 + err (400
 * for a request the renderer rejects). */
int serve_engine_prompt(const serve_engine *e, const serve_req *q, int32_t **ids, int64_t *n,
                        serve_err *err);
/* Test mode: the forced generation ids of a request (k3_test_force_tokens,
 * or k3_test_force_text tokenized with control tokens allowed), or *ids =
 * NULL when the request forces nothing. Forced ids are not range-checked
 * (tests use that to reach the engine's error path). 0, or -1 + err. */
int serve_engine_forced(const serve_engine *e, const serve_req *q, int32_t **ids, int64_t *n,
                        serve_err *err);

#endif
