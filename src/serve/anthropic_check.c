/* anthropic_check.c — the one validator of an Anthropic Messages request,
 * shared by POST /v1/messages and /v1/messages/count_tokens (serve/apis.h),
 * so that both routes refuse the same bodies: field types and ranges as
 * Anthropic documents them, content blocks, tool_use ids unique and every
 * tool_result answering an earlier tool_use, unique tool names, and the
 * refusal by name of every field k3 does not implement. count_tokens differs
 * only in not requiring max_tokens. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "serve/apis.h"

#define MAX_TOOL_IDS 4096 /* tool_use blocks one request may carry */

static json_t *opt(const json_t *o, const char *k) {
    json_t *v = json_object_get(o, k);
    return v && !json_is_null(v) ? v : NULL;
}

#define BAD(e, param, ...) serve_err_set(e, 400, NULL, param, "invalid_value", __VA_ARGS__)

static int want_string(const json_t *o, const char *k, int required, const char *param,
                       serve_err *e) {
    json_t *v = opt(o, k);
    if (!v && !required) return 0;
    if (!json_is_string(v)) return BAD(e, param, "%s must be a string.", k);
    return 0;
}

/* A string or a list of text blocks (system, tool_result content). */
static int text_or_blocks(const json_t *v, const char *param, serve_err *e) {
    if (json_is_string(v)) return 0;
    if (!json_is_array(v)) return BAD(e, param, "must be a string or a list of text blocks.");
    size_t i;
    json_t *b;
    json_array_foreach(v, i, b) {
        const char *t = json_string_value(json_object_get(b, "type"));
        if (!json_is_object(b) || !t || strcmp(t, "text") ||
            !json_is_string(json_object_get(b, "text"))) {
            char p[96];
            snprintf(p, sizeof p, "%s.%zu", param, i);
            return BAD(e, p, "a text block {\"type\": \"text\", \"text\": string} is expected.");
        }
    }
    return 0;
}

/* tool_use ids seen so far (borrowed strings), for uniqueness and results. */
typedef struct {
    const char *id[MAX_TOOL_IDS];
    int n;
} idset;

static int has_id(const idset *s, const char *id) {
    for (int i = 0; i < s->n; i++)
        if (!strcmp(s->id[i], id)) return 1;
    return 0;
}

static int block(const json_t *b, const char *role, const char *p, idset *ids, serve_err *e) {
    const char *t = json_string_value(json_object_get(b, "type"));
    if (!json_is_object(b) || !t) return BAD(e, p, "a content block needs a string type.");
    int asst = !strcmp(role, "assistant");
    if (!strcmp(t, "text")) return want_string(b, "text", 1, p, e);
    if (!strcmp(t, "thinking") && asst) return want_string(b, "thinking", 1, p, e);
    if (!strcmp(t, "redacted_thinking") && asst) return 0;
    if (!strcmp(t, "tool_use") && asst) {
        if (want_string(b, "id", 1, p, e) || want_string(b, "name", 1, p, e)) return -1;
        json_t *in = opt(b, "input");
        if (in && !json_is_object(in)) return BAD(e, p, "tool_use input must be an object.");
        const char *id = json_string_value(json_object_get(b, "id"));
        if (has_id(ids, id))
            return BAD(e, p, "tool_use ids must be unique: '%.80s' is used twice.", id);
        if (ids->n == MAX_TOOL_IDS)
            return serve_err_set(e, 400, NULL, p, "invalid_value",
                                 "at most %d tool_use blocks per request.", MAX_TOOL_IDS);
        ids->id[ids->n++] = id;
        return 0;
    }
    if (!strcmp(t, "tool_result") && !asst) {
        if (want_string(b, "tool_use_id", 1, p, e)) return -1;
        const char *id = json_string_value(json_object_get(b, "tool_use_id"));
        if (!has_id(ids, id))
            return BAD(e, p,
                       "tool_result for '%.80s', which no earlier tool_use block has as its id.",
                       id);
        json_t *ie = opt(b, "is_error");
        if (ie && !json_is_boolean(ie)) return BAD(e, p, "is_error must be a boolean.");
        json_t *c = opt(b, "content");
        char pc[160];
        snprintf(pc, sizeof pc, "%s.content", p);
        return c ? text_or_blocks(c, pc, e) : 0;
    }
    return serve_err_set(e, 400, NULL, p, "invalid_value",
                         "content block type '%.40s' is not supported in a %s turn (text, "
                         "tool_use and thinking in assistant turns; text and tool_result in "
                         "user turns).",
                         t, role);
}

