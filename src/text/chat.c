/* chat.c — the XTML chat renderer (chat.md §2): request options, messages,
 * content parts, tool results and their reordering, the internal system
 * messages, the generation prompt, and segment encoding. Tool calls and
 * their arguments are in chat_args.c; the segment writer and tag primitives
 * both use are in chat_render.c. */
#include "text/chat.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "base/mem.h"
#include "text/chat_render.h"

/* Fixed bodies of the internal system messages (chat.md §2.2, §2.4). */
static const char TOOL_CHOICE_REQUIRED[] = "The system is invoked with `tool_choice=required`.\n"
                                           "You MUST call tools in the next message.";
static const char TOOL_CHOICE_NONE[] = "The system is invoked with `tool_choice=none`.\n"
                                       "You MUST NOT call any tools in the next message.";
static const char RF_JSON_OBJECT[] =
    "The system is invoked with `response_format=json_object`.\n"
    "Your response must be raw JSON data without markdown code blocks (```json) or any "
    "additional formatting.";
static const char RF_JSON_SCHEMA_PREFIX[] =
    "The system is invoked with `response_format=json_schema`.\n"
    "Your response must be raw JSON data without markdown code blocks (```json) or any "
    "additional formatting.\n"
    "The JSON data must match the following schema:\n```json\n";
static const char RF_JSON_SCHEMA_SUFFIX[] = "\n```";
static const char THINKING_EFFORT_PREFIX[] =
    "`thinking_effort` guides on how much to think in your thinking channel (not including the "
    "response channel), supported values include `low`, `medium`, `high`, and `max`.\n"
    "Now the system is invoked with `thinking_effort=";
static const char THINKING_EFFORT_SUFFIX[] = "`.";
static const char TOOL_DECLARE_STATIC[] = "# Tools\n"
                                          "Here are the available tools, described in JSONSchema.\n"
                                          "\n"
                                          "```json\n";
static const char TOOL_DECLARE_DYNAMIC[] =
    "## New Tools Available\n"
    "The system dynamically extends the toolset via lazy-loading.\n"
    "You have access to all existing and extended tools.\n"
    "Here are the specs for the extended tools.\n"
    "\n"
    "```json\n";
static const char TOOL_DECLARE_SUFFIX[] = "\n```";

static k3_attr attr_str(const char *key, const char *val) {
    return (k3_attr){key, val, strlen(val)};
}

/* open_tag("message", role=R[, type=T]) — the internal system messages. */
static void open_message(k3_render *r, const char *role, const char *type) {
    k3_attr a[2] = {attr_str("role", role), attr_str("type", type ? type : "")};
    k3_r_open(r, K3_XT_MESSAGE, a, type ? 2 : 1);
}

/* Internal system message: body is one of the fixed texts (whose strip()
 * is a no-op, so it is not applied). */
static void system_message(k3_render *r, const char *type, const char *body, size_t n) {
    open_message(r, "system", type);
    k3_r_text(r, body, n);
    k3_r_end_message(r);
}

/* ---- options ---------------------------------------------------------------- */

void k3_chat_opts_default(k3_chat_opts *o) {
    memset(o, 0, sizeof *o);
    o->thinking = 1;
    o->has_effort = 1;
    strcpy(o->thinking_effort, "max");
    strcpy(o->effort_field, "thinking_effort");
    o->add_generation_prompt = 1;
}

static int get_bool(const json_t *v, const char *field, int *out) {
    if (!json_is_boolean(v)) return k3_seterr("%s: expected true or false", field);
    *out = json_is_true(v);
    return 0;
}

/* Moonshot style {"type": "enabled" | "disabled"} or a plain boolean. */
static int get_thinking_field(const json_t *v, int *out) {
    if (json_is_object(v)) {
        const char *t = json_string_value(json_object_get(v, "type"));
        if (t && !strcmp(t, "disabled")) return *out = 0, 0;
        if (t && !strcmp(t, "enabled")) return *out = 1, 0;
        return k3_seterr("thinking.type: expected \"enabled\" or \"disabled\"");
    }
    return get_bool(v, "thinking", out);
}

