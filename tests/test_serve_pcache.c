/* test_serve_pcache.c — the server's prompt cache (serve/pcache.h) on the
 * tiny-bf16 fixture model: a hit resumes from a snapshot and gives exactly
 * the logits of feeding the same tokens without it, the longest stored
 * prefix wins, only strict prefixes match, and the byte budget evicts the
 * least recently used; snapshots branch in a trie, a whole prompt stored
 * with logits hits at its full length, a repeat store does not clone again,
 * and scopes (API key + cache_salt) never see each other's snapshots.
 * Copies are made on the cache's copier thread: held there, a snapshot still
 * being filled is hit by a restore that then gets exactly its state, a
 * snapshot evicted while copies use it is freed only after them, and a
 * sequence handed over with insert_take is kept without a copy (with logits
 * it serves a whole-prompt hit). A waiter
 * makes the queued copies itself (on its OpenMP threads) while the copier
 * is held, a fill before the restore that reads it. would_keep foretells
 * exactly the inserts that would be dropped. All of it runs twice: with the
 * f32 latent cache and with --cache-type bf16 (snapshots of bf16 caches,
 * their bytes counted at 2 a value). */
#include <omp.h>
#include <stdio.h>

#include "k3.h"
#include "serve/pcache.h"
#include "t.h"

static k3_model *model;
static int vocab;
static float *g_lg; /* logits a whole-prompt hit copies out */
#define KEY "key-a", 5

static void ids_for(int32_t *ids, int n, int salt) {
    for (int i = 0; i < n; i++) ids[i] = (int32_t)((i * 7 + salt * 13 + 1) % vocab);
}

/* Logits after feeding ids[0..n) from scratch. */
static void full_prefill(const int32_t *ids, int n, float *out) {
    k3_seq *s = k3_seq_new(model);
    CHECK(s && k3_forward(s, ids, n, out, 0) == 0, "%s", k3_errmsg());
    k3_seq_free(s);
}

static k3_seq *prefilled(const int32_t *ids, int n) {
    k3_seq *s = k3_seq_new(model);
    CHECK(s && k3_forward(s, ids, n, NULL, 0) == 0, "%s", k3_errmsg());
    return s;
}

TEST(hit_equals_full_prefill) {
    enum { N = 24 };
    int32_t ids[N];
    ids_for(ids, N, 1);
    serve_pcache *pc = serve_pcache_new(64u << 20, vocab);
    k3_seq *s = prefilled(ids, 10);
    CHECK(serve_pcache_insert(pc, KEY, ids, 10, s, NULL) == 0);
    k3_seq_free(s); /* the cache holds its own snapshot */
    s = prefilled(ids, 16);
    CHECK(serve_pcache_insert(pc, KEY, ids, 16, s, NULL) == 0);
    k3_seq_free(s);
    int64_t m = 0;
    k3_seq *hit = serve_pcache_lookup(pc, KEY, ids, N, g_lg, &m);
    CHECK(hit && m == 16, "matched %lld", (long long)m); /* the longest prefix */
    float *a = malloc(sizeof(float) * (size_t)vocab), *b = malloc(sizeof(float) * (size_t)vocab);
    CHECK(k3_forward(hit, ids + m, N - m, a, 0) == 0);
    CHECK(k3_seq_len(hit) == N);
    /* exactly what the same sequence gives when fed 16 then 8 tokens (the
     * snapshot is a deep copy)... */
    k3_seq *same = prefilled(ids, 16);
    CHECK(k3_forward(same, ids + 16, N - 16, b, 0) == 0);
    k3_seq_free(same);
    double worst = 0;
    for (int i = 0; i < vocab; i++) worst = fmax(worst, fabs((double)a[i] - b[i]));
    CHECK(worst == 0, "cached resume differs from an uncached 16+8 feed by %g", worst);
    /* ...and a one-shot prefill up to float rounding of the chunking */
    full_prefill(ids, N, b);
    worst = 0;
    for (int i = 0; i < vocab; i++) worst = fmax(worst, fabs((double)a[i] - b[i]));
    CHECK(worst < 1e-4, "cached resume differs from full prefill by %g", worst);
    k3_seq_free(hit);
    /* a snapshot as long as the whole request cannot give logits: shorter one */
    hit = serve_pcache_lookup(pc, KEY, ids, 16, g_lg, &m);
    CHECK(hit && m == 10);
    k3_seq_free(hit);
    /* a different conversation misses */
    int32_t other[N];
    ids_for(other, N, 2);
    hit = serve_pcache_lookup(pc, KEY, other, N, g_lg, &m);
    CHECK(!hit && m == 0);
    serve_pcache_stats st = serve_pcache_get_stats(pc);
    CHECK(st.entries == 2 && st.hits == 2 && st.lookups == 3 && st.tokens_reused == 26);
    CHECK(st.bytes > 0 && st.bytes <= st.budget);
    free(a);
    free(b);
    serve_pcache_free(pc);
}

