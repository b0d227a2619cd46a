/* generate.h — the generation loop: prefill, then sample / decode one token
 * at a time, streaming the detokenized text through a callback.
 *
 * Stops at a stop id (every eos_token_id of the config and the tokenizer's
 * <|end_of_msg|>; the stop token is not printed and not fed to the cache), at
 * a stop string (matched on the decoded text across token boundaries; the
 * stop string is not printed), at max_tokens, or when the callback asks to.
 *
 * The sequence keeps every token that was fed to it: the prompt and each
 * generated token except the last one sampled (its logits were never
 * needed). k3_gen_stats.last_id says what that token was, so a chat can
 * feed it before the next turn. */
#ifndef K3_GEN_GENERATE_H
#define K3_GEN_GENERATE_H

#include "gen/sampler.h"
#include "k3.h"
#include "text/tokenizer.h"

#include <signal.h>
#include <stddef.h>
#include <stdint.h>

typedef enum {
    K3_FINISH_LENGTH,    /* max_tokens reached */
    K3_FINISH_STOP_ID,   /* a stop token was sampled */
    K3_FINISH_STOP_STR,  /* a stop string appeared in the text */
    K3_FINISH_CANCELLED, /* the callback returned non-zero */
    K3_FINISH_ERROR      /* forward / sampling failed (k3_errmsg) */
} k3_finish;

typedef struct k3_gen_params {
    k3_sampler_params sp;
    int max_tokens;           /* >= 0 */
    const char *const *stops; /* stop strings */
    int n_stops;
    const int32_t *stop_ids; /* extra stop ids besides the config eos ids / <|end_of_msg|> */
    int n_stop_ids;
    const volatile sig_atomic_t *cancel; /* optional: generation stops when *cancel != 0
                                            (checked before every token and between
                                            prefill pieces; e.g. set by SIGINT) */
    volatile sig_atomic_t *prefilling;   /* optional: set to 0 once the prompt is prefilled
                                            (a caller's SIGINT handler can tell the phases apart) */
    int show_special; /* 1: print every control token; 0 (default): drop those whose
                         `special` flag is set (HF skip_special_tokens; keeps XTML markers) */
    int spec_max;     /* speculative decoding from the context (gen/spec.h): at most this many
                         drafts per step; 0 = off */
    const double *spec_cost;      /* the verify costs the drafter weighs, cost[0..K3_DRAFT_MAX] in
                                     plain steps (NULL: the model's, k3_spec_cost_default) */
    const int32_t *draft_context; /* tokens the drafter sees before the prompt: the earlier
                                     part of the sequence (a chat's previous turns) */
    size_t n_draft_context;
    int spec_reject_at; /* test hook: with spec_max, reject every draft at this row (-1: off;
                           0 leaves the hook off too when the struct is zeroed: rows count
                           from 1 here) */
} k3_gen_params;

typedef struct k3_gen_stats {
    int64_t prompt_tokens; /* tokens prefilled by this call */
    double prompt_s;       /* prefill time (including the first sample) */
    int64_t gen_tokens;    /* tokens sampled, a final stop token included */
    double gen_s;          /* time after the prefill */
    k3_finish finish;
    int32_t last_id; /* the last sampled token (not in the cache), -1 if none */
    int32_t *ids;    /* every sampled token, malloc'd (free with k3_gen_stats_free) */
    int64_t steps;   /* decode steps (forward passes after the prefill) */
    int64_t spec_drafted, spec_accepted; /* draft tokens verified, kept */
} k3_gen_stats;

void k3_gen_stats_free(k3_gen_stats *st);

/* Called with each piece of final text (whole UTF-8 characters, stop strings
 * withheld) and the id that produced it (-1 for a flush). The control
 * tokens <|open|>, <|close|> and <|sep|> are reported on their own: text
 * before one is flushed first (with id -1; a stop string never spans a
 * control token), then emit(ctx, its id, its spelling) — so a consumer can
 * tell structure (that id) from the same characters written as text.
 * Return non-zero to stop generating. */
typedef int (*k3_gen_emit)(void *ctx, int32_t id, const char *text, size_t len);

/* Tokens of the prompt fed between two looks at the cancel flag (k3_forward's
 * own pass length, so the pieces give the same bits as one call). */
#define K3_GEN_PREFILL_PIECE 512

/* Prefill prompt[0..n) (n >= 1) into s, then generate. A cancel during the
 * prefill stops it between pieces: st->finish is K3_FINISH_CANCELLED with
 * st->prompt_tokens < n (the sequence holds that part of the prompt). The sampler is
 * created from p->sp and fed the prompt (repetition penalty history).
 * Returns 0 (see st->finish) or -1 + k3_errmsg. */
int k3_generate(k3_model *m, k3_seq *s, const k3_tokenizer *tok, const int32_t *prompt, size_t n,
                const k3_gen_params *p, k3_gen_emit emit, void *ctx, k3_gen_stats *st);

#endif
