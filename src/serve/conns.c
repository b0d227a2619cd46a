/* conns.c — connection deadlines and fair shedding for `k3 serve`
 * (conns.h): the table, the sweep thread and libmicrohttpd's connection
 * notifications. */
#include "serve/conns.h"

#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "base/mem.h"

#define LOG_EVERY_S 10.0 /* at most one summary line this often */

void serve_conns_init(serve_conns *t, const serve_conns_opts *o) {
    memset(t, 0, sizeof *t);
    t->o = *o;
    pthread_mutex_init(&t->mu, NULL);
    pthread_cond_init(&t->cv, NULL);
}

static int receiving(const serve_conn_slot *s) {
    return !s->shed && s->phase != SERVE_PHASE_RUN;
}

/* Called with the lock held. */
static void shut(serve_conns *t, serve_conn_slot *s) {
    if (s->fd >= 0) shutdown(s->fd, SHUT_RDWR);
    s->shed = 1;
    t->live--;
}

/* 1: headers not complete in time; 2: body too slow; 0: within its deadline. */
static int expired(const serve_conns_opts *o, const serve_conn_slot *s, double now) {
    if (s->shed) return 0;
    if (s->phase == SERVE_PHASE_HEAD)
        return o->header_timeout_s > 0 && now - s->since > o->header_timeout_s;
    if (s->phase != SERVE_PHASE_BODY || o->body_timeout_s <= 0) return 0;
    double allowed = o->body_timeout_s;
    if (o->min_body_rate > 0) allowed += (double)s->body_bytes / o->min_body_rate;
    return now - s->since > allowed ? 2 : 0;
}

static int by_addr_then_age(const void *a, const void *b) {
    const serve_conn_slot *x = *(serve_conn_slot *const *)a, *y = *(serve_conn_slot *const *)b;
    int c = memcmp(x->addr, y->addr, sizeof x->addr);
    if (c) return c;
    return (x->since > y->since) - (x->since < y->since);
}

/* The oldest receiving connection of the address holding the most
 * receiving connections (ties: the older connection); NULL if none.
 * O(n log n) for n open connections, and only near the cap. */
static serve_conn_slot *pick_victim(serve_conns *t) {
    size_t n = 0;
    for (serve_conn_slot *s = t->head; s; s = s->next) n += receiving(s);
    if (!n) return NULL;
    serve_conn_slot **v = k3_xmalloc(n * sizeof *v);
    n = 0;
    for (serve_conn_slot *s = t->head; s; s = s->next)
        if (receiving(s)) v[n++] = s;
    qsort(v, n, sizeof *v, by_addr_then_age);
    serve_conn_slot *best = NULL;
    size_t best_n = 0;
    for (size_t i = 0, j; i < n; i = j) { /* v[i..j): one address, oldest first */
        j = i + 1;
        while (j < n && !memcmp(v[j]->addr, v[i]->addr, sizeof v[i]->addr)) j++;
        if (j - i > best_n || (j - i == best_n && v[i]->since < best->since))
            best = v[i], best_n = j - i;
    }
    free(v);
    return best;
}

static int reserve(const serve_conns_opts *o) {
    int r = o->max_connections / 8;
    return r > 0 ? r : 1;
}

void serve_conns_add(serve_conns *t, serve_conn_slot *s, double now) {
    pthread_mutex_lock(&t->mu);
    s->phase = SERVE_PHASE_HEAD;
    s->since = now;
    s->prev = NULL;
    s->next = t->head;
    if (t->head) t->head->prev = s;
    t->head = s;
    t->live++;
    int limit = t->o.max_connections - reserve(&t->o);
    while (t->o.max_connections > 0 && t->live > limit) {
        serve_conn_slot *v = pick_victim(t);
        if (!v) break;
        shut(t, v);
        t->st.shed++;
    }
    pthread_mutex_unlock(&t->mu);
}

void serve_conns_remove(serve_conns *t, serve_conn_slot *s) {
    pthread_mutex_lock(&t->mu);
    if (s->prev)
        s->prev->next = s->next;
    else
        t->head = s->next;
    if (s->next) s->next->prev = s->prev;
    if (!s->shed) t->live--;
    pthread_mutex_unlock(&t->mu);
}

void serve_conns_phase(serve_conns *t, serve_conn_slot *s, serve_phase p, double now) {
    pthread_mutex_lock(&t->mu);
    s->phase = p;
    s->since = now;
    s->body_bytes = 0;
    pthread_mutex_unlock(&t->mu);
}

void serve_conns_body_bytes(serve_conns *t, serve_conn_slot *s, size_t n) {
    pthread_mutex_lock(&t->mu);
    s->body_bytes += n;
    pthread_mutex_unlock(&t->mu);
}