TEST(lru_eviction_within_budget) {
    enum { N = 12 };
    int32_t ids[4][N];
    serve_pcache *probe = serve_pcache_new((size_t)1 << 40, vocab);
    ids_for(ids[0], N, 10);
    k3_seq *s = prefilled(ids[0], N);
    serve_pcache_insert(probe, KEY, ids[0], N, s, NULL);
    size_t one = serve_pcache_get_stats(probe).bytes; /* cost of one snapshot */
    serve_pcache_free(probe);
    CHECK(one > 0);
    /* room for two snapshots (plus slack for allocator noise), not three */
    serve_pcache *pc = serve_pcache_new(one * 2 + one / 2, vocab);
    for (int k = 0; k < 3; k++) {
        ids_for(ids[k], N, 10 + k);
        k3_seq *q = prefilled(ids[k], N);
        CHECK(serve_pcache_insert(pc, KEY, ids[k], N, q, NULL) == 0);
        k3_seq_free(q);
        if (k == 1) { /* touch entry 0 so entry 1 is the least recently used */
            int32_t ext[N + 1];
            memcpy(ext, ids[0], sizeof ids[0]);
            ext[N] = 1;
            int64_t m;
            k3_seq *h = serve_pcache_lookup(pc, KEY, ext, N + 1, g_lg, &m);
            CHECK(h && m == N);
            k3_seq_free(h);
        }
    }
    serve_pcache_stats st = serve_pcache_get_stats(pc);
    CHECK(st.entries == 2 && st.evictions == 1 && st.bytes <= st.budget,
          "entries %d evictions %llu", st.entries, (unsigned long long)st.evictions);
    int64_t m;
    for (int k = 0; k < 3; k++) {
        int32_t ext[N + 1];
        memcpy(ext, ids[k], sizeof ids[k]);
        ext[N] = 1;
        k3_seq *h = serve_pcache_lookup(pc, KEY, ext, N + 1, g_lg, &m);
        CHECK((h != NULL) == (k != 1), "entry %d present=%d", k, h != NULL);
        if (h) k3_seq_free(h);
    }
    /* budget 0: the cache is off */
    serve_pcache *off = serve_pcache_new(0, vocab);
    CHECK(serve_pcache_insert(off, KEY, ids[0], N, s, NULL) == 0 &&
          serve_pcache_get_stats(off).entries == 0);
    serve_pcache_free(off);
    k3_seq_free(s);
    serve_pcache_free(pc);
}

