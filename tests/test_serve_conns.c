/* test_serve_conns.c — the connection table of `k3 serve` (serve/conns.h):
 * deadlines by phase and the choice of connections shed near the cap, with
 * slots that have no socket (fd -1) and explicit times. */
#include <string.h>

#include "serve/conns.h"
#include "t.h"

static serve_conn_slot *slot(int addr) {
    static serve_conn_slot pool[64];
    static int used;
    serve_conn_slot *s = &pool[used++];
    memset(s, 0, sizeof *s);
    s->fd = -1;
    s->addr[0] = 127;
    s->addr[3] = (unsigned char)addr;
    return s;
}

TEST(deadlines_by_phase) {
    serve_conns t;
    serve_conns_opts o = {.header_timeout_s = 10, .body_timeout_s = 5, .min_body_rate = 100};
    serve_conns_init(&t, &o);
    serve_conn_slot *head = slot(1), *body = slot(1), *run = slot(1);
    serve_conns_add(&t, head, 0);
    serve_conns_add(&t, body, 0);
    serve_conns_add(&t, run, 0);
    serve_conns_phase(&t, body, SERVE_PHASE_BODY, 1);
    serve_conns_phase(&t, run, SERVE_PHASE_RUN, 1);
    serve_conns_body_bytes(&t, body, 300); /* 3 s more: the body may run to t = 9 */
    CHECK(serve_conns_sweep(&t, 8.5) == 0);
    CHECK(serve_conns_sweep(&t, 9.5) == 1 && body->shed && !head->shed);
    CHECK(serve_conns_sweep(&t, 10.5) == 1 && head->shed);
    CHECK(serve_conns_sweep(&t, 1e6) == 0 && !run->shed, "a running request is never closed");
    serve_conns_stats st = serve_conns_get_stats(&t);
    CHECK(st.header_timeouts == 1 && st.body_timeouts == 1 && st.open == 1 && st.receiving == 0);
    /* a kept-alive connection's header deadline starts at the end of its reply */
    serve_conns_phase(&t, run, SERVE_PHASE_HEAD, 100);
    CHECK(serve_conns_sweep(&t, 109) == 0 && serve_conns_sweep(&t, 111) == 1);
    serve_conns_remove(&t, head);
    serve_conns_remove(&t, body);
    serve_conns_remove(&t, run);
    CHECK(serve_conns_get_stats(&t).open == 0);
    CHECK(serve_conns_start(&t) == 0); /* the sweep thread starts and is joined */
    serve_conns_free(&t);
}

TEST(shed_the_address_holding_most) {
    serve_conns t;
    serve_conns_opts o = {.max_connections = 16}; /* reserve 2: at most 14 open */
    serve_conns_init(&t, &o);
    serve_conn_slot *s[32];
    int n = 0;
    s[n] = slot(2), serve_conns_add(&t, s[n], 0), n++;
    serve_conns_phase(&t, s[0], SERVE_PHASE_RUN, 0); /* address 2's running request */
    for (int i = 0; i < 9; i++) s[n] = slot(2), serve_conns_add(&t, s[n], 1 + i), n++;
    for (int i = 0; i < 4; i++) s[n] = slot(3), serve_conns_add(&t, s[n], 20 + i), n++;
    CHECK(serve_conns_get_stats(&t).shed == 0 && n == 14);
    s[n] = slot(4), serve_conns_add(&t, s[n], 30), n++; /* a newcomer: 15 > 14 */
    serve_conns_stats st = serve_conns_get_stats(&t);
    CHECK(st.shed == 1 && st.open == 14, "shed %llu open %d", (unsigned long long)st.shed, st.open);
    CHECK(s[1]->shed, "the oldest receiving connection of address 2 goes first");
    CHECK(!s[0]->shed && !s[n - 1]->shed);
    for (int i = 0; i < 6; i++) s[n] = slot(3), serve_conns_add(&t, s[n], 40 + i), n++;
    int shed2 = 0, shed3 = 0;
    for (int i = 0; i < n; i++) {
        if (!s[i]->shed) continue;
        if (s[i]->addr[3] == 2) shed2++;
        if (s[i]->addr[3] == 3) shed3++;
    }
    /* address 3 grew to 10 receiving: shedding then takes from it as well */
    CHECK(shed2 + shed3 == 7 && shed3 >= 1 && !s[0]->shed, "shed2 %d shed3 %d", shed2, shed3);
    CHECK(serve_conns_get_stats(&t).open == 14);
    for (int i = 0; i < n; i++) serve_conns_remove(&t, s[i]);
    serve_conns_free(&t);
}

TEST(only_running_requests_left) {
    serve_conns t;
    serve_conns_opts o = {.max_connections = 8}; /* reserve 1: at most 7 open */
    serve_conns_init(&t, &o);
    serve_conn_slot *s[8];
    for (int i = 0; i < 8; i++) {
        s[i] = slot(5);
        serve_conns_add(&t, s[i], i);
        if (i < 7) serve_conns_phase(&t, s[i], SERVE_PHASE_RUN, i);
    }
    CHECK(s[7]->shed && serve_conns_get_stats(&t).open == 7, "only the newcomer could go");
    for (int i = 0; i < 7; i++) CHECK(!s[i]->shed);
    for (int i = 0; i < 8; i++) serve_conns_remove(&t, s[i]);
    serve_conns_free(&t);
}

int main(void) {
    RUN(deadlines_by_phase);
    RUN(shed_the_address_holding_most);
    RUN(only_running_requests_left);
    return t_done();
}
