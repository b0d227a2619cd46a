/* rstore.c — the Responses API store (rstore.h): entries in a hash table by
 * id, grouped in scopes with their own LRU lists, charged to one byte
 * budget and evicted from the largest scope first. */
#include "serve/rstore.h"

#include <ctype.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "base/mem.h"

/* ---------------- a chained hash table over byte strings ---------------- */

typedef struct hnode {
    struct hnode *hnext;
    uint64_t h;
    char *key;
    size_t klen;
} hnode;

typedef struct {
    hnode **b;
    size_t nb, n;
} htab;

static uint64_t hash_bytes(uint64_t seed, const char *p, size_t n) {
    uint64_t h = seed ^ 14695981039346656037ull; /* FNV-1a, seeded per store */
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)p[i]) * 1099511628211ull;
    return h ^ (h >> 29);
}

/* Equal in time that depends on the lengths only: scope keys carry secrets. */
static int same_bytes(const char *a, size_t an, const char *b, size_t bn) {
    if (an != bn) return 0;
    unsigned char d = 0;
    for (size_t i = 0; i < an; i++) d |= (unsigned char)(a[i] ^ b[i]);
    return d == 0;
}

static hnode *ht_find(const htab *t, uint64_t h, const char *key, size_t klen) {
    if (!t->nb) return NULL;
    for (hnode *x = t->b[h & (t->nb - 1)]; x; x = x->hnext)
        if (x->h == h && same_bytes(x->key, x->klen, key, klen)) return x;
    return NULL;
}

static void ht_link(hnode **b, size_t nb, hnode *x) {
    hnode **slot = &b[x->h & (nb - 1)];
    x->hnext = *slot;
    *slot = x;
}

static void ht_add(htab *t, hnode *x) {
    if (t->n + 1 > t->nb) { /* grow to keep chains short */
        size_t nb = t->nb ? t->nb * 2 : 64;
        hnode **b = k3_xcalloc(nb, sizeof *b);
        for (size_t i = 0; i < t->nb; i++)
            for (hnode *y = t->b[i], *next; y; y = next) {
                next = y->hnext;
                ht_link(b, nb, y);
            }
        free(t->b);
        t->b = b;
        t->nb = nb;
    }
    ht_link(t->b, t->nb, x);
    t->n++;
}

static void ht_del(htab *t, hnode *x) {
    for (hnode **p = &t->b[x->h & (t->nb - 1)]; *p; p = &(*p)->hnext)
        if (*p == x) {
            *p = x->hnext;
            t->n--;
            return;
        }
}

/* ---------------- entries and scopes ---------------- */

typedef struct scope scope;

typedef struct entry {
    hnode hn; /* key: the response id */
    scope *sc;
    struct entry *prev, *next; /* the scope's LRU list, most recent first */
    char *part[3];             /* serve_rs_part → JSON text */
    size_t bytes;              /* charged */
} entry;

struct scope {
    hnode hn; /* key: the scope key */
    entry *head, *tail;
    size_t bytes; /* charged by its entries and itself */
    long long n;
};

struct serve_rstore {
    pthread_mutex_t mu;
    htab ids, scopes;
    uint64_t seed;
    serve_rstore_stats st;
};

#define NODE_COST 64 /* an allocation's and a hash slot's overhead, roughly */

static size_t scope_cost(size_t key_len) {
    return sizeof(scope) + key_len + NODE_COST;
}

size_t serve_rstore_default_budget(void) {
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    size_t b = pages > 0 && page > 0 ? (size_t)pages * (size_t)page / 64 : (size_t)64 << 20;
    if (b < ((size_t)16 << 20)) b = (size_t)16 << 20;
    if (b > ((size_t)1 << 30)) b = (size_t)1 << 30;
    return b;
}

serve_rstore *serve_rstore_new(size_t budget) {
    serve_rstore *s = k3_xcalloc(1, sizeof *s);
    pthread_mutex_init(&s->mu, NULL);
    if (getrandom(&s->seed, sizeof s->seed, 0) != (ssize_t)sizeof s->seed) s->seed = 0x9e3779b9u;
    s->st.budget = budget;
    return s;
}

static void entry_free(entry *e) {
    for (int i = 0; i < 3; i++) free(e->part[i]);
    free(e->hn.key);
    free(e);
}

void serve_rstore_free(serve_rstore *s) {
    if (!s) return;
    for (size_t i = 0; i < s->ids.nb; i++)
        for (hnode *x = s->ids.b[i], *next; x; x = next) {
            next = x->hnext;
            entry_free((entry *)x);
        }
    for (size_t i = 0; i < s->scopes.nb; i++)
        for (hnode *x = s->scopes.b[i], *next; x; x = next) {
            next = x->hnext;
            free(x->key);
            free(x);
        }
    free(s->ids.b);
    free(s->scopes.b);
    pthread_mutex_destroy(&s->mu);
    free(s);
}