static int messages(const json_t *req, serve_err *e) {
    json_t *ms = json_object_get(req, "messages");
    if (!json_is_array(ms) || !json_array_size(ms))
        return BAD(e, "messages", "'messages' must be a non-empty array.");
    idset *ids = calloc(1, sizeof *ids);
    if (!ids) return serve_err_set(e, 500, "server_error", NULL, "internal_error", "out of memory");
    int rc = 0;
    size_t i, k;
    json_t *m, *b;
    json_array_foreach(ms, i, m) {
        char p[96];
        snprintf(p, sizeof p, "messages.%zu", i);
        const char *role = json_string_value(json_object_get(m, "role"));
        if (!json_is_object(m) || !role || (strcmp(role, "user") && strcmp(role, "assistant"))) {
            rc = BAD(e, p, "role must be user or assistant.");
            break;
        }
        json_t *c = json_object_get(m, "content");
        if (json_is_string(c)) continue;
        if (!json_is_array(c)) {
            rc = BAD(e, p, "content must be a string or an array of blocks.");
            break;
        }
        json_array_foreach(c, k, b) {
            char pb[128];
            snprintf(pb, sizeof pb, "%s.content.%zu", p, k);
            if ((rc = block(b, role, pb, ids, e))) break;
        }
        if (rc) break;
    }
    free(ids);
    return rc;
}

static int tools(const json_t *req, serve_err *e) {
    json_t *ts = opt(req, "tools");
    if (!ts) return 0;
    if (!json_is_array(ts)) return BAD(e, "tools", "'tools' must be an array.");
    size_t i, j;
    json_t *t;
    json_array_foreach(ts, i, t) {
        char p[64];
        snprintf(p, sizeof p, "tools.%zu", i);
        const char *type = json_string_value(json_object_get(t, "type"));
        if (!json_is_object(t) || (type && strcmp(type, "custom")))
            return BAD(e, p, "only client tools {name, description, input_schema} are supported.");
        if (want_string(t, "name", 1, p, e) || want_string(t, "description", 0, p, e)) return -1;
        json_t *s = opt(t, "input_schema");
        if (s && !json_is_object(s)) return BAD(e, p, "input_schema must be an object.");
        for (j = 0; j < i; j++)
            if (json_equal(json_object_get(json_array_get(ts, j), "name"),
                           json_object_get(t, "name")))
                return BAD(e, p, "tool names must be unique: '%.80s' is used twice.",
                           json_string_value(json_object_get(t, "name")));
    }
    return 0;
}

static int tool_choice(const json_t *req, serve_err *e) {
    json_t *tc = opt(req, "tool_choice");
    if (!tc) return 0;
    const char *t = json_string_value(json_object_get(tc, "type"));
    if (!json_is_object(tc) || !t ||
        (strcmp(t, "auto") && strcmp(t, "any") && strcmp(t, "tool") && strcmp(t, "none")))
        return BAD(e, "tool_choice", "tool_choice.type must be auto, any, tool or none.");
    if (!strcmp(t, "tool") && want_string(tc, "name", 1, "tool_choice", e)) return -1;
    json_t *dp = opt(tc, "disable_parallel_tool_use");
    if (dp && !json_is_boolean(dp))
        return BAD(e, "tool_choice.disable_parallel_tool_use", "must be a boolean.");
    if (json_is_true(dp))
        return serve_err_set(e, 400, NULL, "tool_choice.disable_parallel_tool_use",
                             "unsupported_parameter",
                             "is not supported: the model may call several tools in one turn.");
    return 0;
}

/* thinking: enabled with budget_tokens >= 1024 (an integer), disabled, adaptive. */
static int thinking(const json_t *req, serve_err *e) {
    json_t *th = opt(req, "thinking");
    if (!th) return 0;
    const char *t = json_string_value(json_object_get(th, "type"));
    if (!json_is_object(th) || !t ||
        (strcmp(t, "enabled") && strcmp(t, "disabled") && strcmp(t, "adaptive")))
        return BAD(e, "thinking.type", "must be enabled, disabled or adaptive.");
    if (strcmp(t, "enabled")) return 0;
    json_t *b = json_object_get(th, "budget_tokens");
    if (!json_is_integer(b) || json_integer_value(b) < 1024)
        return BAD(e, "thinking.budget_tokens", "must be an integer >= 1024 (got %s).",
                   json_is_integer(b) ? "a smaller one" : "another type");
    return 0;
}

static int number(const json_t *req, const char *k, double lo, double hi, serve_err *e) {
    json_t *v = opt(req, k);
    if (!v) return 0;
    if (!json_is_number(v) || !(json_number_value(v) >= lo && json_number_value(v) <= hi))
        return serve_err_set(e, 400, NULL, k, "invalid_value", "must be a number in [%g, %g].", lo,
                             hi);
    return 0;
}