static int set_effort(k3_chat_opts *o, const json_t *v, const char *field, int map_openai) {
    if (json_is_null(v)) {
        o->has_effort = 0;
        return 0;
    }
    const char *e = json_string_value(v);
    if (!e || strlen(e) >= sizeof o->thinking_effort)
        return k3_seterr("%s: expected one of \"low\", \"high\", \"max\"", field);
    if (map_openai) {
        int on = k3_chat_effort_map(e, &e);
        if (on < 0) return k3_seterr("%s: expected one of " K3_CHAT_EFFORT_VALUES, field);
        if (!on) return o->thinking = 0, o->has_effort = 0, 0;
    }
    o->has_effort = 1;
    strcpy(o->thinking_effort, e);
    snprintf(o->effort_field, sizeof o->effort_field, "%s", field);
    return 0;
}

/* chat_template_kwargs first, then the top-level aliases. */
static int read_opts(const json_t *req, k3_chat_opts *o) {
    const json_t *kw = json_object_get(req, "chat_template_kwargs"), *v;
    if (kw && !json_is_object(kw) && !json_is_null(kw))
        return k3_seterr("chat_template_kwargs: expected an object");
    if (!json_is_object(kw)) kw = NULL;
    if (kw && (v = json_object_get(kw, "thinking"))) {
        if (get_thinking_field(v, &o->thinking)) return k3_preferr("chat_template_kwargs");
    } else if (kw && (v = json_object_get(kw, "enable_thinking"))) {
        if (get_bool(v, "chat_template_kwargs.enable_thinking", &o->thinking)) return -1;
    } else if ((v = json_object_get(req, "thinking")) && !json_is_null(v)) {
        if (get_thinking_field(v, &o->thinking)) return -1;
    } else if ((v = json_object_get(req, "enable_thinking")) && !json_is_null(v)) {
        if (get_bool(v, "enable_thinking", &o->thinking)) return -1;
    }
    if (kw && (v = json_object_get(kw, "thinking_effort"))) {
        if (set_effort(o, v, "chat_template_kwargs.thinking_effort", 0)) return -1;
    } else if ((v = json_object_get(req, "thinking_effort"))) {
        if (set_effort(o, v, "thinking_effort", 0)) return -1;
    } else if ((v = json_object_get(req, "reasoning_effort")) && !json_is_null(v)) {
        if (set_effort(o, v, "reasoning_effort", 1)) return -1;
    }
    if (kw && (v = json_object_get(kw, "add_generation_prompt"))) {
        if (get_bool(v, "chat_template_kwargs.add_generation_prompt", &o->add_generation_prompt))
            return -1;
    } else if ((v = json_object_get(req, "add_generation_prompt")) && !json_is_null(v)) {
        if (get_bool(v, "add_generation_prompt", &o->add_generation_prompt)) return -1;
    }
    return 0;
}

static const json_t *nonnull(const json_t *v) {
    return v && !json_is_null(v) ? v : NULL;
}

int k3_chat_input_from_request(const json_t *req, k3_chat_input *in) {
    memset(in, 0, sizeof *in);
    k3_chat_opts_default(&in->opts);
    if (!json_is_object(req)) return k3_seterr("request: expected a JSON object");
    in->messages = json_object_get(req, "messages");
    if (!in->messages)
        return k3_seterr("messages: missing (a chat request needs a messages array)");
    in->tools = nonnull(json_object_get(req, "tools"));
    in->tool_choice = nonnull(json_object_get(req, "tool_choice"));
    in->response_format = nonnull(json_object_get(req, "response_format"));
    return read_opts(req, &in->opts);
}

/* ---- content (chat.md §2.3) ------------------------------------------------- */

static int render_content(k3_render *r, const json_t *content, const char *path) {
    if (!content || json_is_null(content)) return 0;
    if (json_is_string(content)) {
        k3_r_text(r, json_string_value(content), json_string_length(content));
        return 0;
    }
    if (!json_is_array(content))
        return k3_seterr("%s.content: expected a string, an array of parts or null", path);
    for (size_t i = 0; i < json_array_size(content); i++) {
        const json_t *part = json_array_get(content, i);
        if (!json_is_object(part))
            return k3_seterr("%s.content[%zu]: a content part must be an object", path, i);
        const json_t *type = json_object_get(part, "type");
        if (!type) return k3_seterr("%s.content[%zu].type: missing", path, i);
        const char *t = json_string_value(type);
        if (t && (!strcmp(t, "image") || !strcmp(t, "image_url"))) {
            /* No image prompts: the placeholder, as a control segment. */
            const char *ph = k3_xtml_image_placeholder();
            k3_r_ctrl_text(r, ph, strlen(ph));
            continue;
        }
        const json_t *text = json_object_get(part, "text");
        if (!json_is_string(text))
            return k3_seterr("%s.content[%zu].text: missing or not a string (part type %s)", path,
                             i, t ? t : "?");
        k3_r_text(r, json_string_value(text), json_string_length(text));
    }
    return 0;
}

