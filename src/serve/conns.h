/* conns.h — every open connection of `k3 serve`, with a deadline for the
 * request it is receiving, and fair shedding near the connection cap.
 *
 * libmicrohttpd's --idle-timeout counts any byte as activity, so a client
 * that sends one more byte of an endless header every few seconds holds its
 * connection for ever, and a few addresses doing so hold every slot. Here
 * each connection is in one of three phases:
 *
 *   HEAD  waiting for / receiving a request's headers (from the accept, or
 *         from the end of the previous response on a kept-alive connection):
 *         closed once it has lasted header_timeout_s;
 *   BODY  receiving the body: closed after body_timeout_s plus one second per
 *         min_body_rate bytes received (a body must keep arriving at that
 *         rate on average; 0: no extension, a hard limit);
 *   RUN   the request is complete and being answered: never closed here
 *         (--timeout and the client's own disconnect bound it).
 *
 * When an accepted connection brings the open ones above max_connections
 * less a reserve (an eighth, at least one), connections still receiving a
 * request (HEAD or BODY) are shed, the oldest of the address that holds the
 * most of them first, until the reserve is free again: a new address and
 * /health still get in while a few addresses try to hold every slot.
 *
 * "Closing" a connection is shutdown(2) of its socket: libmicrohttpd's
 * thread for it then reads the end of the stream and closes it. The socket
 * is only closed by libmicrohttpd after the CLOSED notification, which
 * removes it from the table under the same lock, so a shutdown never hits a
 * reused descriptor. */
#ifndef K3_SERVE_CONNS_H
#define K3_SERVE_CONNS_H

#include <microhttpd.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

typedef enum { SERVE_PHASE_HEAD, SERVE_PHASE_BODY, SERVE_PHASE_RUN } serve_phase;

typedef struct serve_conn_slot {
    int fd;                 /* -1: nothing to shut (unit tests) */
    unsigned char addr[16]; /* the client address (IPv4 in the first 4 bytes) */
    serve_phase phase;
    double since;      /* when the phase began */
    size_t body_bytes; /* received in BODY */
    int shed;          /* shut down already */
    struct serve_conn_slot *prev, *next;
} serve_conn_slot;

typedef struct {
    double header_timeout_s; /* 0: none */
    double body_timeout_s;   /* 0: none */
    double min_body_rate;    /* bytes/s that extend a body's deadline by 1 s each */
    int max_connections;     /* libmicrohttpd's cap (0: no shedding) */
} serve_conns_opts;

typedef struct {
    int open, receiving;
    uint64_t shed, header_timeouts, body_timeouts;
} serve_conns_stats;

typedef struct serve_conns {
    serve_conns_opts o;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    pthread_t thread;
    int running, stop;
    serve_conn_slot *head;
    int live; /* slots not shed */
    serve_conns_stats st;
    double last_log;
    uint64_t logged; /* shed + timeouts at the last log line */
} serve_conns;

void serve_conns_init(serve_conns *t, const serve_conns_opts *o);
/* Start / stop the thread that closes connections past their deadline. */
int serve_conns_start(serve_conns *t);
void serve_conns_free(serve_conns *t);

/* Table operations (the lock is taken inside). add: a new connection (slot
 * zeroed by the caller but for fd and addr), then sheds as described
 * above. */
void serve_conns_add(serve_conns *t, serve_conn_slot *s, double now);
void serve_conns_remove(serve_conns *t, serve_conn_slot *s);
void serve_conns_phase(serve_conns *t, serve_conn_slot *s, serve_phase p, double now);
void serve_conns_body_bytes(serve_conns *t, serve_conn_slot *s, size_t n);
/* Shut every connection past its deadline; returns how many. */
int serve_conns_sweep(serve_conns *t, double now);
serve_conns_stats serve_conns_get_stats(serve_conns *t);
json_t *serve_conns_stats_json(serve_conns *t);

/* libmicrohttpd glue: MHD_OPTION_NOTIFY_CONNECTION's callback (cls: the
 * table), and the slot of a connection (NULL if none). */
void serve_conns_notify(void *cls, struct MHD_Connection *conn, void **socket_context,
                        enum MHD_ConnectionNotificationCode toe);
serve_conn_slot *serve_conns_slot(struct MHD_Connection *conn);

#endif
