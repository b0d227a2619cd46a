/* test_serve_rstore.c — the Responses store (serve/rstore.h) and the API key
 * helpers (serve/guard.h): ids are "resp_" + 32 random hex digits and
 * distinct; a lookup from another scope finds nothing; every kept byte is
 * charged and the budget holds; a flood from one scope evicts that scope's
 * least recently used entries, never a smaller scope's; an entry larger than
 * the budget is refused; items are found by their ids in their response's
 * scope; several keys each authenticate and give their own scope; key files
 * parse (comments, blanks) and their errors name the file and line. */
#include <stdio.h>
#include <unistd.h>

#include "serve/guard.h"
#include "serve/rstore.h"
#include "t.h"

#define A "1:a", 3
#define B "1:b", 3

static void put(serve_rstore *s, const char *k, size_t kn, const char *id, size_t pad) {
    char *resp = malloc(pad + 64);
    snprintf(resp, pad + 64, "{\"id\":\"%s\",\"pad\":\"%*s\"}", id, (int)pad, "");
    CHECK(serve_rstore_put(s, k, kn, id, resp, "[]", "[]") == 0, "put %s", id);
    free(resp);
}

static void fake_id(char *id, int i) {
    snprintf(id, SERVE_RSTORE_ID_MAX, "resp_%032x", i);
}

TEST(ids_random_and_distinct) {
    char a[SERVE_RSTORE_ID_MAX], b[SERVE_RSTORE_ID_MAX];
    CHECK(serve_rstore_new_id(a) == 0 && serve_rstore_new_id(b) == 0);
    CHECK(strlen(a) == 37 && !strncmp(a, "resp_", 5), "%s", a);
    CHECK(serve_rstore_id_hex(a) == a + 5 && strcmp(a, b), "%s %s", a, b);
    CHECK(serve_rstore_id_hex("msg_0123456789abcdef0123456789abcdef_7") != NULL);
    CHECK(!serve_rstore_id_hex("resp_123") && !serve_rstore_id_hex("resp_") &&
          !serve_rstore_id_hex("nope") &&
          !serve_rstore_id_hex("x_0123456789ABCDEF0123456789abcdef"));
}

TEST(scopes_do_not_see_each_other) {
    serve_rstore *s = serve_rstore_new(1 << 20);
    char id[SERVE_RSTORE_ID_MAX];
    fake_id(id, 1);
    CHECK(serve_rstore_put(s, A, id,
                           "{\"output\":[{\"id\":\"msg_00000000000000000000000000000001_1\"}]}",
                           "[1]", "[{\"id\":\"msg_00000000000000000000000000000001_0\"}]") == 0);
    char *m = serve_rstore_get(s, A, id, SERVE_RS_MESSAGES);
    CHECK(m && !strcmp(m, "[1]"), "%s", m ? m : "(null)");
    free(m);
    CHECK(!serve_rstore_get(s, B, id, SERVE_RS_MESSAGES));
    CHECK(!serve_rstore_get(s, "1:a", 2, id, SERVE_RS_MESSAGES)); /* a prefix of A's key */
    json_t *it = serve_rstore_item(s, A, "msg_00000000000000000000000000000001_1");
    json_t *in = serve_rstore_item(s, A, "msg_00000000000000000000000000000001_0");
    CHECK(it && in);
    json_decref(it);
    json_decref(in);
    CHECK(!serve_rstore_item(s, B, "msg_00000000000000000000000000000001_1"));
    CHECK(serve_rstore_delete(s, B, id) == -1 && serve_rstore_delete(s, A, id) == 0);
    CHECK(!serve_rstore_get(s, A, id, SERVE_RS_RESPONSE));
    serve_rstore_stats st;
    serve_rstore_stats_get(s, &st);
    CHECK(st.bytes == 0 && st.entries == 0 && st.scopes == 0, "%zu %lld %lld", st.bytes, st.entries,
          st.scopes);
    serve_rstore_free(s);
}

