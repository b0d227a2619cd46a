/* http.c — the HTTP side of `k3 serve` on libmicrohttpd (server.h).
 *
 * Thread per connection: a connection waiting for generated tokens blocks
 * only its own thread, so /health and /v1/models answer at once whatever
 * the scheduler is doing. This file owns the daemon and routing: the
 * ROUTES table, the Bearer check, the framing checks (framing.h), the body
 * limit (413), the per-request log line and the SIGINT/SIGTERM shutdown.
 * It only routes: the handlers answer (http_gen.c the generation
 * endpoints, anthropic.c and responses.c their APIs, http_misc.c the small
 * ones), http_reply.c queues their replies, and conns.c keeps each
 * connection's request deadline and sheds near the connection cap. */
#include <arpa/inet.h>
#include <malloc.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "base/err.h"
#include "base/mem.h"
#include "base/utf8safe.h"
#include "serve/framing.h"
#include "serve/http_internal.h"
#include "serve/limits.h"
#include "serve/webui.h"

#define DRAIN_MAX ((size_t)64 << 20) /* oversized chunked bytes read before hanging up */
#define TRIM_AFTER ((size_t)1 << 20) /* bodies this big are followed by malloc_trim */
/* A connection's buffer for the request line and headers (libmicrohttpd's
 * default, made explicit): longer ones get 414 / 431 from libmicrohttpd. */
#define HEADER_BUFFER ((size_t)32 << 10)

void serve_opts_default(serve_opts *o) {
    memset(o, 0, sizeof *o);
    o->host = "127.0.0.1";
    o->port = 8000;
    o->max_body = 8u << 20;
    o->max_tokens_cap = 4096;
    o->timeout_s = 600;
    o->shutdown_grace_s = 10;
    o->max_active = 64;
    o->prefill_chunk = 64;
    o->batch_window_s = 0.010;
    o->cache_budget = (size_t)1 << 30;
    o->responses_budget = SIZE_MAX;
    o->state_reserve = SIZE_MAX;
    o->max_connections = 512;
    o->max_queue = 256;
    o->max_step_tokens = 512;
    o->max_conn_per_ip = 128;
    o->idle_timeout_s = 15;
    o->max_unread = (size_t)1 << 20;
    o->header_timeout_s = 20;
    o->body_timeout_s = 30;
    o->min_body_rate = 4096;
}

/* ---------------- responses ---------------- */

static enum MHD_Result reply_error(serve_conn *c, int status, const char *type, const char *code,
                                   const char *msg) {
    serve_err e;
    serve_err_set(&e, status, type, NULL, code, "%s", msg);
    return serve_reply_err(c, &e);
}

/* ---------------- GET endpoints ---------------- */

static enum MHD_Result handle_chat(serve_conn *c) {
    return serve_handle_generate(c, SERVE_CHAT);
}
static enum MHD_Result handle_completions(serve_conn *c) {
    return serve_handle_generate(c, SERVE_COMPLETION);
}

/* ---------------- routing ---------------- */

/* One row per endpoint. A path given with the /v1 prefix also answers
 * without it (and one without, with it): /v1/models == /models. `open`:
 * no API key needed. `prefix`: the path is a prefix, the rest (non-empty)
 * goes to c->rest. */
