/* responses_get.c — the stored side of the Responses API: GET and DELETE
 * /v1/responses/{id} and GET /v1/responses/{id}/input_items (with limit,
 * order, after, before), answering from the store in the requester's scope
 * (rstore.h), so another scope's id answers 404 exactly as an unknown id. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "serve/http_internal.h"

#define LIST_DEFAULT 20
#define LIST_MAX 100

static const char *arg(serve_conn *c, const char *name) {
    return MHD_lookup_connection_value(c->conn, MHD_GET_ARGUMENT_KIND, name);
}

static enum MHD_Result reply_doc(serve_conn *c, json_t *doc) {
    char *s = json_dumps(doc, JSON_COMPACT);
    json_decref(doc);
    return serve_reply_json(c, 200, s);
}

static enum MHD_Result not_found(serve_conn *c, const char *id) {
    serve_err e;
    serve_err_set(&e, 404, NULL, NULL, "not_found", "Response with id '%.64s' not found.", id);
    return serve_reply_err(c, &e);
}

static enum MHD_Result bad_arg(serve_conn *c, const char *param, const char *msg) {
    serve_err e;
    serve_err_set(&e, 400, NULL, param, "invalid_value", "%s", msg);
    return serve_reply_err(c, &e);
}

/* The index of item `id` in list, or -1. */
static long find_item(const json_t *list, const char *id) {
    size_t i;
    json_t *it;
    json_array_foreach(list, i, it) {
        const char *iid = json_string_value(json_object_get(it, "id"));
        if (iid && !strcmp(iid, id)) return (long)i;
    }
    return -1;
}

/* Read limit / order / after / before. 0, or -1 after queuing a 400. */
static int list_args(serve_conn *c, const json_t *items, long *limit, int *desc, long *from,
                     long *to, enum MHD_Result *ret) {
    const char *l = arg(c, "limit"), *o = arg(c, "order"), *after = arg(c, "after"),
               *before = arg(c, "before");
    char *end = NULL;
    *limit = l ? strtol(l, &end, 10) : LIST_DEFAULT;
    if (l && (!*l || *end || *limit < 1 || *limit > LIST_MAX))
        return *ret = bad_arg(c, "limit", "'limit' must be an integer from 1 to 100."), -1;
    if (o && strcmp(o, "asc") && strcmp(o, "desc"))
        return *ret = bad_arg(c, "order", "'order' must be asc or desc."), -1;
    *desc = !o || !strcmp(o, "desc"); /* OpenAI's default: newest first */
    long n = (long)json_array_size(items), a = after ? find_item(items, after) : -1,
         b = before ? find_item(items, before) : -1;
    if ((after && a < 0) || (before && b < 0))
        return *ret = bad_arg(c, after && a < 0 ? "after" : "before",
                              "'after' / 'before' must name an item of this response."),
               -1;
    /* positions in list order (asc: index, desc: n-1-index), window (from, to) exclusive */
    *from = after ? (*desc ? n - 1 - a : a) : -1;
    *to = before ? (*desc ? n - 1 - b : b) : n;
    return 0;
}

static enum MHD_Result list_items(serve_conn *c, const char *id, const char *scope,
                                  size_t scope_len) {
    char *text = serve_rstore_get(c->srv->rstore, scope, scope_len, id, SERVE_RS_INPUT);
    json_t *items = text ? json_loads(text, 0, NULL) : NULL;
    free(text);
    if (!json_is_array(items)) {
        json_decref(items);
        return not_found(c, id);
    }
    long limit, from, to, n = (long)json_array_size(items);
    int desc;
    enum MHD_Result ret;
    if (list_args(c, items, &limit, &desc, &from, &to, &ret)) {
        json_decref(items);
        return ret;
    }
    json_t *data = json_array();
    long pos = from + 1;
    for (; pos < to && (long)json_array_size(data) < limit; pos++)
        json_array_append(data, json_array_get(items, (size_t)(desc ? n - 1 - pos : pos)));
    size_t k = json_array_size(data);
    json_t *doc = json_pack(
        "{s:s,s:o,s:O,s:O,s:b}", "object", "list", "data", data, "first_id",
        k ? json_object_get(json_array_get(data, 0), "id") : json_null(), "last_id",
        k ? json_object_get(json_array_get(data, k - 1), "id") : json_null(), "has_more", pos < to);
    json_decref(items);
    return reply_doc(c, doc);
}

enum MHD_Result serve_handle_response_get(serve_conn *c) {
    char id[SERVE_RSTORE_ID_MAX + 16];
    const char *slash = strchr(c->rest, '/');
    size_t n = slash ? (size_t)(slash - c->rest) : strlen(c->rest);
    int list = slash && !strcmp(slash, "/input_items");
    int del = !strcmp(c->method, "DELETE");
    if ((slash && !list) || (list && del) || n >= sizeof id) {
        serve_err e;
        serve_err_set(&e, 404, NULL, NULL, "not_found", "Unknown endpoint %s %s.", c->method,
                      c->path);
        return serve_reply_err(c, &e);
    }
    memcpy(id, c->rest, n);
    id[n] = 0;
    /* the scope as for POST: the credential, and cache_salt (here a query
     * parameter) for responses created with one */
    const char *salt = arg(c, "cache_salt");
    size_t scope_len;
    char *scope = serve_conn_scope(c, salt, salt ? strlen(salt) : 0, &scope_len);
    enum MHD_Result ret;
    if (list) {
        ret = list_items(c, id, scope, scope_len);
    } else if (del) {
        ret = serve_rstore_delete(c->srv->rstore, scope, scope_len, id)
                  ? not_found(c, id)
                  : reply_doc(c, json_pack("{s:s,s:s,s:b}", "id", id, "object", "response",
                                           "deleted", 1));
    } else {
        char *text = serve_rstore_get(c->srv->rstore, scope, scope_len, id, SERVE_RS_RESPONSE);
        ret = text ? serve_reply_json(c, 200, text) : not_found(c, id);
    }
    free(scope);
    return ret;
}