TEST(trie_branches_and_whole_prompt_hits) {
    enum { N = 20 };
    int32_t a[N], b[N];
    ids_for(a, N, 3);
    memcpy(b, a, sizeof a);
    for (int i = 8; i < N; i++) b[i] = (int32_t)((a[i] + 1) % vocab); /* shares 8 ids with a */
    serve_pcache *pc = serve_pcache_new(64u << 20, vocab);
    float *la = malloc(sizeof(float) * (size_t)vocab);
    k3_seq *s = k3_seq_new(model);
    CHECK(k3_forward(s, a, 12, la, 0) == 0);
    CHECK(serve_pcache_insert(pc, KEY, a, 12, s, la) == 0); /* whole prompt a[0..12) + logits */
    k3_seq_free(s);
    s = prefilled(b, 8);
    CHECK(serve_pcache_insert(pc, KEY, b, 8, s, NULL) == 0); /* splits the edge at 8 */
    k3_seq_free(s);
    s = prefilled(b, 16);
    CHECK(serve_pcache_insert(pc, KEY, b, 16, s, NULL) == 0);
    CHECK(serve_pcache_insert(pc, KEY, b, 16, s, NULL) == 0); /* the same again: no clone */
    k3_seq_free(s);
    serve_pcache_stats st = serve_pcache_get_stats(pc);
    CHECK(st.entries == 3 && st.snapshots == 3, "entries %d snapshots %llu", st.entries,
          (unsigned long long)st.snapshots);
    int64_t m;
    memset(g_lg, 0, sizeof(float) * (size_t)vocab);
    k3_seq *h = serve_pcache_lookup(pc, KEY, a, 12, g_lg, &m); /* identical repeat */
    CHECK(h && m == 12 && k3_seq_len(h) == 12, "matched %lld", (long long)m);
    CHECK(!memcmp(g_lg, la, sizeof(float) * (size_t)vocab), "stored logits differ");
    k3_seq_free(h);
    h = serve_pcache_lookup(pc, KEY, a, N, g_lg, &m); /* a longer turn of a */
    CHECK(h && m == 12);
    k3_seq_free(h);
    h = serve_pcache_lookup(pc, KEY, b, N, g_lg, &m); /* b's deepest */
    CHECK(h && m == 16);
    k3_seq_free(h);
    h = serve_pcache_lookup(pc, KEY, a, 11, g_lg, &m); /* a prefix of a: only b's 8 is usable */
    CHECK(h && m == 8, "matched %lld", (long long)m);
    k3_seq_free(h);
    h = serve_pcache_lookup(pc, KEY, b, 8, g_lg, &m); /* 8 without logits cannot end a prompt */
    CHECK(!h && m == 0);
    free(la);
    serve_pcache_free(pc);
}

TEST(scopes_do_not_share) {
    enum { N = 10 };
    int32_t ids[N + 1];
    ids_for(ids, N + 1, 5);
    serve_pcache *pc = serve_pcache_new(64u << 20, vocab);
    k3_seq *s = prefilled(ids, N);
    CHECK(serve_pcache_insert(pc, "3:abcsalt1", 10, ids, N, s, NULL) == 0);
    k3_seq_free(s);
    int64_t m;
    k3_seq *h = serve_pcache_lookup(pc, "3:abcsalt2", 10, ids, N + 1, g_lg, &m); /* other salt */
    CHECK(!h && m == 0);
    h = serve_pcache_lookup(pc, "3:abd", 5, ids, N + 1, g_lg, &m); /* other key, no salt */
    CHECK(!h && m == 0);
    h = serve_pcache_lookup(pc, "", 0, ids, N + 1, g_lg, &m); /* no key */
    CHECK(!h && m == 0);
    h = serve_pcache_lookup(pc, "3:abcsalt1", 10, ids, N + 1, g_lg, &m);
    CHECK(h && m == N);
    k3_seq_free(h);
    serve_pcache_stats st = serve_pcache_get_stats(pc);
    CHECK(st.hits == 1 && st.lookups == 4 && st.scopes == 1);
    serve_pcache_free(pc);
}

/* max |a - b| over the vocabulary */
static double maxdiff(const float *a, const float *b) {
    double w = 0;
    for (int i = 0; i < vocab; i++) w = fmax(w, fabs((double)a[i] - b[i]));
    return w;
}

/* Logits of h fed ids[m..n), against a fresh sequence fed ids[0..m) then ids[m..n). */
static double resume_diff(k3_seq *h, const int32_t *ids, int m, int n) {
    float *a = malloc(sizeof(float) * (size_t)vocab), *b = malloc(sizeof(float) * (size_t)vocab);
    CHECK(k3_forward(h, ids + m, n - m, a, 0) == 0);
    k3_seq *r = prefilled(ids, m);
    CHECK(k3_forward(r, ids + m, n - m, b, 0) == 0);
    k3_seq_free(r);
    double w = maxdiff(a, b);
    free(a);
    free(b);
    return w;
}