/* ---- messages (chat.md §2.2, §2.5) ------------------------------------------ */

/* open_tag("message", role=R[, name=str(name) if truthy]). */
static int open_named_message(k3_render *r, const char *role, const json_t *m, const char *path) {
    const json_t *name = json_object_get(m, "name");
    k3_buf nb = {0};
    if (k3_pytruthy(name) && k3_pystr(&nb, name))
        return k3_seterr("%s.name: expected a string", path);
    k3_attr a[2] = {attr_str("role", role), {"name", nb.s ? nb.s : "", nb.n}};
    k3_r_open(r, K3_XT_MESSAGE, a, k3_pytruthy(name) ? 2 : 1);
    k3_buf_free(&nb);
    return 0;
}

static void tool_declaration(k3_render *r, const char *header, const json_t *tools) {
    k3_buf body = {0};
    k3_buf_puts(&body, header);
    k3_pyjson_dump(&body, tools, K3_PYJSON_COMPACT_SORTED);
    k3_buf_puts(&body, TOOL_DECLARE_SUFFIX);
    open_message(r, "system", "tool-declare");
    k3_r_text(r, body.s, body.n);
    k3_r_end_message(r);
    k3_buf_free(&body);
}

static int render_plain(k3_render *r, const char *role, const json_t *m, const char *path) {
    if (open_named_message(r, role, m, path)) return -1;
    if (render_content(r, json_object_get(m, "content"), path)) return -1;
    k3_r_end_message(r);
    return 0;
}

/* reasoning_content or reasoning (Python `or`), rendered unless None / "". */
static int render_reasoning(k3_render *r, const json_t *m, const char *path) {
    const json_t *rc = json_object_get(m, "reasoning_content");
    if (!k3_pytruthy(rc)) rc = json_object_get(m, "reasoning");
    if (!rc || json_is_null(rc)) return 0;
    k3_buf b = {0};
    if (k3_pystr(&b, rc)) return k3_seterr("%s.reasoning_content: expected a string", path);
    k3_r_text(r, b.s, b.n);
    k3_buf_free(&b);
    return 0;
}

static int render_assistant(k3_render *r, const json_t *m, const char *path) {
    r->last_assistant = m;
    r->tool_index = 0;
    if (open_named_message(r, "assistant", m, path)) return -1;
    if (r->opts->thinking) {
        k3_r_open(r, K3_XT_THINK, NULL, 0);
        if (render_reasoning(r, m, path)) return -1;
        k3_r_close(r, K3_XT_THINK);
    }
    k3_r_open(r, K3_XT_RESPONSE, NULL, 0);
    if (render_content(r, json_object_get(m, "content"), path)) return -1;
    k3_r_close(r, K3_XT_RESPONSE);
    const json_t *calls = json_object_get(m, "tool_calls");
    if (k3_pytruthy(calls) && k3_r_tool_calls(r, calls, path)) return -1;
    k3_r_end_message(r);
    return 0;
}

/* The function name of tool call k (0-based) of an assistant message. */
static const json_t *call_name(const json_t *assistant, size_t k) {
    const json_t *calls = json_object_get(assistant, "tool_calls");
    const json_t *call = json_array_get(calls, k);
    if (!json_is_object(call)) return NULL;
    const json_t *fn = json_object_get(call, "function");
    if (!fn) fn = call;
    return json_object_get(fn, "name");
}

/* Name: "tool" if present, else "name"; if null/absent the matching call of
 * the most recent assistant message (chat.md §2.5.2). */