static const serve_route ROUTES[] = {
    {"/", SERVE_GET, 0, 1, serve_handle_webui, 0},
    {"/health", SERVE_GET, 0, 1, serve_handle_health, 0},
    {"/metrics", SERVE_GET, 0, 0, serve_handle_metrics, 0},
    {"/props", SERVE_GET, 0, 0, serve_handle_props, 0},
    {"/tokenize", SERVE_POST, 0, 0, serve_handle_tokenize, 0},
    {"/detokenize", SERVE_POST, 0, 0, serve_handle_detokenize, 0},
    {"/v1/models", SERVE_GET, 0, 0, serve_handle_models, 0},
    {"/v1/models/", SERVE_GET, 1, 0, serve_handle_model, 0},
    {"/v1/chat/completions", SERVE_POST, 0, 0, handle_chat, 0},
    {"/v1/completions", SERVE_POST, 0, 0, handle_completions, 0},
    {"/v1/responses", SERVE_POST, 0, 0, serve_handle_responses, 0},
    {"/v1/responses/", SERVE_GET | SERVE_DELETE, 1, 0, serve_handle_response_get, 0},
    {"/v1/messages", SERVE_POST, 0, 0, serve_handle_messages, 1},
    {"/v1/messages/count_tokens", SERVE_POST, 0, 0, serve_handle_count_tokens, 1},
};

/* The path with a leading "/v1" dropped ("/v1/models" -> "/models"). */
static const char *unversioned(const char *p) {
    return !strncmp(p, "/v1/", 4) ? p + 3 : p;
}

static const serve_route *find_route(const char *path, const char **rest) {
    const char *p = unversioned(path);
    for (size_t i = 0; i < sizeof ROUTES / sizeof *ROUTES; i++) {
        const char *r = unversioned(ROUTES[i].path);
        size_t n = strlen(r);
        if (ROUTES[i].prefix ? !strncmp(p, r, n) && p[n] : !strcmp(p, r)) {
            *rest = p + n;
            return &ROUTES[i];
        }
    }
    *rest = "";
    return NULL;
}

static enum MHD_Result reply_unauthorized(serve_conn *c) {
    return reply_error(c, 401, NULL, "invalid_api_key",
                       "Incorrect or missing API key: send 'Authorization: Bearer <key>' or "
                       "'x-api-key: <key>'.");
}

/* OPTIONS: a CORS preflight from an allowed origin gets 204 with the
 * methods and headers it asked for; from another origin 403 (the browser
 * then refuses the real request); a plain OPTIONS gets 204 + Allow. */
static enum MHD_Result handle_options(serve_conn *c, const serve_route *rt) {
    const char *origin = MHD_lookup_connection_value(c->conn, MHD_HEADER_KIND, "Origin");
    const char *want =
        MHD_lookup_connection_value(c->conn, MHD_HEADER_KIND, "Access-Control-Request-Method");
    const char *allow = rt->methods == SERVE_GET     ? "GET, HEAD, OPTIONS"
                        : rt->methods & SERVE_DELETE ? "GET, HEAD, DELETE, OPTIONS"
                                                     : "POST, OPTIONS";
    if (origin && want && !serve_origin_allowed(c->srv, origin)) {
        char msg[300];
        snprintf(msg, sizeof msg,
                 "Cross-origin requests from '%.200s' are not allowed (see --cors-origin).",
                 origin);
        return reply_error(c, 403, NULL, "origin_not_allowed", msg);
    }
    struct MHD_Response *r = MHD_create_response_from_buffer(0, "", MHD_RESPMEM_PERSISTENT);
    MHD_add_response_header(r, "Allow", allow);
    if (origin && want) {
        serve_add_cors(c, r);
        MHD_add_response_header(r, "Access-Control-Allow-Methods", allow);
        const char *hdrs =
            MHD_lookup_connection_value(c->conn, MHD_HEADER_KIND, "Access-Control-Request-Headers");
        MHD_add_response_header(r, "Access-Control-Allow-Headers",
                                hdrs && *hdrs ? hdrs
                                              : "Authorization, Content-Type, x-api-key, "
                                                "anthropic-version");
        MHD_add_response_header(r, "Access-Control-Max-Age", "600");
    }
    c->status = 204;
    enum MHD_Result ok = MHD_queue_response(c->conn, 204, r);
    MHD_destroy_response(r);
    return ok;
}