TEST(hit_on_a_snapshot_still_being_copied) {
    enum { N = 24 };
    int32_t ids[N], junk[4] = {1, 2, 3, 4};
    ids_for(ids, N, 7);
    serve_pcache *pc = serve_pcache_new(64u << 20, vocab);
    serve_pcache_hold(pc, 1); /* the copier starts nothing until released */
    k3_seq *s = prefilled(ids, 10);
    serve_pcache_ticket t1, t2, t3;
    CHECK(serve_pcache_insert_async(pc, KEY, ids, 10, s, NULL, &t1) == 1);
    CHECK(serve_pcache_copying(pc, &t1));
    int64_t m = 0;
    k3_seq *h = serve_pcache_lookup_async(pc, KEY, ids, N, g_lg, &m, &t2);
    CHECK(h && m == 10 && serve_pcache_copying(pc, &t2), "matched %lld", (long long)m);
    int64_t m3 = 0;
    k3_seq *h3 = serve_pcache_lookup_async(pc, KEY, ids, 12, g_lg, &m3, &t3);
    CHECK(h3 && m3 == 10);
    /* the caller is not blocked meanwhile: other sequences run */
    k3_seq *other = prefilled(junk, 4);
    k3_seq_free(other);
    serve_pcache_stats st = serve_pcache_get_stats(pc);
    CHECK(st.hits == 2 && st.copies == 0 && st.snapshots == 1, "hits %llu copies %llu",
          (unsigned long long)st.hits, (unsigned long long)st.copies);
    CHECK(serve_pcache_copying(pc, &t1) && serve_pcache_copying(pc, &t2));
    serve_pcache_hold(pc, 0);
    serve_pcache_wait(pc, &t1);
    serve_pcache_wait(pc, &t2);
    serve_pcache_wait(pc, &t3);
    CHECK(serve_pcache_get_stats(pc).copies == 3);
    /* the source goes on after its copy: the snapshot keeps the state at 10 */
    CHECK(k3_forward(s, junk, 4, NULL, 0) == 0);
    k3_seq_free(s);
    CHECK(k3_seq_len(h) == 10 && k3_seq_len(h3) == 10);
    double w = resume_diff(h, ids, 10, N);
    CHECK(w == 0, "restore of a snapshot copied later differs by %g", w);
    w = resume_diff(h3, ids, 10, 12);
    CHECK(w == 0, "second restore differs by %g", w);
    k3_seq_free(h);
    k3_seq_free(h3);
    serve_pcache_free(pc);
}

TEST(evicted_while_copied_is_freed_after) {
    enum { N = 12 };
    int32_t a[N + 2], b[N];
    ids_for(a, N + 2, 20);
    ids_for(b, N, 21);
    serve_pcache *probe = serve_pcache_new((size_t)1 << 40, vocab);
    k3_seq *s = prefilled(a, N);
    serve_pcache_insert(probe, KEY, a, N, s, NULL);
    size_t one = serve_pcache_get_stats(probe).bytes;
    serve_pcache_free(probe);
    serve_pcache *pc = serve_pcache_new(one + one / 2, vocab); /* one snapshot fits */
    serve_pcache_hold(pc, 1);
    serve_pcache_ticket ta, tr, tb;
    CHECK(serve_pcache_insert_async(pc, KEY, a, N, s, NULL, &ta) == 1);
    int64_t m = 0;
    k3_seq *h = serve_pcache_lookup_async(pc, KEY, a, N + 2, g_lg, &m, &tr);
    CHECK(h && m == N);
    k3_seq *q = prefilled(b, N);
    CHECK(serve_pcache_insert_async(pc, KEY, b, N, q, NULL, &tb) == 1); /* evicts a's, busy */
    serve_pcache_stats st = serve_pcache_get_stats(pc);
    CHECK(st.entries == 1 && st.evictions == 1, "entries %d evictions %llu", st.entries,
          (unsigned long long)st.evictions);
    serve_pcache_reap(pc); /* a's snapshot is still filled and read: kept */
    serve_pcache_hold(pc, 0);
    serve_pcache_wait(pc, &ta);
    serve_pcache_wait(pc, &tr);
    serve_pcache_wait(pc, &tb);
    serve_pcache_reap(pc); /* now freed (AddressSanitizer: no leak, no use after free) */
    k3_seq_free(s);
    k3_seq_free(q);
    double w = resume_diff(h, a, N, N + 2);
    CHECK(w == 0, "restore from an evicted snapshot differs by %g", w);
    k3_seq_free(h);
    int64_t mm;
    h = serve_pcache_lookup(pc, KEY, a, N + 2, g_lg, &mm); /* gone from the trie */
    CHECK(!h && mm == 0);
    serve_pcache_free(pc);
}