static int render_tool_result(k3_render *r, const json_t *m, const char *path) {
    r->tool_index++;
    const json_t *name = json_object_get(m, "tool");
    if (!name) name = json_object_get(m, "name");
    if ((!name || json_is_null(name)) && r->last_assistant)
        name = call_name(r->last_assistant, (size_t)r->tool_index - 1);
    if (!name || json_is_null(name))
        return k3_seterr("%s: tool message has no \"tool\"/\"name\" and no matching assistant "
                         "tool call #%d to take the name from",
                         path, r->tool_index);
    k3_buf nb = {0};
    if (k3_pystr(&nb, name)) return k3_seterr("%s.name: expected a string", path);
    char idx[24];
    int il = snprintf(idx, sizeof idx, "%d", r->tool_index);
    k3_attr a[3] = {
        attr_str("role", "tool"), {"tool", nb.s ? nb.s : "", nb.n}, {"index", idx, (size_t)il}};
    k3_r_open(r, K3_XT_MESSAGE, a, 3);
    k3_buf_free(&nb);
    if (render_content(r, json_object_get(m, "content"), path)) return -1;
    k3_r_end_message(r);
    return 0;
}

static int render_message(k3_render *r, const json_t *m, const char *path) {
    if (!json_is_object(m)) return k3_seterr("%s: a message must be an object", path);
    const char *role = json_string_value(json_object_get(m, "role"));
    if (!role) return k3_seterr("%s.role: missing or not a string", path);
    if (!strcmp(role, "user")) return render_plain(r, "user", m, path);
    if (!strcmp(role, "system")) {
        const json_t *tools = json_object_get(m, "tools");
        if (k3_pytruthy(tools)) {
            tool_declaration(r, TOOL_DECLARE_DYNAMIC, tools);
            return 0;
        }
        return render_plain(r, "system", m, path);
    }
    if (!strcmp(role, "assistant")) return render_assistant(r, m, path);
    if (!strcmp(role, "tool")) return render_tool_result(r, m, path);
    return k3_seterr("%s.role: unknown role \"%s\" (expected system, user, assistant or tool)",
                     path, role);
}

/* ---- tool-result reordering (chat.md §2.5.3) -------------------------------- */

static int is_role(const json_t *m, const char *role) {
    const char *r = json_string_value(json_object_get(m, "role"));
    return r && !strcmp(r, role);
}

/* The assistant's tool_calls by id: (id, position) sorted by id, then
 * position, so a binary search finds the first call with an id. Built once
 * per assistant message: O(m log m), each lookup O(log m). */
typedef struct {
    const char *id; /* may hold U+0000: compared with its length */
    size_t len;
    size_t pos; /* 1-based */
} call_ref;

static int id_cmp(const char *a, size_t an, const char *b, size_t bn) {
    int c = memcmp(a, b, an < bn ? an : bn);
    return c ? c : (an > bn) - (an < bn);
}

typedef struct {
    call_ref *v;
    size_t n;
} call_index;

static int call_ref_cmp(const void *a, const void *b) {
    const call_ref *x = a, *y = b;
    int c = id_cmp(x->id, x->len, y->id, y->len);
    return c ? c : (x->pos > y->pos) - (x->pos < y->pos);
}

static void call_index_build(call_index *ix, const json_t *assistant) {
    const json_t *calls = json_object_get(assistant, "tool_calls");
    size_t m = json_array_size(calls);
    ix->v = k3_xmalloc((m ? m : 1) * sizeof *ix->v);
    ix->n = 0;
    for (size_t k = 0; k < m; k++) {
        const json_t *cid = json_object_get(json_array_get(calls, k), "id");
        if (json_is_string(cid))
            ix->v[ix->n++] = (call_ref){json_string_value(cid), json_string_length(cid), k + 1};
    }
    qsort(ix->v, ix->n, sizeof *ix->v, call_ref_cmp);
}

