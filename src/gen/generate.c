/* generate.c — the generation loop (see generate.h). */
#include "gen/generate.h"

#include "base/err.h"
#include "base/mem.h"
#include "gen/spec.h"
#include "gen/stop.h"
#include "text/xtml.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
    k3_model *m;
    k3_seq *s;
    const k3_gen_params *p;
    k3_sampler *smp;
    k3_detok *dt;
    k3_stopper *stop;
    k3_xtml x; /* the control-token ids (empty if the tokenizer has none) */
    float *logits;
    double *probs; /* [vocab] scratch of the speculative sampling rule */
    int V;
    k3_spec *spec;
    int32_t stop_ids[2]; /* <|end_of_msg|> (or -1) */
    const int *eos;      /* the model's end-of-sequence ids (config eos_token_id) */
    int n_eos;
    k3_gen_emit emit;
    void *ctx;
    k3_gen_stats *st;
    size_t ids_cap;
} gen_state;

void k3_gen_stats_free(k3_gen_stats *st) {
    free(st->ids);
    st->ids = NULL;
}

static int is_stop_id(const gen_state *g, int32_t id) {
    for (int i = 0; i < 2; i++)
        if (g->stop_ids[i] >= 0 && id == g->stop_ids[i]) return 1;
    for (int i = 0; i < g->n_eos; i++)
        if (id == g->eos[i]) return 1;
    for (int i = 0; i < g->p->n_stop_ids; i++)
        if (id == g->p->stop_ids[i]) return 1;
    return 0;
}

static void record(gen_state *g, int32_t id) {
    k3_gen_stats *st = g->st;
    if ((size_t)st->gen_tokens == g->ids_cap) {
        g->ids_cap = g->ids_cap ? g->ids_cap * 2 : 64;
        st->ids = k3_xrealloc(st->ids, g->ids_cap * sizeof *st->ids);
    }
    st->ids[st->gen_tokens++] = id;
    st->last_id = id;
}

/* A control token: what the detokenizer and the stop matcher hold is final
 * text (id -1), then the token alone. Returns 1 when generation must end. */
static int emit_ctrl(gen_state *g, int32_t id, int ctrl) {
    size_t tl, ol;
    int hit;
    const char *t = k3_detok_flush(g->dt, &tl);
    const char *o = k3_stopper_push(g->stop, t, tl, &ol, &hit);
    int cancel = ol && g->emit && g->emit(g->ctx, -1, o, ol);
    if (!cancel && hit) {
        g->st->finish = K3_FINISH_STOP_STR;
        return 1;
    }
    if (!cancel) {
        o = k3_stopper_flush(g->stop, &ol);
        cancel = ol && g->emit && g->emit(g->ctx, -1, o, ol);
    }
    if (!cancel && g->emit) cancel = g->emit(g->ctx, id, g->x.ctrl[ctrl], g->x.ctrl_len[ctrl]);
    if (cancel) g->st->finish = K3_FINISH_CANCELLED;
    return cancel;
}

/* Text of one token through the stop-string matcher to the callback.
 * Returns 1 when generation must end (stop string or cancel). */
static int emit_token_text(gen_state *g, int32_t id) {
    size_t tl, ol;
    int hit;
    int ctrl = k3_xtml_struct_ctrl(&g->x, id);
    if (ctrl >= 0) return emit_ctrl(g, id, ctrl);
    const char *t = k3_detok_push(g->dt, id, &tl);
    const char *o = k3_stopper_push(g->stop, t, tl, &ol, &hit);
    if (ol && g->emit && g->emit(g->ctx, id, o, ol)) {
        g->st->finish = K3_FINISH_CANCELLED;
        return 1;
    }
    if (hit) g->st->finish = K3_FINISH_STOP_STR;
    return hit;
}

/* End of generation without a stop string: what the detokenizer and the
 * stop matcher still hold is final text. */
static void flush_text(gen_state *g) {
    size_t tl, ol;
    int hit;
    const char *t = k3_detok_flush(g->dt, &tl);
    const char *o = k3_stopper_push(g->stop, t, tl, &ol, &hit);
    if (ol && g->emit) g->emit(g->ctx, -1, o, ol);
    if (hit) return;
    o = k3_stopper_flush(g->stop, &ol);
    if (ol && g->emit) g->emit(g->ctx, -1, o, ol);
}

/* A token is emitted: record it, stop on a stop id, a stop string, a cancel
 * from the callback or max_tokens. Returns 1 when generation must end (the
 * token is then not fed). */
static int take_token(void *ctx, int32_t id) {
    gen_state *g = ctx;
    k3_gen_stats *st = g->st;
    record(g, id);
    if (is_stop_id(g, id)) {
        st->finish = K3_FINISH_STOP_ID;
        return 1;
    }
    k3_sampler_accept_generated(g->smp, id);
    if (emit_token_text(g, id)) return 1;
    return st->gen_tokens == g->p->max_tokens;
}

/* The token at a row: greedy or sampled, with a draft by the sampling rule. */
static int32_t choose_token(void *ctx, const float *logits, int32_t draft) {
    gen_state *g = ctx;
    if (g->p->sp.temp <= 0 || draft < 0) return k3_sampler_sample(g->smp, logits);
    return k3_spec_sample(g->smp, logits, draft, g->probs, g->V);
}