TEST(insert_take_keeps_the_sequence) {
    enum { N = 14 };
    int32_t ids[N + 3];
    ids_for(ids, N + 3, 30);
    serve_pcache *pc = serve_pcache_new(64u << 20, vocab);
    serve_pcache_insert_take(pc, KEY, ids, N, prefilled(ids, N), NULL);
    serve_pcache_insert_take(pc, KEY, ids, N, prefilled(ids, N), NULL); /* same ids: freed */
    serve_pcache_stats st = serve_pcache_get_stats(pc);
    CHECK(st.entries == 1 && st.snapshots == 1 && st.copies == 0);
    int64_t m;
    k3_seq *h = serve_pcache_lookup(pc, KEY, ids, N + 3, g_lg, &m);
    CHECK(h && m == N);
    double w = resume_diff(h, ids, N, N + 3);
    CHECK(w == 0, "restore of a taken sequence differs by %g", w);
    k3_seq_free(h);
    h = serve_pcache_lookup(pc, KEY, ids, N, g_lg, &m); /* no logits: not a whole-prompt hit */
    CHECK(!h && m == 0);
    /* with the last token's logits it replaces the one without: a whole-prompt hit */
    float *lg = malloc(sizeof(float) * (size_t)vocab);
    k3_seq *s = k3_seq_new(model);
    CHECK(k3_forward(s, ids, N, lg, 0) == 0);
    serve_pcache_insert_take(pc, KEY, ids, N, s, lg);
    st = serve_pcache_get_stats(pc);
    CHECK(st.entries == 1 && st.snapshots == 2 && st.copies == 1); /* the copy: one restore */
    h = serve_pcache_lookup(pc, KEY, ids, N, g_lg, &m);
    CHECK(h && m == N && memcmp(g_lg, lg, sizeof(float) * (size_t)vocab) == 0);
    k3_seq_free(h);
    free(lg);
    serve_pcache *off = serve_pcache_new(0, vocab); /* cache off: taken and freed */
    serve_pcache_insert_take(off, KEY, ids, N, prefilled(ids, N), NULL);
    CHECK(serve_pcache_get_stats(off).entries == 0);
    serve_pcache_free(off);
    serve_pcache_free(pc);
}

/* would_keep says 0 exactly where an insert would surely be dropped: the same
 * ids stored already (with logits, or the new one has none), more than the whole
 * budget, or the cache off; 1 where the insert keeps the snapshot. */