int serve_rstore_new_id(char id[SERVE_RSTORE_ID_MAX]) {
    unsigned char r[16];
    size_t got = 0;
    while (got < sizeof r) {
        ssize_t n = getrandom(r + got, sizeof r - got, 0);
        if (n <= 0) return -1;
        got += (size_t)n;
    }
    char *p = id + snprintf(id, SERVE_RSTORE_ID_MAX, "resp_");
    for (size_t i = 0; i < sizeof r; i++) p += snprintf(p, 3, "%02x", r[i]);
    return 0;
}

const char *serve_rstore_id_hex(const char *id) {
    const char *h = id ? strchr(id, '_') : NULL;
    if (!h) return NULL;
    h++;
    for (int i = 0; i < 32; i++)
        if (!isxdigit((unsigned char)h[i]) || isupper((unsigned char)h[i])) return NULL;
    return h[32] == 0 || h[32] == '_' ? h : NULL;
}

static scope *find_scope(serve_rstore *s, const char *key, size_t len) {
    return (scope *)ht_find(&s->scopes, hash_bytes(s->seed, key, len), key, len);
}

static void unlink_lru(entry *e) {
    scope *sc = e->sc;
    if (e->prev)
        e->prev->next = e->next;
    else
        sc->head = e->next;
    if (e->next)
        e->next->prev = e->prev;
    else
        sc->tail = e->prev;
    e->prev = e->next = NULL;
}

static void push_front(entry *e) {
    scope *sc = e->sc;
    e->next = sc->head;
    if (sc->head) sc->head->prev = e;
    sc->head = e;
    if (!sc->tail) sc->tail = e;
}

/* Remove an entry; its scope goes too once empty. */
static void drop(serve_rstore *s, entry *e) {
    scope *sc = e->sc;
    unlink_lru(e);
    ht_del(&s->ids, &e->hn);
    sc->bytes -= e->bytes;
    sc->n--;
    s->st.bytes -= e->bytes;
    s->st.entries--;
    entry_free(e);
    if (sc->n) return;
    ht_del(&s->scopes, &sc->hn);
    s->st.bytes -= scope_cost(sc->hn.klen);
    s->st.scopes--;
    free(sc->hn.key);
    free(sc);
}

/* The scope holding the most bytes (the first over its fair share). */
static scope *largest_scope(serve_rstore *s) {
    scope *best = NULL;
    for (size_t i = 0; i < s->scopes.nb; i++)
        for (hnode *x = s->scopes.b[i]; x; x = x->hnext)
            if (!best || ((scope *)x)->bytes > best->bytes) best = (scope *)x;
    return best;
}

/* Evict until `need` more bytes fit. */
static void make_room(serve_rstore *s, size_t need) {
    while (s->st.entries && s->st.bytes + need > s->st.budget) {
        scope *sc = largest_scope(s);
        drop(s, sc->tail);
        s->st.evictions++;
    }
}

static char *dup_text(const char *t) {
    return k3_xstrdup(t ? t : "null");
}

int serve_rstore_put(serve_rstore *s, const char *key, size_t key_len, const char *id,
                     const char *response, const char *messages, const char *input) {
    const char *texts[3] = {response, messages, input};
    size_t id_len = strlen(id), cost = sizeof(entry) + id_len + 1 + 4 * NODE_COST;
    for (int i = 0; i < 3; i++) cost += strlen(texts[i] ? texts[i] : "null") + 1;
    pthread_mutex_lock(&s->mu);
    /* the scope's cost is counted even when it exists: evicting may drop it */
    size_t need = cost + scope_cost(key_len);
    if (need > s->st.budget || ht_find(&s->ids, hash_bytes(s->seed, id, id_len), id, id_len)) {
        s->st.refused++;
        pthread_mutex_unlock(&s->mu);
        return -1;
    }
    make_room(s, need);
    scope *sc = find_scope(s, key, key_len);
    if (!sc) {
        sc = k3_xcalloc(1, sizeof *sc);
        sc->hn.key = k3_xmalloc(key_len + 1);
        memcpy(sc->hn.key, key, key_len);
        sc->hn.klen = key_len;
        sc->hn.h = hash_bytes(s->seed, key, key_len);
        sc->bytes = scope_cost(key_len);
        ht_add(&s->scopes, &sc->hn);
        s->st.bytes += sc->bytes;
        s->st.scopes++;
    }
    entry *e = k3_xcalloc(1, sizeof *e);
    e->hn.key = k3_xstrdup(id);
    e->hn.klen = id_len;
    e->hn.h = hash_bytes(s->seed, id, id_len);
    for (int i = 0; i < 3; i++) e->part[i] = dup_text(texts[i]);
    e->bytes = cost;
    e->sc = sc;
    ht_add(&s->ids, &e->hn);
    push_front(e);
    sc->bytes += cost;
    sc->n++;
    s->st.bytes += cost;
    s->st.entries++;
    pthread_mutex_unlock(&s->mu);
    return 0;
}