static unsigned method_bit(const char *m) {
    if (!strcmp(m, "GET") || !strcmp(m, "HEAD")) return SERVE_GET; /* MHD drops HEAD bodies */
    if (!strcmp(m, "POST")) return SERVE_POST;
    if (!strcmp(m, "DELETE")) return SERVE_DELETE;
    return 0;
}

static enum MHD_Result route(serve_conn *c) {
    const serve_route *rt = c->route;
    if (!rt) {
        char msg[256];
        snprintf(msg, sizeof msg, "Unknown endpoint %s %s.", c->method, c->path);
        return reply_error(c, 404, NULL, "not_found", msg);
    }
    if (!strcmp(c->method, "OPTIONS")) return handle_options(c, rt);
    if (!rt->open && !serve_auth_ok(c)) return reply_unauthorized(c);
    if (!(method_bit(c->method) & rt->methods)) {
        char msg[256];
        snprintf(msg, sizeof msg, "Use %s %.150s.", rt->methods & SERVE_GET ? "GET" : "POST",
                 c->path);
        return reply_error(c, 405, NULL, "method_not_allowed", msg);
    }
    if (c->too_big) {
        char msg[128];
        snprintf(msg, sizeof msg, "The request body exceeds the limit of %zu bytes.",
                 c->srv->o->max_body);
        return reply_error(c, 413, NULL, "request_too_large", msg);
    }
    return rt->fn(c);
}

/* A Content-Length above the limit is refused before the body is read. */
static int declared_too_big(serve_conn *c) {
    const char *cl = MHD_lookup_connection_value(c->conn, MHD_HEADER_KIND, "Content-Length");
    return cl && strtoull(cl, NULL, 10) > c->srv->o->max_body;
}

/* Queue e's answer; the connection is closed after it (libmicrohttpd then
 * reads no more of the request). Returns 1. */
static int refuse_and_close(serve_conn *c, const serve_err *e) {
    c->close_conn = 1;
    serve_reply_err(c, e);
    if (!c->status) c->status = e->status; /* for the log even if queueing failed */
    return 1;
}

/* Host / Origin / Content-Length+chunked checks (serve/guard.h); on refusal
 * the answer is queued and the connection closed after it. */
static int guard_refuses(serve_conn *c) {
    serve_guard_hdrs h = {
        .method = c->method,
        .host = MHD_lookup_connection_value(c->conn, MHD_HEADER_KIND, "Host"),
        .origin = MHD_lookup_connection_value(c->conn, MHD_HEADER_KIND, "Origin"),
        .content_length = MHD_lookup_connection_value(c->conn, MHD_HEADER_KIND, "Content-Length"),
        .transfer_encoding =
            MHD_lookup_connection_value(c->conn, MHD_HEADER_KIND, "Transfer-Encoding")};
    serve_err e;
    if (!serve_guard_check(&c->srv->guard, &h, &e)) return 0;
    return refuse_and_close(c, &e);
}

static enum MHD_Result add_header(void *cls, enum MHD_ValueKind kind, const char *key,
                                  size_t key_size, const char *value, size_t value_size) {
    serve_framing_add(cls, key, key_size, value, value_size);
    return MHD_YES;
}

/* Header names, Content-Length, Transfer-Encoding (serve/framing.h): every
 * header, duplicates included, not only the first of each name. */
static int framing_refuses(serve_conn *c) {
    serve_framing f = {0};
    MHD_get_connection_values_n(c->conn, MHD_HEADER_KIND, add_header, &f);
    serve_err e;
    if (!serve_framing_check(&f, &e)) return 0;
    return refuse_and_close(c, &e);
}

/* The first call for a request: its headers are in. Checks that need no
 * body run here, so a refused request is answered before any is read. */
