/* http_reply.c — what every handler needs from its connection: queueing a
 * reply (JSON, text, a server-sent-event stream) with the CORS headers,
 * errors in the route's shape (OpenAI's, or Anthropic's on /v1/messages),
 * whether the client is still there, its credential (the API-key check and
 * the scope of what the server keeps for it) and the context size requests
 * are held to. A leaf of the HTTP files: the router (http.c) and the
 * handlers call it, it calls none of them. */
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "serve/http_internal.h"

/* No reply path hands MHD a NULL body: a body that could not be built (a
 * json_dumps failure) becomes a 500 with a fixed JSON error. */
enum MHD_Result serve_reply_sse(serve_conn *c, MHD_ContentReaderCallback read, void *cls,
                                MHD_ContentReaderFreeCallback free_cls) {
    struct MHD_Response *r =
        MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16384, read, cls, free_cls);
    MHD_add_response_header(r, "Content-Type", "text/event-stream");
    MHD_add_response_header(r, "Cache-Control", "no-cache");
    serve_add_cors(c, r);
    c->status = 200;
    enum MHD_Result ok = MHD_queue_response(c->conn, 200, r);
    MHD_destroy_response(r);
    return ok;
}

enum MHD_Result serve_reply(serve_conn *c, int status, const char *type, char *body) {
    static const char oom[] = "{\"error\":{\"message\":\"out of memory\",\"type\":"
                              "\"server_error\",\"param\":null,\"code\":null}}";
    if (!body) {
        status = 500;
        type = "application/json";
        body = serve_err_fallback_json();
    }
    struct MHD_Response *r =
        body ? MHD_create_response_from_buffer(strlen(body), body, MHD_RESPMEM_MUST_FREE)
             : MHD_create_response_from_buffer(sizeof oom - 1, (void *)oom, MHD_RESPMEM_PERSISTENT);
    if (!r) {
        free(body);
        return MHD_NO;
    }
    MHD_add_response_header(r, "Content-Type", type);
    serve_add_cors(c, r);
    if (c->close_conn) MHD_add_response_header(r, "Connection", "close");
    c->status = status;
    enum MHD_Result ok = MHD_queue_response(c->conn, (unsigned)status, r);
    MHD_destroy_response(r);
    return ok;
}

enum MHD_Result serve_reply_json(serve_conn *c, int status, char *body) {
    return serve_reply(c, status, "application/json", body);
}

enum MHD_Result serve_reply_err(serve_conn *c, const serve_err *e) {
    if (c->route && c->route->anthropic)
        return serve_reply_json(c, e->status, serve_anthropic_err_json(e));
    return serve_reply_json(c, e->status, serve_err_json(e));
}

int serve_client_gone(struct MHD_Connection *conn) {
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (!ci) return 1;
    struct pollfd p = {.fd = ci->connect_fd, .events = POLLRDHUP};
    if (poll(&p, 1, 0) <= 0) return 0;
    return (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) != 0;
}

/* The context length requests are held to (0: unknown / unlimited). */
int serve_ctx_size(const serve_server *srv) {
    return srv->o->ctx_size > 0 ? srv->o->ctx_size : srv->eng->n_ctx_train;
}

/* Authorization: Bearer KEY, or x-api-key: KEY (Anthropic clients); guard.h. */
int serve_auth_ok(serve_conn *c) {
    serve_cred cred;
    return serve_auth_check(c->srv->o->api_keys, c->srv->o->n_api_keys,
                            MHD_lookup_connection_value(c->conn, MHD_HEADER_KIND, "Authorization"),
                            MHD_lookup_connection_value(c->conn, MHD_HEADER_KIND, "x-api-key"),
                            &cred);
}

int serve_origin_allowed(const serve_server *srv, const char *origin) {
    /* the guard's list match (the one place that decides, guard.h); no Host:
     * same-origin pages need no CORS headers */
    return origin && srv->o->n_cors_origins &&
           serve_guard_origin_allowed(&srv->guard, origin, NULL);
}

void serve_add_cors(serve_conn *c, struct MHD_Response *r) {
    if (!c->srv->o->n_cors_origins) return;
    const char *origin = MHD_lookup_connection_value(c->conn, MHD_HEADER_KIND, "Origin");
    MHD_add_response_header(r, "Vary", "Origin");
    if (!serve_origin_allowed(c->srv, origin)) return;
    MHD_add_response_header(r, "Access-Control-Allow-Origin", origin);
    MHD_add_response_header(r, "Access-Control-Expose-Headers", "Content-Type, Content-Length");
}

/* The scope of what the server keeps for a request (prompt cache, Responses
 * store): the credential it presented and the cache_salt (guard.h). */
char *serve_conn_scope(serve_conn *c, const char *salt, size_t salt_len, size_t *len) {
    serve_cred cred;
    serve_auth_check(c->srv->o->api_keys, c->srv->o->n_api_keys,
                     MHD_lookup_connection_value(c->conn, MHD_HEADER_KIND, "Authorization"),
                     MHD_lookup_connection_value(c->conn, MHD_HEADER_KIND, "x-api-key"), &cred);
    return serve_scope_key(cred, salt, salt_len, len);
}