/* The entry id in scope key, or NULL (under the mutex). */
static entry *find(serve_rstore *s, const char *key, size_t key_len, const char *id) {
    size_t n = strlen(id);
    entry *e = (entry *)ht_find(&s->ids, hash_bytes(s->seed, id, n), id, n);
    if (!e || e->sc != find_scope(s, key, key_len)) return NULL;
    unlink_lru(e);
    push_front(e);
    return e;
}

char *serve_rstore_get(serve_rstore *s, const char *key, size_t key_len, const char *id,
                       serve_rs_part part) {
    pthread_mutex_lock(&s->mu);
    entry *e = id ? find(s, key, key_len, id) : NULL;
    char *copy = e ? k3_xstrdup(e->part[part]) : NULL;
    pthread_mutex_unlock(&s->mu);
    return copy;
}

/* The item with id `item_id` in the JSON array `list` (new reference) or NULL. */
static json_t *item_in(const json_t *list, const char *item_id) {
    size_t i;
    json_t *it;
    json_array_foreach(list, i, it) {
        const char *iid = json_string_value(json_object_get(it, "id"));
        if (iid && !strcmp(iid, item_id)) return json_incref(it);
    }
    return NULL;
}

json_t *serve_rstore_item(serve_rstore *s, const char *key, size_t key_len, const char *item_id) {
    const char *hex = serve_rstore_id_hex(item_id);
    if (!hex) return NULL;
    char rid[SERVE_RSTORE_ID_MAX];
    snprintf(rid, sizeof rid, "resp_%.32s", hex);
    char *resp = serve_rstore_get(s, key, key_len, rid, SERVE_RS_RESPONSE);
    char *input = serve_rstore_get(s, key, key_len, rid, SERVE_RS_INPUT);
    json_t *r = resp ? json_loads(resp, 0, NULL) : NULL;
    json_t *in = input ? json_loads(input, 0, NULL) : NULL;
    json_t *item = item_in(json_object_get(r, "output"), item_id);
    if (!item) item = item_in(in, item_id);
    json_decref(r);
    json_decref(in);
    free(resp);
    free(input);
    return item;
}

int serve_rstore_delete(serve_rstore *s, const char *key, size_t key_len, const char *id) {
    pthread_mutex_lock(&s->mu);
    entry *e = find(s, key, key_len, id);
    if (e) drop(s, e);
    pthread_mutex_unlock(&s->mu);
    return e ? 0 : -1;
}

void serve_rstore_stats_get(serve_rstore *s, serve_rstore_stats *st) {
    pthread_mutex_lock(&s->mu);
    *st = s->st;
    pthread_mutex_unlock(&s->mu);
}

void serve_rstore_metrics(serve_rstore *s, const char *model, k3_buf *out) {
    serve_rstore_stats st;
    serve_rstore_stats_get(s, &st);
    char m[256];
    size_t j = 0;
    for (const char *p = model; *p && j + 3 < sizeof m; p++) {
        if (*p == '"' || *p == '\\' || *p == '\n') m[j++] = '\\';
        m[j++] = *p == '\n' ? 'n' : *p;
    }
    m[j] = 0;
    static const struct {
        const char *name, *type, *help;
    } rows[] = {
        {"k3_responses_store_bytes", "gauge", "Bytes the Responses store holds (charged)."},
        {"k3_responses_store_budget_bytes", "gauge", "The Responses store's byte budget."},
        {"k3_responses_store_entries", "gauge", "Responses kept for previous_response_id."},
        {"k3_responses_store_scopes", "gauge", "Credential + cache_salt scopes in the store."},
        {"k3_responses_store_evictions_total", "counter", "Responses evicted for room."},
        {"k3_responses_store_refused_total", "counter", "Responses too large to keep."},
    };
    double v[] = {(double)st.bytes,  (double)st.budget,    (double)st.entries,
                  (double)st.scopes, (double)st.evictions, (double)st.refused};
    for (size_t i = 0; i < sizeof rows / sizeof *rows; i++) {
        char line[512];
        int n =
            snprintf(line, sizeof line, "# HELP %s %s\n# TYPE %s %s\n%s{model=\"%s\"} %.17g\n",
                     rows[i].name, rows[i].help, rows[i].name, rows[i].type, rows[i].name, m, v[i]);
        k3_buf_put(out, line, (size_t)n < sizeof line ? (size_t)n : sizeof line - 1);
    }
}