TEST(would_keep_matches_insert) {
    enum { N = 12 };
    int32_t ids[N];
    ids_for(ids, N, 41);
    k3_seq *like = prefilled(ids, N);
    serve_pcache *pc = serve_pcache_new(64u << 20, vocab);
    CHECK(serve_pcache_would_keep(pc, KEY, ids, N, like, 0) == 1);
    CHECK(serve_pcache_would_keep(pc, KEY, ids, 0, like, 0) == 0);
    serve_pcache_insert_take(pc, KEY, ids, N, prefilled(ids, N), NULL);
    CHECK(serve_pcache_would_keep(pc, KEY, ids, N, like, 0) == 0); /* stored */
    CHECK(serve_pcache_would_keep(pc, KEY, ids, N, like, 1) == 1); /* adds logits */
    CHECK(serve_pcache_would_keep(pc, KEY, ids, N - 1, like, 0) == 1);
    CHECK(serve_pcache_would_keep(pc, "key-b", 5, ids, N, like, 0) == 1); /* other scope */
    float *lg = malloc(sizeof(float) * (size_t)vocab);
    k3_seq *s = k3_seq_new(model);
    CHECK(k3_forward(s, ids, N, lg, 0) == 0);
    serve_pcache_insert_take(pc, KEY, ids, N, s, lg);
    CHECK(serve_pcache_would_keep(pc, KEY, ids, N, like, 1) == 0);
    serve_pcache_free(pc);
    /* a budget of exactly one snapshot's bytes keeps it; one far below drops it */
    const size_t one = serve_pcache_seq_bytes(like) + N * sizeof *ids;
    serve_pcache *fit = serve_pcache_new(one, vocab), *tiny = serve_pcache_new(4096, vocab);
    CHECK(serve_pcache_would_keep(fit, KEY, ids, N, like, 0) == 1);
    serve_pcache_insert_take(fit, KEY, ids, N, prefilled(ids, N), NULL);
    CHECK(serve_pcache_get_stats(fit).entries == 1);
    CHECK(serve_pcache_would_keep(tiny, KEY, ids, N, like, 0) == 0);
    serve_pcache_insert_take(tiny, KEY, ids, N, prefilled(ids, N), NULL);
    CHECK(serve_pcache_get_stats(tiny).entries == 0);
    serve_pcache *off = serve_pcache_new(0, vocab);
    CHECK(serve_pcache_would_keep(off, KEY, ids, N, like, 0) == 0);
    serve_pcache_free(off);
    serve_pcache_free(fit);
    serve_pcache_free(tiny);
    free(lg);
    k3_seq_free(like);
}

TEST(waiter_makes_the_copies) {
    enum { N = 20 };
    int32_t ids[N];
    ids_for(ids, N, 11);
    serve_pcache *pc = serve_pcache_new(64u << 20, vocab);
    serve_pcache_hold(pc, 1); /* the copier thread makes none of them */
    k3_seq *s = prefilled(ids, 9);
    serve_pcache_ticket t1, t2;
    CHECK(serve_pcache_insert_async(pc, KEY, ids, 9, s, NULL, &t1) == 1);
    int64_t m = 0;
    k3_seq *h = serve_pcache_lookup_async(pc, KEY, ids, N, g_lg, &m, &t2);
    CHECK(h && m == 9 && serve_pcache_copying(pc, &t2));
    int threads = omp_get_max_threads();
    omp_set_num_threads(2);     /* the copy's pieces on two threads */
    serve_pcache_wait(pc, &t2); /* makes the fill (queued first), then the restore */
    omp_set_num_threads(threads);
    CHECK(!serve_pcache_copying(pc, &t1) && serve_pcache_get_stats(pc).copies == 2);
    CHECK(k3_forward(s, ids + 9, 3, NULL, 0) == 0); /* the source goes on: the copies are made */
    k3_seq_free(s);
    double w = resume_diff(h, ids, 9, N);
    CHECK(w == 0, "restore made by the waiter differs by %g", w);
    k3_seq_free(h);
    serve_pcache_free(pc);
}

static int run_all(int cache_type) {
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/tiny-bf16", t_fixtures());
    k3_load_opts o = {.tp_size = 1, .pp_size = 1, .cache_type = cache_type};
    model = k3_model_load(dir, &o);
    if (!model) {
        printf("FAIL load_fixture (%s)\n", k3_errmsg());
        return 1;
    }
    printf("# %s latent cache\n", cache_type ? "bf16" : "f32");
    vocab = k3_model_vocab(model);
    g_lg = malloc(sizeof(float) * (size_t)vocab);
    RUN(hit_equals_full_prefill);
    RUN(lru_eviction_within_budget);
    RUN(trie_branches_and_whole_prompt_hits);
    RUN(scopes_do_not_share);
    RUN(hit_on_a_snapshot_still_being_copied);
    RUN(evicted_while_copied_is_freed_after);
    RUN(insert_take_keeps_the_sequence);
    RUN(would_keep_matches_insert);
    RUN(waiter_makes_the_copies);
    free(g_lg);
    k3_model_free(model);
    return 0;
}

int main(void) {
    if (run_all(K3_CACHE_F32) || run_all(K3_CACHE_BF16)) return 1;
    return t_done();
}