TEST(budget_and_fair_eviction) {
    size_t budget = 256 << 10;
    serve_rstore *s = serve_rstore_new(budget);
    char keep[SERVE_RSTORE_ID_MAX], id[SERVE_RSTORE_ID_MAX];
    fake_id(keep, 999999);
    put(s, B, keep, 2000);
    serve_rstore_stats st;
    serve_rstore_stats_get(s, &st);
    CHECK(st.bytes > 2000 + 37, "charged %zu", st.bytes); /* texts + id + bookkeeping */
    for (int i = 0; i < 520; i++) {                       /* scope A floods with small entries */
        fake_id(id, i);
        put(s, A, id, 1000);
        serve_rstore_stats_get(s, &st);
        CHECK(st.bytes <= budget, "%zu > %zu at %d", st.bytes, budget, i);
    }
    CHECK(st.evictions > 0 && st.scopes == 2, "%lld %lld", st.evictions, st.scopes);
    char *k = serve_rstore_get(s, B, keep, SERVE_RS_RESPONSE);
    CHECK(k != NULL, "B's only entry was evicted by A's flood");
    free(k);
    fake_id(id, 0);
    CHECK(!serve_rstore_get(s, A, id, SERVE_RS_RESPONSE), "A's oldest survived");
    fake_id(id, 519);
    char *last = serve_rstore_get(s, A, id, SERVE_RS_RESPONSE);
    CHECK(last != NULL);
    free(last);
    /* LRU: the oldest entry, once read, outlives the next oldest (same sizes:
     * the next put evicts exactly one) */
    int oldest = 0;
    char *mid = NULL;
    for (; oldest < 520 && !mid; oldest++) {
        fake_id(id, oldest);
        mid = serve_rstore_get(s, A, id, SERVE_RS_RESPONSE); /* NULL reads touch nothing */
    }
    fake_id(id, 100000);
    put(s, A, id, 1000);
    fake_id(id, oldest - 1);
    char *again = serve_rstore_get(s, A, id, SERVE_RS_RESPONSE);
    fake_id(id, oldest);
    char *next = serve_rstore_get(s, A, id, SERVE_RS_RESPONSE);
    CHECK(mid && again && !next, "LRU order: read %d kept %d, next evicted %d", mid != NULL,
          again != NULL, next == NULL);
    free(mid);
    free(again);
    free(next);
    /* larger than the whole budget: refused, nothing else evicted */
    long long ev = st.evictions;
    serve_rstore_stats_get(s, &st);
    ev = st.evictions;
    char *huge = malloc(budget + 16);
    memset(huge, 'x', budget + 15);
    huge[budget + 15] = 0;
    fake_id(id, 5000000);
    CHECK(serve_rstore_put(s, A, id, huge, "[]", "[]") == -1);
    free(huge);
    serve_rstore_stats_get(s, &st);
    CHECK(st.evictions == ev && st.refused == 1, "%lld %lld", st.evictions, st.refused);
    serve_rstore_free(s);
}

TEST(zero_budget_keeps_nothing) {
    serve_rstore *s = serve_rstore_new(0);
    char id[SERVE_RSTORE_ID_MAX];
    fake_id(id, 1);
    CHECK(serve_rstore_put(s, A, id, "{}", "[]", "[]") == -1);
    CHECK(!serve_rstore_get(s, A, id, SERVE_RS_RESPONSE));
    serve_rstore_free(s);
}

TEST(auth_several_keys) {
    const char *keys[] = {"k1", "key-two", "k3"};
    serve_cred c;
    CHECK(serve_auth_check(keys, 3, "Bearer key-two", NULL, &c) && c.n == 7 &&
          !strcmp(c.s, "key-two"));
    CHECK(serve_auth_check(keys, 3, "bearer k3", NULL, &c) && !strcmp(c.s, "k3"));
    CHECK(serve_auth_check(keys, 3, NULL, "k1", &c) && !strcmp(c.s, "k1"));
    CHECK(serve_auth_check(keys, 3, "Bearer nope", "k1", &c) && !strcmp(c.s, "k1"));
    CHECK(!serve_auth_check(keys, 3, "Bearer k", NULL, &c));
    CHECK(!serve_auth_check(keys, 3, "Bearer k1x", NULL, &c));
    CHECK(!serve_auth_check(keys, 3, "k1", NULL, &c)); /* no Bearer */
    CHECK(!serve_auth_check(keys, 3, NULL, NULL, &c));
    CHECK(serve_auth_check(NULL, 0, "Bearer userA", NULL, &c) && c.n == 5 &&
          !memcmp(c.s, "userA", 5));
    CHECK(serve_auth_check(NULL, 0, NULL, NULL, &c) && c.n == 0);
    size_t n1, n2;
    char *s1 = serve_scope_key((serve_cred){"ab", 2}, "c", 1, &n1);
    char *s2 = serve_scope_key((serve_cred){"a", 1}, "bc", 2, &n2);
    CHECK(n1 != n2 || memcmp(s1, s2, n1), "scopes collide"); /* length-prefixed */
    free(s1);
    free(s2);
}

static int load(const char *text, char ***keys, int *n, char *msg) {
    char path[] = "/tmp/k3-keysXXXXXX";
    int fd = mkstemp(path);
    if (fd < 0) return -2;
    if (write(fd, text, strlen(text)) < 0) return -2;
    close(fd);
    int rc = serve_keys_load(path, keys, n, msg, 256);
    unlink(path);
    return rc;
}

TEST(key_file) {
    char **keys = NULL, msg[256];
    int n = 0;
    CHECK(load("# comment\n\n  alpha  \r\nbeta\n#gamma\n", &keys, &n, msg) == 0, "%s", msg);
    CHECK(n == 2 && !strcmp(keys[0], "alpha") && !strcmp(keys[1], "beta"));
    CHECK(load("# none\n\n", &keys, &n, msg) == -1 && strstr(msg, "holds no key"), "%s", msg);
    CHECK(load("ok1\nbad key\n", &keys, &n, msg) == -1 && strstr(msg, ":2:"), "%s", msg);
    CHECK(load("alpha\n", &keys, &n, msg) == -1 && strstr(msg, "already"), "%s", msg);
    CHECK(serve_keys_load("/nonexistent/keys", &keys, &n, msg, sizeof msg) == -1 &&
              strstr(msg, "/nonexistent/keys"),
          "%s", msg);
    for (int i = 0; i < n; i++) free(keys[i]);
    free(keys);
}

int main(void) {
    RUN(ids_random_and_distinct);
    RUN(scopes_do_not_see_each_other);
    RUN(budget_and_fair_eviction);
    RUN(zero_budget_keeps_nothing);
    RUN(auth_several_keys);
    RUN(key_file);
    return t_done();
}