static enum MHD_Result begin_request(serve_server *srv, serve_conn *c, const char *url,
                                     const char *method) {
    c->t0 = k3_now();
    /* method and path are client bytes: escaped (invalid UTF-8, control
     * characters) for messages and the log; routing uses the raw url */
    k3_utf8_escape(c->method, sizeof c->method, method, strlen(method), K3_UTF8_CTRL);
    k3_utf8_escape(c->path, sizeof c->path, url, strlen(url), K3_UTF8_CTRL);
    c->url = k3_xstrdup(url);
    __atomic_add_fetch(&srv->inflight, 1, __ATOMIC_SEQ_CST);
    c->route = find_route(c->url, &c->rest);
    if (guard_refuses(c) || framing_refuses(c))
        return MHD_YES; /* Host, Origin, framing: before all else */
    if (c->route && !c->route->open && strcmp(method, "OPTIONS") && !serve_auth_ok(c))
        return reply_unauthorized(c); /* before reading any body */
    if (!strcmp(method, "POST") && declared_too_big(c)) {
        c->too_big = 1;
        return route(c);
    }
    return MHD_YES;
}

/* The connection's deadline now runs for phase p (serve/conns.h). */
static void set_phase(serve_conn *c, serve_phase p) {
    if (c->slot) serve_conns_phase(&c->srv->conns, c->slot, p, k3_now());
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_size, void **con_cls) {
    serve_server *srv = cls;
    serve_conn *c = *con_cls;
    if (!c) {
        c = k3_xcalloc(1, sizeof *c);
        c->srv = srv;
        c->conn = conn;
        c->slot = serve_conns_slot(conn);
        *con_cls = c;
        enum MHD_Result r = begin_request(srv, c, url, method);
        set_phase(c, c->status ? SERVE_PHASE_RUN : SERVE_PHASE_BODY); /* answered: no body */
        return r;
    }
    if (*upload_size) {
        if (c->slot) serve_conns_body_bytes(&srv->conns, c->slot, *upload_size);
        if (c->status) { /* answered already (401, 413): ignore the body */
            *upload_size = 0;
            return MHD_YES;
        }
        if (c->body.n + *upload_size > srv->o->max_body) {
            /* A chunked body grew past the limit. libmicrohttpd can only
             * answer once the upload is read, so drop the data until then;
             * past DRAIN_MAX more bytes, close the connection instead. */
            c->too_big = 1;
            c->drained += *upload_size;
            if (c->drained > DRAIN_MAX) return MHD_NO;
        } else {
            k3_buf_put(&c->body, upload_data, *upload_size);
        }
        *upload_size = 0;
        return MHD_YES;
    }
    set_phase(c, SERVE_PHASE_RUN); /* the request is complete */
    if (c->status) return MHD_YES; /* already answered (early 413) */
    return route(c);
}

/* ---------------- per-request log line ---------------- */

static void log_request(serve_conn *c) {
    double dur = k3_now() - c->t0;
    const serve_job *j = c->job;
    serve_metrics_request(&c->srv->metrics, c->route ? c->route->path : "unknown", c->status);
    if (!j) {
        fprintf(stderr, "k3 serve: %s %s %d %.1fms\n", c->method, c->path, c->status, dur * 1e3);
        return;
    }
    double ttft = j->t_first_token > 0 ? (j->t_first_token - j->t_submit) * 1e3 : 0;
    double gen_s =
        j->t_first_token > 0 && j->t_done > j->t_first_token ? j->t_done - j->t_first_token : 0;
    double tps = gen_s > 0 && j->n_gen > 1 ? (double)(j->n_gen - 1) / gen_s : 0;
    if (j->done && j->status == 200)
        serve_metrics_generation(&c->srv->metrics, j->usage.prompt_tokens, (int)j->n_gen,
                                 j->usage.cached_tokens, ttft > 0 ? ttft / 1e3 : -1,
                                 tps > 0 ? tps : -1, dur);
    if (j->done) serve_metrics_job(&c->srv->metrics, j);
    char cons[48] = ""; /* structured output: grammar time per generated token */
    if (j->constraint && j->n_gen > 0)
        snprintf(cons, sizeof cons, " constrain=%.1fus/tok",
                 j->t_constrain * 1e6 / (double)j->n_gen);
    fprintf(stderr,
            "k3 serve: %s %s %d prompt=%d cached=%d prefill=%lld completion=%lld "
            "ttft=%.1fms tok/s=%.1f total=%.1fms finish=%s%s%s\n",
            c->method, c->path, c->status, j->usage.prompt_tokens, j->usage.cached_tokens,
            (long long)j->n_prefilled, (long long)j->n_gen, ttft, tps, dur * 1e3,
            j->finish_reason ? j->finish_reason : "-", j->req.stream ? " stream" : "", cons);
}

