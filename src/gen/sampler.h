/* sampler.h — choosing the next token from logits.
 *
 * The chain, in order (llama.cpp's default order; mlx-lm applies the same
 * filters to the untempered distribution and the temperature last too):
 *
 *   0. logit bias: bias[id] is added to logit[id] (OpenAI's logit_bias; a
 *      token listed twice gets both), before anything else, greedy included,
 *   1. repetition penalty over the last `rep_context` accepted tokens (CTRL
 *      style: a positive logit is divided by the penalty, a negative one
 *      multiplied; each distinct token once),
 *   1b. presence / frequency penalties (OpenAI's definition): with c[j] the
 *      number of times token j was generated so far (k3_sampler_accept_generated;
 *      prompt tokens do not count), logit[j] -= c[j] * frequency_penalty +
 *      (c[j] > 0) * presence_penalty,
 *   2. temp <= 0: greedy — the highest logit, lowest id on ties; stop here,
 *   3. top-k: keep the k highest logits (ties broken by lower id),
 *   4. top-p: keep the smallest prefix (by probability) whose mass, over what
 *      top-k kept, reaches p,
 *   5. min-p: keep tokens whose probability is >= min_p x the top probability,
 *   6. temperature: sample from softmax(logit / temp) over what is left.
 *
 * Sampling is deterministic: a xoshiro256** generator seeded from `seed`,
 * one uniform draw u per sampled token; the token is the first candidate, in
 * ascending id order, at which the running sum of tempered weights exceeds
 * u x their total. All arithmetic is sequential and in double precision, and
 * every sum runs in a defined order (id order; the top-p running mass in
 * rank order), so the result does not depend on how candidates are sorted
 * internally (only the ranks top-k / top-p need are computed). Tokens whose
 * tempered probability is below e^-40 of the best one are dropped first
 * (their total mass is < 1e-12).
 *
 * Not thread safe: one sampler per sequence. */
#ifndef K3_GEN_SAMPLER_H
#define K3_GEN_SAMPLER_H

#include <stddef.h>
#include <stdint.h>

/* One logit_bias entry: bias is added to token id's logit (-100..100). */
typedef struct {
    int32_t id;
    float bias;
} k3_logit_bias;

typedef struct k3_sampler_params {
    float temp;                /* 0 = greedy */
    int top_k;                 /* 0 = off */
    float top_p;               /* 1 = off */
    float min_p;               /* 0 = off */
    float rep_penalty;         /* 1 = off */
    int rep_context;           /* tokens of history the penalty looks at (mlx-lm default 20) */
    float presence_penalty;    /* -2..2, 0 = off */
    float frequency_penalty;   /* -2..2, 0 = off */
    const k3_logit_bias *bias; /* n_bias entries (copied by k3_sampler_new) */
    int n_bias;
    uint64_t seed;
} k3_sampler_params;

/* The most logit_bias entries a sampler takes. */
#define K3_SAMPLER_MAX_BIAS 1024

/* The largest rep_context accepted (its ring buffer is allocated up front). */
#define K3_SAMPLER_MAX_REP_CONTEXT 65536

/* Defaults: greedy, filters and penalties off, no bias, rep_context 20, seed 0. */
k3_sampler_params k3_sampler_defaults(void);
/* Range checks with a message naming the option; 0 or -1. */
int k3_sampler_check(const k3_sampler_params *p);

typedef struct k3_sampler k3_sampler;

/* A sampler for a vocabulary of `vocab` ids. NULL + k3_errmsg on bad params. */
k3_sampler *k3_sampler_new(const k3_sampler_params *p, int vocab);
void k3_sampler_free(k3_sampler *s);
/* Forget the history and restart the generator from the seed. */
void k3_sampler_reset(k3_sampler *s);

/* Record a token (prompt or generated) in the repetition-penalty history. */
void k3_sampler_accept(k3_sampler *s, int32_t id);
/* Record a generated token: the repetition history as k3_sampler_accept, and
 * the counts the presence / frequency penalties read. */
void k3_sampler_accept_generated(k3_sampler *s, int32_t id);

/* Next token for these logits [vocab] (not modified). Does not accept it. */
int32_t k3_sampler_sample(k3_sampler *s, const float *logits);

/* The distribution step 6 samples from: probs[vocab] (0 for filtered ids).
 * Greedy gives a one-hot vector. Does not advance the generator. For tests
 * and for logprob reporting. Returns the number of non-zero entries. */
int k3_sampler_probs(k3_sampler *s, const float *logits, double *probs);

/* A fresh 64-bit value from the sampler's generator (tests). */
uint64_t k3_sampler_next_u64(k3_sampler *s);

#endif