/* Position (1-based) of the first call with this id; 0 if absent. */
static size_t call_index_find(const call_index *ix, const char *id, size_t len) {
    size_t lo = 0, hi = ix->n;
    while (lo < hi) { /* first entry with v.id >= id */
        size_t mid = lo + (hi - lo) / 2;
        if (id_cmp(ix->v[mid].id, ix->v[mid].len, id, len) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < ix->n && !id_cmp(ix->v[lo].id, ix->v[lo].len, id, len) ? ix->v[lo].pos : 0;
}

/* A tool message and the position of the call it answers. */
typedef struct {
    json_t *msg;
    size_t pos, order;
} run_ent;

static int run_ent_cmp(const void *a, const void *b) { /* by position, stable */
    const run_ent *x = a, *y = b;
    if (x->pos != y->pos) return x->pos < y->pos ? -1 : 1;
    return (x->order > y->order) - (x->order < y->order);
}

/* If every tool message of msgs[lo, hi) matches a call of the assistant,
 * stable-sort the run by call position and set tool (and name) to the
 * matched function name; otherwise leave it exactly as given. O(n log n +
 * m log m) for n tool messages and m calls. */
static void reorder_run(json_t *msgs, size_t lo, size_t hi, const json_t *assistant,
                        const call_index *ix) {
    size_t n = hi - lo;
    run_ent *run = k3_xmalloc(n * sizeof *run);
    int all = assistant != NULL;
    for (size_t i = 0; i < n && all; i++) {
        run[i].msg = json_array_get(msgs, lo + i);
        run[i].order = i;
        const json_t *idv = json_object_get(run[i].msg, "tool_call_id");
        if (!k3_pytruthy(idv)) idv = json_object_get(run[i].msg, "id");
        run[i].pos = json_is_string(idv)
                         ? call_index_find(ix, json_string_value(idv), json_string_length(idv))
                         : 0;
        all = run[i].pos > 0;
    }
    for (size_t i = 0; all && i < n; i++) { /* copy, rename */
        json_t *c = json_copy(run[i].msg);
        const json_t *name = call_name(assistant, run[i].pos - 1);
        json_t *nm = name ? json_copy((json_t *)name) : json_null();
        json_object_set(c, "tool", nm);
        if (json_object_get(c, "name")) json_object_set(c, "name", nm);
        json_decref(nm);
        run[i].msg = c;
    }
    if (all) qsort(run, n, sizeof *run, run_ent_cmp);
    for (size_t i = 0; all && i < n; i++) json_array_set_new(msgs, lo + i, run[i].msg);
    free(run);
}

/* A new array holding the messages with each run of tool results normalised. */
static json_t *normalize_tool_results(const json_t *messages) {
    json_t *msgs = json_copy((json_t *)messages);
    const json_t *assistant = NULL;
    call_index ix = {0};
    size_t n = json_array_size(msgs);
    for (size_t i = 0; i < n;) {
        const json_t *m = json_array_get(msgs, i);
        if (!is_role(m, "tool")) {
            if (is_role(m, "assistant")) {
                assistant = m;
                free(ix.v);
                ix.v = NULL;
                ix.n = 0;
            }
            i++;
            continue;
        }
        size_t j = i;
        while (j < n && is_role(json_array_get(msgs, j), "tool")) j++;
        if (assistant && !ix.v) call_index_build(&ix, assistant); /* once per assistant */
        reorder_run(msgs, i, j, assistant, &ix);
        i = j;
    }
    free(ix.v);
    return msgs;
}

/* ---- tail: tool_choice, response_format, generation prompt ------------------ */

static void render_tool_choice(k3_render *r, const json_t *tc) {
    const char *s = json_string_value(tc);
    if (s && !strcmp(s, "required"))
        system_message(r, "tool-choice", TOOL_CHOICE_REQUIRED, sizeof TOOL_CHOICE_REQUIRED - 1);
    else if (s && !strcmp(s, "none"))
        system_message(r, "tool-choice", TOOL_CHOICE_NONE, sizeof TOOL_CHOICE_NONE - 1);
}

/* schema = json_schema.schema, else json_schema.json_schema, else json_schema. */
static void render_json_schema(k3_render *r, const json_t *rf) {
    const json_t *js = json_is_object(rf) ? json_object_get(rf, "json_schema") : NULL, *schema = js;
    if (json_is_object(js) && json_object_get(js, "schema"))
        schema = json_object_get(js, "schema");
    else if (json_is_object(js) && json_object_get(js, "json_schema"))
        schema = json_object_get(js, "json_schema");
    k3_buf body = {0};
    k3_buf_puts(&body, RF_JSON_SCHEMA_PREFIX);
    if (schema)
        k3_pyjson_dump(&body, schema, K3_PYJSON_COMPACT_SORTED);
    else
        k3_buf_puts(&body, "null");
    k3_buf_puts(&body, RF_JSON_SCHEMA_SUFFIX);
    system_message(r, "response-format", body.s, body.n);
    k3_buf_free(&body);
}

static void render_response_format(k3_render *r, const json_t *rf) {
    const char *type =
        json_is_object(rf) ? json_string_value(json_object_get(rf, "type")) : json_string_value(rf);
    if (!type) return;
    if (!strcmp(type, "json_object"))
        system_message(r, "response-format", RF_JSON_OBJECT, sizeof RF_JSON_OBJECT - 1);
    else if (!strcmp(type, "json_schema"))
        render_json_schema(r, rf);
}

static int render_effort(k3_render *r) {
    const char *e = r->opts->thinking_effort;
    if (strcmp(e, "low") && strcmp(e, "high") && strcmp(e, "max"))
        return k3_seterr("%s: \"%s\" is not supported (expected low, high or max)",
                         r->opts->effort_field, e);
    k3_buf body = {0};
    k3_buf_puts(&body, THINKING_EFFORT_PREFIX);
    k3_buf_puts(&body, e);
    k3_buf_puts(&body, THINKING_EFFORT_SUFFIX);
    system_message(r, "thinking-effort", body.s, body.n);
    k3_buf_free(&body);
    return 0;
}

/* ---- the whole prompt (chat.md §2.2) ----------------------------------------- */

static int render_all(k3_render *r, const k3_chat_input *in, const json_t *msgs) {
    if (in->tools && !json_is_array(in->tools)) return k3_seterr("tools: expected an array");
    if (json_array_size(in->tools) > 0) tool_declaration(r, TOOL_DECLARE_STATIC, in->tools);
    if (in->opts.thinking && in->opts.has_effort && render_effort(r)) return -1;
    for (size_t i = 0; i < json_array_size(msgs); i++) {
        char path[40];
        snprintf(path, sizeof path, "messages[%zu]", i);
        if (render_message(r, json_array_get(msgs, i), path)) return -1;
    }
    render_tool_choice(r, in->tool_choice);
    render_response_format(r, in->response_format);
    if (in->opts.add_generation_prompt) {
        open_message(r, "assistant", NULL);
        k3_r_open(r, in->opts.thinking ? K3_XT_THINK : K3_XT_RESPONSE, NULL, 0);
    }
    return 0;
}

int k3_chat_build(const k3_xtml *x, const k3_chat_input *in, k3_chat_segs *out) {
    if (!json_is_array(in->messages)) return k3_seterr("messages: expected an array");
    json_t *msgs = normalize_tool_results(in->messages);
    k3_render r = {.x = x, .out = out, .opts = &in->opts};
    int rc = render_all(&r, in, msgs);
    json_decref(msgs);
    return rc;
}

void k3_chat_segs_free(k3_chat_segs *s) {
    for (size_t i = 0; i < s->n; i++) free(s->v[i].text);
    free(s->v);
    memset(s, 0, sizeof *s);
}

char *k3_chat_segs_join(const k3_chat_segs *s, size_t *len) {
    k3_buf b = {0};
    for (size_t i = 0; i < s->n; i++) k3_buf_put(&b, s->v[i].text, s->v[i].len);
    k3_buf_put(&b, "", 0);
    if (len) *len = b.n;
    return b.s;
}

int k3_chat_segs_encode(const k3_tokenizer *tok, const k3_chat_segs *s, k3_ids *out) {
    for (size_t i = 0; i < s->n; i++)
        if (k3_tok_encode_append(tok, s->v[i].text, s->v[i].len, s->v[i].control, out))
            return k3_preferr("encoding chat segment %zu", i);
    return 0;
}

char *k3_chat_render(const k3_xtml *x, const json_t *req, size_t *len) {
    k3_chat_input in;
    k3_chat_segs segs = {0};
    if (k3_chat_input_from_request(req, &in) || k3_chat_build(x, &in, &segs)) {
        k3_chat_segs_free(&segs);
        return NULL;
    }
    char *s = k3_chat_segs_join(&segs, len);
    k3_chat_segs_free(&segs);
    return s;
}

int k3_chat_encode(const k3_tokenizer *tok, const json_t *req, k3_ids *out) {
    k3_xtml x;
    k3_chat_input in;
    k3_chat_segs segs = {0};
    int rc = -1;
    if (!k3_xtml_init(&x, tok) && !k3_chat_input_from_request(req, &in) &&
        !k3_chat_build(&x, &in, &segs))
        rc = k3_chat_segs_encode(tok, &segs, out);
    k3_chat_segs_free(&segs);
    return rc;
}