/* Sample, stream and decode until a stop condition. */
static int decode_loop(gen_state *g, double t_start) {
    k3_gen_stats *st = g->st;
    double t_first = 0;
    int rc = 0, stop = 1;
    int32_t id = -1;
    st->finish = K3_FINISH_LENGTH;
    if (g->p->max_tokens > 0 && g->p->cancel && *g->p->cancel)
        st->finish = K3_FINISH_CANCELLED;
    else if (g->p->max_tokens > 0) {
        id = k3_sampler_sample(g->smp, g->logits);
        if (id < 0) return -1;
        t_first = k3_now();
        st->prompt_s = t_first - t_start;
        k3_spec_push(g->spec, id);
        stop = take_token(g, id);
    }
    while (!stop && !rc) {
        if (g->p->cancel && *g->p->cancel) {
            st->finish = K3_FINISH_CANCELLED;
            break;
        }
        rc = k3_spec_step(g->spec, g->s, id, choose_token, take_token, g, &id, &stop);
        if (rc) k3_preferr("decoding token %lld", (long long)st->gen_tokens);
    }
    st->steps = g->spec->steps;
    st->spec_drafted = g->spec->drafted;
    st->spec_accepted = g->spec->accepted;
    if (rc) return -1;
    if (!st->gen_tokens) st->prompt_s = k3_now() - t_start;
    st->gen_s = st->gen_tokens ? k3_now() - t_first : 0;
    if (st->finish != K3_FINISH_STOP_STR) flush_text(g);
    return 0;
}

int k3_generate(k3_model *m, k3_seq *s, const k3_tokenizer *tok, const int32_t *prompt, size_t n,
                const k3_gen_params *p, k3_gen_emit emit, void *ctx, k3_gen_stats *st) {
    memset(st, 0, sizeof *st);
    st->last_id = -1;
    if (!n) return k3_seterr("generate: empty prompt");
    if (p->max_tokens < 0) return k3_seterr("--max-tokens must be >= 0 (got %d)", p->max_tokens);
    int V = k3_model_vocab(m);
    gen_state g = {.m = m, .s = s, .p = p, .emit = emit, .ctx = ctx, .st = st};
    g.smp = k3_sampler_new(&p->sp, V);
    if (!g.smp) return -1;
    g.n_eos = k3_model_eos_ids(m, &g.eos);
    g.stop_ids[0] = -1;
    g.stop_ids[1] = k3_tok_special_id(tok, "<|end_of_msg|>");
    for (size_t i = 0; i < n; i++) k3_sampler_accept(g.smp, prompt[i]);
    g.dt = k3_detok_new(tok, !p->show_special);
    if (k3_xtml_init(&g.x, tok)) { /* no XTML control tokens: nothing is structure */
        memset(&g.x, 0, sizeof g.x);
        k3_clearerr();
    }
    g.stop = k3_stopper_new(p->stops, p->n_stops);
    g.logits = k3_xmalloc((size_t)V * sizeof *g.logits);
    g.V = V;
    g.spec = k3_spec_new(k3_model_can_speculate(m) ? p->spec_max : 0, V); /* else plain */
    g.spec->reject_at = p->spec_reject_at - 1;
    k3_spec_set_cost(g.spec, m, p->spec_cost);
    g.probs = p->spec_max && p->sp.temp > 0 ? k3_xmalloc((size_t)V * sizeof *g.probs) : NULL;
    for (size_t i = 0; i < p->n_draft_context; i++) k3_spec_push(g.spec, p->draft_context[i]);
    for (size_t i = 0; i < n; i++) k3_spec_push(g.spec, prompt[i]);
    double t0 = k3_now();
    /* The prompt in pieces of K3_GEN_PREFILL_PIECE tokens, the cancel flag
     * checked between them: k3_forward feeds a long input in 512-token passes
     * anyway, so the pieces change no bit of the result. */
    int rc = 0;
    size_t done = 0;
    while (!rc && done < n) {
        if (done && p->cancel && *p->cancel) break;
        size_t k = n - done < K3_GEN_PREFILL_PIECE ? n - done : K3_GEN_PREFILL_PIECE;
        rc = k3_forward(s, prompt + done, (int64_t)k, done + k == n ? g.logits : NULL, 0);
        if (!rc) done += k;
    }
    if (p->prefilling) *p->prefilling = 0;
    if (rc) k3_preferr("prefilling %zu prompt tokens", n);
    st->prompt_tokens = (int64_t)done;
    if (!rc && done < n) { /* cancelled inside the prompt */
        st->finish = K3_FINISH_CANCELLED;
        st->prompt_s = k3_now() - t0;
    } else if (!rc)
        rc = decode_loop(&g, t0);
    if (rc) st->finish = K3_FINISH_ERROR;
    free(g.logits);
    free(g.probs);
    k3_spec_free(g.spec);
    k3_stopper_free(g.stop);
    k3_detok_free(g.dt);
    k3_sampler_free(g.smp);
    return rc;
}
