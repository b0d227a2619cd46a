/* http_internal.h — state shared by the HTTP files of the server (http.c:
 * daemon, routing, auth, body limits, logging; http_gen.c: the generation
 * endpoints). Not part of the serve API. */
#ifndef K3_SERVE_HTTP_INTERNAL_H
#define K3_SERVE_HTTP_INTERNAL_H

#include <microhttpd.h>
#include <stddef.h>

#include "serve/engine.h"
#include "serve/output.h"
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
} serve_server;

/* Per-connection request state (MHD's con_cls). */
typedef struct {
    serve_server *srv;
    struct MHD_Connection *conn;
    char method[16]; /* escaped copies (valid UTF-8, no control characters) */
    char path[128];  /* for messages and the log line */
    char *url;       /* the raw url, for routing */
    k3_buf body;
    int too_big;
    size_t drained; /* bytes dropped after the body passed the limit */
    int status;     /* HTTP status sent, for the log line */
    double t0;
    serve_job *job; /* generation requests */
} serve_conn;

/* Queue a JSON response (takes ownership of body). */
enum MHD_Result serve_reply_json(serve_conn *c, int status, char *body);
enum MHD_Result serve_reply_err(serve_conn *c, const serve_err *e);
/* 1 if the client closed its end of the connection. */
int serve_client_gone(struct MHD_Connection *conn);

/* POST /v1/chat/completions and /v1/completions, body complete. */
enum MHD_Result serve_handle_generate(serve_conn *c, serve_kind kind);

#endif