/* output_config {effort, format} and the beta's output_format. */
static int output_config(const json_t *req, serve_err *e) {
    json_t *oc = opt(req, "output_config");
    if (oc && !json_is_object(oc)) return BAD(e, "output_config", "must be an object.");
    json_t *ef = opt(oc, "effort");
    const char *efs = json_string_value(ef);
    static const char *const efforts[] = {"low", "medium", "high", "xhigh", "max"};
    int ok = !ef;
    for (size_t i = 0; efs && i < sizeof efforts / sizeof *efforts; i++)
        ok |= !strcmp(efs, efforts[i]);
    if (!ok) return BAD(e, "output_config.effort", "must be low, medium, high, xhigh or max.");
    json_t *f[2] = {opt(oc, "format"), opt(req, "output_format")};
    const char *name[2] = {"output_config.format", "output_format"};
    if (f[0] && f[1]) return BAD(e, "output_format", "give output_config.format only.");
    for (int i = 0; i < 2; i++) {
        if (!f[i]) continue;
        const char *t = json_string_value(json_object_get(f[i], "type"));
        if (!json_is_object(f[i]) || !t || strcmp(t, "json_schema") ||
            !json_is_object(json_object_get(f[i], "schema")))
            return BAD(e, name[i], "must be {\"type\": \"json_schema\", \"schema\": {...}}.");
    }
    return 0;
}

/* Every top-level field: known and implemented, known and refused, or unknown. */
static int fields(const json_t *req, serve_err *e) {
    static const char *const known[] = {"model",
                                        "messages",
                                        "max_tokens",
                                        "system",
                                        "stop_sequences",
                                        "stream",
                                        "temperature",
                                        "top_p",
                                        "top_k",
                                        "tools",
                                        "tool_choice",
                                        "thinking",
                                        "metadata",
                                        "output_config",
                                        "output_format",
                                        "service_tier",
                                        "speculative", /* k3's: speculative decoding */
                                        "k3_test_force_text",
                                        "k3_test_force_tokens"};
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)req, k, v) {
        int ok = 0;
        for (size_t i = 0; !ok && i < sizeof known / sizeof *known; i++) ok = !strcmp(k, known[i]);
        if (!ok && json_is_null(v)) continue;
        if (!ok)
            return serve_err_set(e, 400, NULL, k, "unsupported_parameter",
                                 "is not supported by this server (extra inputs are not "
                                 "permitted).");
    }
    return 0;
}

static int want_bool(const json_t *o, const char *k, serve_err *e) {
    json_t *v = opt(o, k);
    return v && !json_is_boolean(v) ? BAD(e, k, "must be a boolean.") : 0;
}

/* The scalar fields and the small objects around them. */
static int scalars(const json_t *req, int count_only, serve_err *e) {
    json_t *mt = opt(req, "max_tokens");
    if (!count_only && !mt)
        return serve_err_set(e, 400, NULL, "max_tokens", "missing_required_parameter",
                             "Field required");
    if (mt && (!json_is_integer(mt) || json_integer_value(mt) < 1))
        return BAD(e, "max_tokens", "must be an integer >= 1.");
    json_t *tk = opt(req, "top_k");
    if (tk && (!json_is_integer(tk) || json_integer_value(tk) < 0))
        return BAD(e, "top_k", "must be an integer >= 0.");
    if (want_string(req, "model", 0, "model", e) || want_bool(req, "stream", e) ||
        want_bool(req, "speculative", e) || number(req, "temperature", 0, 1, e) ||
        number(req, "top_p", 0, 1, e))
        return -1;
    json_t *md = opt(req, "metadata");
    if (md && !json_is_object(md)) return BAD(e, "metadata", "must be an object.");
    if (md && want_string(md, "user_id", 0, "metadata.user_id", e)) return -1;
    json_t *tier = opt(req, "service_tier");
    const char *ts = json_string_value(tier);
    if (tier && (!ts || (strcmp(ts, "auto") && strcmp(ts, "standard_only"))))
        return BAD(e, "service_tier", "must be auto or standard_only.");
    json_t *ss = opt(req, "stop_sequences"), *s;
    size_t i;
    if (ss && !json_is_array(ss)) return BAD(e, "stop_sequences", "must be a list of strings.");
    json_array_foreach(ss, i, s) {
        if (!json_is_string(s) || !json_string_length(s))
            return BAD(e, "stop_sequences", "must be a list of non-empty strings.");
    }
    json_t *sys = opt(req, "system");
    return sys ? text_or_blocks(sys, "system", e) : 0;
}

int serve_anthropic_check(const json_t *req, int count_only, serve_err *e) {
    if (fields(req, e) || scalars(req, count_only, e) || messages(req, e) || tools(req, e) ||
        tool_choice(req, e) || thinking(req, e) || output_config(req, e))
        return -1;
    return 0;
}