/* Wait (bounded) until the worker has published the job's results. */
static void wait_done(serve_job *j, double max_s) {
    double until = k3_now() + max_s;
    for (;;) {
        char *b;
        size_t n;
        int done = serve_job_take(j, 0.05, &b, &n);
        free(b);
        if (done || k3_now() > until) return;
        pthread_mutex_lock(&j->mu);
        done = j->done;
        pthread_mutex_unlock(&j->mu);
        if (done) return;
    }
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode toe) {
    serve_conn *c = *con_cls;
    if (!c) return;
    if (c->job) {
        /* a client that went away mid-stream frees its sequence now */
        if (toe != MHD_REQUEST_TERMINATED_COMPLETED_OK) serve_job_cancel(c->job);
        wait_done(c->job, 10.0); /* the worker retires a cancelled job within one step */
        log_request(c);
        serve_job_release(c->job);
    } else {
        log_request(c);
    }
    __atomic_sub_fetch(&c->srv->inflight, 1, __ATOMIC_SEQ_CST);
    set_phase(c, SERVE_PHASE_HEAD); /* a kept-alive connection waits for the next request */
    size_t body_cap = c->body.cap;
    k3_buf_free(&c->body);
    free(c->url);
    free(c);
    *con_cls = NULL;
    /* a big request (body, JSON tree, prompt) leaves freed pages in the
     * allocator's arenas: give them back to the system */
    if (body_cap >= TRIM_AFTER) malloc_trim(0);
}

/* ---------------- daemon and shutdown ---------------- */

/* A numeric address, or a host name resolved to its first address
 * ("localhost" -> 127.0.0.1 or ::1). */
static int make_addr(const char *host, int port, struct sockaddr_storage *ss) {
    memset(ss, 0, sizeof *ss);
    struct addrinfo hints = {
        .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE | AI_ADDRCONFIG};
    struct addrinfo *res = NULL;
    int rc = getaddrinfo(host, NULL, &hints, &res);
    if (rc == EAI_BADFLAGS || (rc && strcmp(host, "localhost") == 0)) {
        hints.ai_flags = AI_PASSIVE; /* no configured address yet (containers): still try */
        rc = getaddrinfo(host, NULL, &hints, &res);
    }
    if (rc || !res)
        return k3_seterr("--host '%s' is neither an IP address nor a name that resolves (%s)", host,
                         gai_strerror(rc));
    int fam = res->ai_family;
    if (fam == AF_INET) {
        memcpy(ss, res->ai_addr, sizeof(struct sockaddr_in));
        ((struct sockaddr_in *)ss)->sin_port = htons((uint16_t)port);
    } else if (fam == AF_INET6) {
        memcpy(ss, res->ai_addr, sizeof(struct sockaddr_in6));
        ((struct sockaddr_in6 *)ss)->sin6_port = htons((uint16_t)port);
    } else {
        fam = k3_seterr("--host '%s' resolves to an unsupported address family", host);
    }
    freeaddrinfo(res);
    return fam;
}

/* libmicrohttpd's own messages, prefixed; the one it prints for every
 * stream we end because its client left is dropped (we log those). */
