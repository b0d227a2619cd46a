/* http_internal.h — state shared by the HTTP files of the server (http.c:
 * daemon and routing; http_reply.c: replies, errors, CORS, credentials;
 * http_gen.c: generation jobs; anthropic.c, responses.c, http_misc.c: the
 * other handlers). Not part of the serve API. */
#ifndef K3_SERVE_HTTP_INTERNAL_H
#define K3_SERVE_HTTP_INTERNAL_H

#include <microhttpd.h>
#include <stddef.h>

#include "serve/conns.h"
#include "serve/engine.h"
#include "serve/guard.h"
#include "serve/metrics.h"
#include "serve/output.h"
#include "serve/rstore.h"
#include "serve/sched.h"
#include "serve/server.h"

typedef struct {
    serve_engine *eng;
    const serve_opts *o;
    serve_sched *sched;
    serve_limits lim;
    int closing;  /* shutdown began: generation requests get 503 (atomic) */
    int inflight; /* requests between first call and completion (atomic) */
    double t_start;
    serve_metrics metrics;
    serve_guard guard;    /* Host / Origin / framing checks */
    serve_rstore *rstore; /* Responses API store (rstore.h) */
    serve_conns conns;    /* open connections, their deadlines, shedding */
} serve_server;

struct serve_conn;
/* A routing-table row (http.c). */
enum { SERVE_GET = 1, SERVE_POST = 2, SERVE_DELETE = 4 };
typedef struct {
    const char *path;
    unsigned methods; /* SERVE_GET (also HEAD) | SERVE_POST | SERVE_DELETE */
    int prefix;       /* path is a prefix; the rest goes to serve_conn.rest */
    int open;         /* no API key needed */
    enum MHD_Result (*fn)(struct serve_conn *c);
    int anthropic; /* errors in Anthropic's shape */
} serve_route;

/* Per-connection request state (MHD's con_cls). */
typedef struct serve_conn {
    serve_server *srv;
    struct MHD_Connection *conn;
    char method[16]; /* escaped copies (valid UTF-8, no control characters) */
    char path[128];  /* for messages and the log line */
    char *url;       /* the raw url, for routing */
    int close_conn;  /* answer with Connection: close (ambiguous framing) */
    k3_buf body;
    int too_big;
    size_t drained; /* bytes dropped after the body passed the limit */
    int status;     /* HTTP status sent, for the log line */
    double t0;
    serve_job *job;           /* generation requests */
    const serve_route *route; /* NULL: unknown path */
    const char *rest;         /* prefix routes: the path after the prefix */
    serve_conn_slot *slot;    /* the connection's deadline entry (conns.h); may be NULL */
} serve_conn;

/* Queue a response (takes ownership of body), with the CORS headers. */
enum MHD_Result serve_reply(serve_conn *c, int status, const char *type, char *body);
/* Queue a 200 server-sent-event stream produced by read(cls) (free_cls frees cls), with
 * the CORS headers. */
enum MHD_Result serve_reply_sse(serve_conn *c, MHD_ContentReaderCallback read, void *cls,
                                MHD_ContentReaderFreeCallback free_cls);
/* Queue a JSON response (takes ownership of body). */
enum MHD_Result serve_reply_json(serve_conn *c, int status, char *body);
enum MHD_Result serve_reply_err(serve_conn *c, const serve_err *e);
/* 1 if the client closed its end of the connection. */
int serve_client_gone(struct MHD_Connection *conn);

/* 1 if --cors-origin allows this Origin header value ("*" allows any). */
int serve_origin_allowed(const serve_server *srv, const char *origin);
/* Access-Control-Allow-Origin etc. for an allowed Origin (no-op without --cors-origin). */
void serve_add_cors(serve_conn *c, struct MHD_Response *r);
/* --ctx-size, else the model's trained context; 0 = unlimited. */
int serve_ctx_size(const serve_server *srv);

/* 400 context_length_exceeded when the prompt fills the context; else
 * clamps *max_tokens to the room left. 0 or -1 + *e. */
int serve_fit_context(const serve_server *srv, int64_t n_prompt, int *max_tokens, serve_err *e);

/* 1 if the request carries the API key (or none is set): Authorization:
 * Bearer KEY or x-api-key: KEY (http.c). */
int serve_auth_ok(serve_conn *c);

/* http_misc.c: GET /health, /v1/models, /v1/models/{id}, /metrics, /props,
 * POST /tokenize, POST /detokenize. */
enum MHD_Result serve_handle_health(serve_conn *c);
enum MHD_Result serve_handle_models(serve_conn *c);
enum MHD_Result serve_handle_model(serve_conn *c);
enum MHD_Result serve_handle_metrics(serve_conn *c);
enum MHD_Result serve_handle_props(serve_conn *c);
enum MHD_Result serve_handle_tokenize(serve_conn *c);
enum MHD_Result serve_handle_detokenize(serve_conn *c);

/* http_gen.c: validate a `kind` request (root: the request as a JSON tree,
 * taken; NULL: parse c->body) and queue its job (c->job) with render as its
 * renderer (taken; {0}: the chat renderer), then reply with the job's stream
 * or whole body, or the error (400, 429 queue full, 503 shutting down). */
enum MHD_Result serve_run_job(serve_conn *c, serve_kind kind, json_t *root, serve_render render);
/* Its two halves: the job, not queued (NULL + e, also when shutting down);
 * queue j and reply. */
serve_job *serve_open_job(serve_conn *c, serve_kind kind, json_t *root, serve_err *e);
enum MHD_Result serve_run_made(serve_conn *c, serve_job *j, serve_render render);
/* The job of a request, not queued: prompt (and forced) ids, grammar,
 * deadline, cache scope. NULL + *e on a bad request. */
serve_job *serve_make_job(serve_conn *c, serve_kind kind, json_t *root, serve_err *e);
/* Give j its renderer (render, or {0}: the chat one) and queue it; on
 * failure j is released: -1 + e (429 queue full, 503 shutting down). */
int serve_submit_job(serve_conn *c, serve_job *j, serve_render render, serve_err *e);
/* http_choices.c: POST /v1/chat/completions and /v1/completions, body
 * complete: one job, or for n > 1 choices one job per choice, their chunks
 * merged into one stream or their choices into one body. */
enum MHD_Result serve_handle_generate(serve_conn *c, serve_kind kind);
/* responses.c, anthropic.c */
enum MHD_Result serve_handle_responses(serve_conn *c);
enum MHD_Result serve_handle_messages(serve_conn *c);
enum MHD_Result serve_handle_count_tokens(serve_conn *c);
/* GET / DELETE /v1/responses/{id}, GET /v1/responses/{id}/input_items (c->rest). */
enum MHD_Result serve_handle_response_get(serve_conn *c);
/* The scope of c's stored state (guard.h: credential + cache_salt), malloc'd. */
char *serve_conn_scope(serve_conn *c, const char *salt, size_t salt_len, size_t *len);

#endif
