/* request_openai.c — the OpenAI sampling fields beyond temperature / top_p
 * (logit_bias, presence_penalty, frequency_penalty) and the refusal, by name,
 * of every field of OpenAI's chat / completions API that k3 does not
 * implement: a client that asks for n > 8, echo, best_of or audio must learn
 * that it did not get it, rather than receive something else with a 200.
 *
 * Fields that ask nothing of the output (user, metadata, service_tier,
 * store: false, prompt_cache_key, safety_identifier) are accepted. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "serve/request.h"

static json_t *opt(const json_t *obj, const char *key) {
    json_t *v = json_object_get(obj, key);
    return v && !json_is_null(v) ? v : NULL;
}

static int unsupported(serve_err *err, const char *field, const char *why) {
    return serve_err_set(err, 400, NULL, field, "unsupported_parameter",
                         "'%s' is not supported by this server: %s", field, why);
}

static int penalty(const serve_req *q, const char *key, double *out, serve_err *err) {
    json_t *v = opt(q->root, key);
    if (!v) return 0;
    if (!json_is_number(v))
        return serve_err_set(err, 400, NULL, key, "invalid_type", "'%s' must be a number.", key);
    double x = json_number_value(v);
    if (!(x >= -2 && x <= 2))
        return serve_err_set(err, 400, NULL, key, "invalid_value",
                             "'%s' must be between -2 and 2, got %g.", key, x);
    *out = x;
    return 0;
}

/* A token id key: the decimal digits of an id, without sign or leading zero
 * (so that no two keys name the same token), within the vocabulary. */
static int token_key(const char *k, const serve_limits *lim, int32_t *id) {
    size_t n = strlen(k);
    if (!n || n > 10 || (n > 1 && k[0] == '0') || strspn(k, "0123456789") != n) return -1;
    long long v = strtoll(k, NULL, 10);
    if (v > INT32_MAX || (lim->vocab > 0 && v >= lim->vocab)) return -1;
    *id = (int32_t)v;
    return 0;
}

/* logit_bias: {"token id": bias in [-100, 100]}, at most K3_SAMPLER_MAX_BIAS. */
static int parse_logit_bias(serve_req *q, const serve_limits *lim, serve_err *err) {
    json_t *lb = opt(q->root, "logit_bias");
    if (!lb) return 0;
    if (!json_is_object(lb))
        return serve_err_set(err, 400, NULL, "logit_bias", "invalid_type",
                             "'logit_bias' must be an object mapping token ids to biases.");
    size_t n = json_object_size(lb);
    if (n > K3_SAMPLER_MAX_BIAS)
        return serve_err_set(err, 400, NULL, "logit_bias", "invalid_value",
                             "'logit_bias' has %zu entries; at most %d are allowed.", n,
                             K3_SAMPLER_MAX_BIAS);
    q->logit_bias = malloc((n ? n : 1) * sizeof *q->logit_bias);
    if (!q->logit_bias)
        return serve_err_set(err, 500, "server_error", NULL, "internal_error", "out of memory");
    const char *k;
    json_t *v;
    json_object_foreach(lb, k, v) {
        int32_t id;
        char kk[32];
        snprintf(kk, sizeof kk, "%s", k); /* the message quotes at most this much */
        if (token_key(k, lim, &id))
            return serve_err_set(err, 400, NULL, "logit_bias", "invalid_value",
                                 "'logit_bias' key '%s%s' is not a token id of this model "
                                 "(0..%d).",
                                 kk, strlen(k) >= sizeof kk ? "..." : "",
                                 lim->vocab > 0 ? lim->vocab - 1 : INT32_MAX);
        if (!json_is_number(v) || !(json_number_value(v) >= -100 && json_number_value(v) <= 100))
            return serve_err_set(err, 400, NULL, "logit_bias", "invalid_value",
                                 "'logit_bias' value of token %d must be a number between -100 "
                                 "and 100.",
                                 id);
        q->logit_bias[q->n_logit_bias++] = (k3_logit_bias){id, (float)json_number_value(v)};
    }
    return 0;
}

/* n: chat answers with up to SERVE_MAX_N choices, completions with one;
 * best_of: no candidates to choose from. */
static int parse_choices(serve_req *q, serve_err *err) {
    json_t *n = opt(q->root, "n"), *bo = opt(q->root, "best_of");
    int max = q->kind == SERVE_CHAT ? SERVE_MAX_N : 1;
    double v = json_is_number(n) ? json_number_value(n) : 0;
    if (n && (!(v >= 1 && v <= max) || v != (double)(int)v)) {
        if (max == 1)
            return serve_err_set(err, 400, NULL, "n", "unsupported_parameter",
                                 "'n' must be 1 on /v1/completions (send several requests; "
                                 "they are batched together).");
        return serve_err_set(err, 400, NULL, "n", "invalid_value",
                             "'n' must be an integer from 1 to %d (choices per request).", max);
    }
    if (n) q->n = (int)v;
    if (bo && q->kind == SERVE_COMPLETION && (!json_is_number(bo) || json_number_value(bo) != 1))
        return serve_err_set(err, 400, NULL, "best_of", "unsupported_parameter",
                             "'best_of' must equal n (1): this server does not generate "
                             "candidates to choose from.");
    return 0;
}

/* Fields whose absence, false or default value is all k3 implements. */
static int refuse_unimplemented(serve_req *q, serve_err *err) {
    json_t *r = q->root, *v;
    if (q->kind == SERVE_COMPLETION) {
        if (json_is_true(opt(r, "echo")))
            return unsupported(err, "echo", "the prompt is not echoed back (send echo: false).");
        v = opt(r, "suffix");
        if (v && !(json_is_string(v) && !json_string_length(v)))
            return unsupported(err, "suffix", "fill-in-the-middle is not implemented.");
        return 0;
    }
    static const char *const never[] = {"audio", "prediction", "web_search_options", "functions",
                                        "function_call"};
    for (size_t i = 0; i < sizeof never / sizeof *never; i++)
        if (opt(r, never[i])) return unsupported(err, never[i], "not implemented.");
    if (json_is_false(opt(r, "parallel_tool_calls")))
        return unsupported(err, "parallel_tool_calls",
                           "the model may call several tools in one turn; false cannot be "
                           "enforced.");
    if (json_is_true(opt(r, "store")))
        return unsupported(err, "store", "chat completions are not stored (use /v1/responses).");
    v = opt(r, "verbosity");
    if (v && !(json_is_string(v) && !strcmp(json_string_value(v), "medium")))
        return unsupported(err, "verbosity", "only the default, \"medium\", is implemented.");
    v = opt(r, "modalities");
    if (v &&
        !(json_is_array(v) && json_array_size(v) == 1 && json_is_string(json_array_get(v, 0)) &&
          !strcmp(json_string_value(json_array_get(v, 0)), "text")))
        return unsupported(err, "modalities", "only [\"text\"] is implemented.");
    return 0;
}

int serve_req_parse_openai(serve_req *q, const serve_limits *lim, serve_err *err) {
    if (penalty(q, "presence_penalty", &q->presence_penalty, err) ||
        penalty(q, "frequency_penalty", &q->frequency_penalty, err) ||
        parse_logit_bias(q, lim, err) || parse_choices(q, err) || refuse_unimplemented(q, err))
        return -1;
    return 0;
}