static void mhd_log(void *cls, const char *fmt, va_list ap) {
    char raw[512], msg[600];
    vsnprintf(raw, sizeof raw, fmt, ap);
    if (strstr(raw, "application error generating response")) return;
    /* every connection shed or past its deadline (conns.h, counted there) */
    if (strstr(raw, "closed when reading request")) return;
    size_t n = strlen(raw);
    while (n && raw[n - 1] == '\n') n--;
    k3_utf8_escape(msg, sizeof msg, raw, n, K3_UTF8_CTRL); /* may quote client bytes */
    fprintf(stderr, "k3 serve: http: %s\n", msg);
}

static struct MHD_Daemon *start_daemon(serve_server *srv, int *port_out) {
    const serve_opts *o = srv->o;
    struct sockaddr_storage ss;
    int fam = make_addr(o->host, o->port, &ss);
    if (fam < 0) return NULL;
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION |
                     MHD_USE_POLL | MHD_USE_ITC | MHD_USE_ERROR_LOG;
    if (fam == AF_INET6) flags |= MHD_USE_IPv6;
    /* A connection that sends nothing (an idle keep-alive, a half-sent header)
     * or reads nothing of a stream for idle_timeout_s is closed, and one
     * address holds at most max_conn_per_ip of the max_connections slots:
     * a client opening many idle connections cannot lock others out. */
    unsigned idle = o->idle_timeout_s > 0 ? (unsigned)(o->idle_timeout_s + 0.5) : 0;
    if (o->idle_timeout_s > 0 && idle == 0) idle = 1;
    struct MHD_Daemon *d = MHD_start_daemon(
        flags, (uint16_t)o->port, NULL, NULL, on_request, srv, MHD_OPTION_EXTERNAL_LOGGER, mhd_log,
        NULL, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&ss, MHD_OPTION_NOTIFY_COMPLETED,
        on_completed, srv, MHD_OPTION_NOTIFY_CONNECTION, serve_conns_notify, &srv->conns,
        MHD_OPTION_CONNECTION_TIMEOUT, idle, MHD_OPTION_CONNECTION_LIMIT,
        (unsigned)o->max_connections, MHD_OPTION_PER_IP_CONNECTION_LIMIT,
        (unsigned)(o->max_conn_per_ip > 0 ? o->max_conn_per_ip : 0), MHD_OPTION_THREAD_STACK_SIZE,
        (size_t)1 << 20, MHD_OPTION_CONNECTION_MEMORY_LIMIT, HEADER_BUFFER, MHD_OPTION_END);
    if (!d) {
        k3_seterr("cannot listen on %s:%d (address in use or not permitted)", o->host, o->port);
        return NULL;
    }
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
    *port_out = di ? di->port : o->port;
    return d;
}

/* Block SIGINT/SIGTERM in every thread (set before any is created); the
 * main thread takes them with sigwait. */
static void block_signals(sigset_t *set) {
    /* a shell that starts us in the background may have set SIGINT to
     * SIG_IGN, which discards it even while blocked: restore the default */
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    sigemptyset(set);
    sigaddset(set, SIGINT);
    sigaddset(set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, set, NULL);
    signal(SIGPIPE, SIG_IGN);
}

/* Stop accepting, let in-flight requests finish for the grace period, then
 * cancel what is left (streams end at once) and stop every thread. */