/* One summary line now and then (a flood must not flood the log). */
static void log_summary(serve_conns *t, double now) {
    uint64_t total = t->st.shed + t->st.header_timeouts + t->st.body_timeouts;
    if (total == t->logged || now - t->last_log < LOG_EVERY_S) return;
    fprintf(stderr,
            "k3 serve: connections closed so far: %llu headers too slow, %llu bodies too "
            "slow, %llu shed near the cap\n",
            (unsigned long long)t->st.header_timeouts, (unsigned long long)t->st.body_timeouts,
            (unsigned long long)t->st.shed);
    t->logged = total;
    t->last_log = now;
}

int serve_conns_sweep(serve_conns *t, double now) {
    int n = 0;
    pthread_mutex_lock(&t->mu);
    for (serve_conn_slot *s = t->head; s; s = s->next) {
        int why = expired(&t->o, s, now);
        if (!why) continue;
        shut(t, s);
        if (why == 1)
            t->st.header_timeouts++;
        else
            t->st.body_timeouts++;
        n++;
    }
    log_summary(t, now);
    pthread_mutex_unlock(&t->mu);
    return n;
}

/* A quarter of the shortest deadline, in [50 ms, 1 s]. */
static double sweep_period(const serve_conns_opts *o) {
    double p = 1.0;
    if (o->header_timeout_s > 0 && o->header_timeout_s / 4 < p) p = o->header_timeout_s / 4;
    if (o->body_timeout_s > 0 && o->body_timeout_s / 4 < p) p = o->body_timeout_s / 4;
    return p < 0.05 ? 0.05 : p;
}

static void *sweeper(void *arg) {
    serve_conns *t = arg;
    double period = sweep_period(&t->o);
    for (;;) {
        pthread_mutex_lock(&t->mu);
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        long ns = ts.tv_nsec + (long)(period * 1e9);
        ts.tv_sec += ns / 1000000000L;
        ts.tv_nsec = ns % 1000000000L;
        if (!t->stop) pthread_cond_timedwait(&t->cv, &t->mu, &ts);
        int stop = t->stop;
        pthread_mutex_unlock(&t->mu);
        if (stop) return NULL;
        serve_conns_sweep(t, k3_now());
    }
}

int serve_conns_start(serve_conns *t) {
    if (pthread_create(&t->thread, NULL, sweeper, t)) return -1;
    t->running = 1;
    return 0;
}

void serve_conns_free(serve_conns *t) {
    if (t->running) {
        pthread_mutex_lock(&t->mu);
        t->stop = 1;
        pthread_cond_signal(&t->cv);
        pthread_mutex_unlock(&t->mu);
        pthread_join(t->thread, NULL);
        t->running = 0;
    }
    pthread_cond_destroy(&t->cv);
    pthread_mutex_destroy(&t->mu);
}

serve_conns_stats serve_conns_get_stats(serve_conns *t) {
    pthread_mutex_lock(&t->mu);
    serve_conns_stats st = t->st;
    st.open = t->live;
    st.receiving = 0;
    for (serve_conn_slot *s = t->head; s; s = s->next) st.receiving += receiving(s);
    pthread_mutex_unlock(&t->mu);
    return st;
}

json_t *serve_conns_stats_json(serve_conns *t) {
    serve_conns_stats st = serve_conns_get_stats(t);
    return json_pack("{s:i,s:i,s:I,s:I,s:I}", "open", st.open, "receiving", st.receiving, "shed",
                     (json_int_t)st.shed, "header_timeouts", (json_int_t)st.header_timeouts,
                     "body_timeouts", (json_int_t)st.body_timeouts);
}

/* ---------------- libmicrohttpd glue ---------------- */

static void client_addr(struct MHD_Connection *conn, unsigned char out[16]) {
    memset(out, 0, 16);
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    const struct sockaddr *sa = ci ? ci->client_addr : NULL;
    if (sa && sa->sa_family == AF_INET)
        memcpy(out, &((const struct sockaddr_in *)sa)->sin_addr, 4);
    else if (sa && sa->sa_family == AF_INET6)
        memcpy(out, &((const struct sockaddr_in6 *)sa)->sin6_addr, 16);
}

void serve_conns_notify(void *cls, struct MHD_Connection *conn, void **socket_context,
                        enum MHD_ConnectionNotificationCode toe) {
    serve_conns *t = cls;
    if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
        serve_conn_slot *s = k3_xcalloc(1, sizeof *s);
        const union MHD_ConnectionInfo *ci =
            MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
        s->fd = ci ? ci->connect_fd : -1;
        client_addr(conn, s->addr);
        *socket_context = s;
        serve_conns_add(t, s, k3_now());
    } else if (toe == MHD_CONNECTION_NOTIFY_CLOSED && *socket_context) {
        serve_conns_remove(t, *socket_context);
        free(*socket_context);
        *socket_context = NULL;
    }
}

serve_conn_slot *serve_conns_slot(struct MHD_Connection *conn) {
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return ci ? ci->socket_context : NULL;
}