static void shutdown_server(serve_server *srv, struct MHD_Daemon *d) {
    MHD_socket ls = MHD_quiesce_daemon(d);
    if (ls != MHD_INVALID_SOCKET) close(ls);
    __atomic_store_n(&srv->closing, 1, __ATOMIC_SEQ_CST);
    double until = k3_now() + srv->o->shutdown_grace_s;
    while (serve_sched_busy(srv->sched) && k3_now() < until) {
        struct timespec ts = {0, 20 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    int left = serve_sched_busy(srv->sched);
    if (left) fprintf(stderr, "k3 serve: cancelling %d request(s) still running\n", left);
    serve_sched_cancel_all(srv->sched);
    /* let the cancelled requests send their last bytes (503, end of stream) */
    until = k3_now() + 5;
    while (__atomic_load_n(&srv->inflight, __ATOMIC_SEQ_CST) > 0 && k3_now() < until) {
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    MHD_stop_daemon(d);
    serve_sched_free(srv->sched);
    srv->sched = NULL;
}

int serve_run(serve_engine *e, const serve_opts *o) {
    serve_server srv = {.eng = e, .o = o, .t_start = (double)time(NULL)};
    srv.lim.model_name = e->name;
    srv.lim.max_tokens_cap = o->max_tokens_cap;
    srv.lim.test_mode = o->test_mode;
    srv.lim.aliases = o->aliases;
    srv.lim.n_aliases = o->n_aliases;
    srv.lim.vocab = e->vocab;
    for (int i = 0; i < o->n_api_keys; i++)
        if (!o->api_keys[i][0]) {
            k3_seterr("--api-key is empty (omit it to run without authentication)");
            return -1;
        }
    serve_guard_init(&srv.guard, o->host, o->allowed_hosts, o->n_allowed_hosts, o->cors_origins,
                     o->n_cors_origins);
    serve_metrics_init(&srv.metrics);
    srv.rstore = serve_rstore_new(o->responses_budget == SIZE_MAX ? serve_rstore_default_budget()
                                                                  : o->responses_budget);
    sigset_t set;
    block_signals(&set);
    serve_sched_opts so = {.max_active = o->max_active,
                           .prefill_chunk = o->prefill_chunk,
                           .batch_window_s = o->batch_window_s,
                           .cache_budget = o->cache_budget,
                           .state_reserve = o->state_reserve,
                           .max_queue = o->max_queue,
                           .max_batch = o->max_batch,
                           .max_step_tokens = o->max_step_tokens,
                           .timeout_s = o->timeout_s,
                           .max_unread = o->max_unread};
    srv.sched = serve_sched_new(e, &so);
    if (!srv.sched) {
        serve_metrics_free(&srv.metrics);
        return -1;
    }
    serve_conns_opts co = {.header_timeout_s = o->header_timeout_s,
                           .body_timeout_s = o->body_timeout_s,
                           .min_body_rate = (double)o->min_body_rate,
                           .max_connections = o->max_connections};
    serve_conns_init(&srv.conns, &co);
    int port = 0;
    struct MHD_Daemon *d = serve_conns_start(&srv.conns) ? NULL : start_daemon(&srv, &port);
    if (!d) {
        serve_conns_free(&srv.conns);
        serve_sched_free(srv.sched);
        serve_metrics_free(&srv.metrics);
        return -1;
    }
    fprintf(stderr,
            "k3 serve: limits: ctx-size %d, max-tokens %d, max-body %zu, timeout %gs, "
            "idle-timeout %gs, header-timeout %gs, body-timeout %gs + 1s per %zu bytes, "
            "max-connections %d, max-conn-per-ip %d, max-unread %zu\n",
            serve_ctx_size(&srv), o->max_tokens_cap, o->max_body, o->timeout_s, o->idle_timeout_s,
            o->header_timeout_s, o->body_timeout_s, o->min_body_rate, o->max_connections,
            o->max_conn_per_ip, o->max_unread);
    fprintf(stderr, "k3 serve: model %s, listening on http://%s:%d%s\n", e->name, o->host, port,
            o->test_mode ? " (test mode)" : "");
    int sig = 0;
    sigwait(&set, &sig);
    fprintf(stderr, "k3 serve: %s received, shutting down\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
    shutdown_server(&srv, d);
    serve_conns_free(&srv.conns); /* after the daemon: its last CLOSED notifications */
    serve_metrics_free(&srv.metrics);
    serve_rstore_free(srv.rstore);
    fprintf(stderr, "k3 serve: stopped\n");
    return 0;
}
