/* test_text_tok_bpe.c — rank BPE and encoding with a vocabulary learned from
 * tests/tok/corpus.txt: fast merge vs the literal reference on awkward
 * piece sizes, round trips, the reference's chunking (400 000-code-point
 * windows, 25 000-run split), invalid UTF-8, special-token matching. */
#include "t.h"
#include "tok/learn_bpe.h"

#include "base/err.h"
#include "text/bpe.h"
#include "text/tok_internal.h"
#include "text/tokenizer.h"

#include <pthread.h>

static k3_tokenizer *learned;
static char *corpus;
static size_t corpus_len;

static void setup(void) {
    const char *path = getenv("K3_TOK_CORPUS");
    corpus = k3_read_file(path ? path : "tests/tok/corpus.txt", &corpus_len);
    if (!corpus) {
        printf("FAIL setup: %s\n", k3_errmsg());
        exit(1);
    }
    lb_vocab v;
    lb_learn(&v, corpus, corpus_len, 500);
    size_t n;
    char *ranks = lb_ranks_text(&v, &n);
    learned = k3_tok_from_memory(ranks, n, NULL, 0, "learned");
    if (!learned) {
        printf("FAIL setup: %s\n", k3_errmsg());
        exit(1);
    }
    printf("learned vocabulary: %d ranks\n", k3_tok_num_base(learned));
    free(ranks);
    lb_free(&v);
}

static int ids_equal(const k3_ids *a, const k3_ids *b) {
    return a->n == b->n && (a->n == 0 || !memcmp(a->ids, b->ids, a->n * sizeof(int32_t)));
}

/* Random bytes drawn mostly from the corpus so that merges apply. */
static void corpus_bytes(uint8_t *b, size_t n) {
    size_t at = (size_t)((t_rand() + 1) / 2 * (double)corpus_len) % corpus_len;
    for (size_t i = 0; i < n; i++) {
        if (t_rand() > 0.9) at = (size_t)((t_rand() + 1) / 2 * (double)corpus_len) % corpus_len;
        b[i] =
            t_rand() > 0.97 ? (uint8_t)((t_rand() + 1) * 128) : (uint8_t)corpus[at++ % corpus_len];
    }
}

TEST(learned_vocabulary_has_merges) {
    CHECK(k3_tok_num_base(learned) > 600, "only %d ranks", k3_tok_num_base(learned));
    int32_t *ids;
    size_t n;
    CHECK(k3_tok_encode(learned, corpus, corpus_len, 0, &ids, &n) == 0, "%s", k3_errmsg());
    CHECK(n < corpus_len / 2, "%zu tokens for %zu bytes", n, corpus_len);
    free(ids);
}

TEST(fast_merge_equals_reference_on_awkward_sizes) {
    static const size_t sizes[] = {1, 2, 3, 7, 31, 63, 64, 65, 66, 127, 200, 513, 1000, 4099};
    const k3_ranks *r = &learned->ranks;
    uint8_t *b = k3_xmalloc(5000);
    t_seed(11);
    for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++)
        for (int rep = 0; rep < (sizes[si] > 1000 ? 2 : 30); rep++) {
            size_t n = sizes[si];
            corpus_bytes(b, n);
            if (rep == 1) memset(b, 'a', n); /* equal-rank ties everywhere */
            if (rep == 2) memset(b, ' ', n);
            k3_ids fast = {0}, ref = {0};
            CHECK(k3_bpe_merge(r, b, n, &fast) == 0);
            CHECK(k3_bpe_ref(r, b, n, &ref) == 0);
            CHECK(ids_equal(&fast, &ref), "size %zu rep %d: %zu vs %zu ids", n, rep, fast.n, ref.n);
            k3_ids_free(&fast);
            k3_ids_free(&ref);
        }
    free(b);
}

TEST(encode_decode_round_trip_any_bytes) {
    uint8_t buf[700];
    t_seed(5);
    for (int rep = 0; rep < 300; rep++) {
        size_t n = (size_t)((t_rand() + 1) * 350);
        corpus_bytes(buf, n);
        for (int allow = 0; allow < 2; allow++) {
            int32_t *ids;
            size_t nid, dn;
            CHECK(k3_tok_encode(learned, (char *)buf, n, allow, &ids, &nid) == 0, "%s",
                  k3_errmsg());
            char *back = k3_tok_decode_bytes(learned, ids, nid, 0, &dn);
            CHECK(dn == n && !memcmp(back, buf, n), "rep %d: round trip lost bytes", rep);
            free(back);
            free(ids);
        }
    }
}

/* Bytes + "aa" + "aaaa": runs of 'a' merge in a way that depends on where
 * the run is cut, so a missing or misplaced cut changes the ids. */
static k3_tokenizer *aa_tokenizer(void) {
    lb_vocab v = {0};
    for (int b = 0; b < 256; b++) {
        v.bytes[b] = k3_xmalloc(1);
        v.bytes[b][0] = (uint8_t)b;
        v.len[b] = 1;
    }
    v.bytes[256] = (uint8_t *)k3_xstrdup("aa");
    v.len[256] = 2;
    v.bytes[257] = (uint8_t *)k3_xstrdup("aaaa");
    v.len[257] = 4;
    v.ntok = 258;
    size_t n;
    char *text = lb_ranks_text(&v, &n);
    k3_tokenizer *t = k3_tok_from_memory(text, n, NULL, 0, "aa-vocab");
    free(text);
    lb_free(&v);
    return t;
}

static void encode_into(k3_tokenizer *t, const char *s, size_t n, k3_ids *out) {
    CHECK(k3_tok_encode_append(t, s, n, 0, out) == 0, "%s", k3_errmsg());
}

/* whole == enc(s[:cut]) ++ enc(s[cut:]) and != BPE of the uncut text. */
static void check_cut(k3_tokenizer *t, const char *what, const char *s, size_t n, size_t cut,
                      const k3_ids *uncut) {
    k3_ids whole = {0}, parts = {0};
    encode_into(t, s, n, &whole);
    encode_into(t, s, cut, &parts);
    encode_into(t, s + cut, n - cut, &parts);
    CHECK(ids_equal(&whole, &parts), "%s: %zu ids vs %zu", what, whole.n, parts.n);
    CHECK(!ids_equal(&whole, uncut), "%s: same as without the cut", what);
    k3_ids_free(&whole);
    k3_ids_free(&parts);
}

TEST(long_runs_are_cut_at_25000_code_points) {
    k3_tokenizer *t = aa_tokenizer();
    CHECK(t != NULL, "%s", k3_errmsg());
    if (!t) return;
    size_t n = 30001;
    char *s = k3_xmalloc(2 * n + 8);
    /* "b" + 30000 "a": one letter run, one pre-token piece; the run (b
     * included) is cut before code point 25000 */
    s[0] = 'b';
    memset(s + 1, 'a', n - 1);
    k3_ids uncut = {0};
    CHECK(k3_bpe_merge(&t->ranks, (uint8_t *)s, n, &uncut) == 0);
    check_cut(t, "b + 30000 a", s, n, 25000, &uncut);
    k3_ids_free(&uncut);
    /* code points, not bytes: "b" + 26000 x U+00E9 is cut at byte 1 + 2 * 24999 */
    for (size_t i = 0; i < 26000; i++) s[1 + 2 * i] = (char)0xC3, s[2 + 2 * i] = (char)0xA9;
    k3_ids a = {0}, b = {0};
    encode_into(t, s, 1 + 52000, &a);
    encode_into(t, s, 1 + 2 * 24999, &b);
    encode_into(t, s + 1 + 2 * 24999, 52000 - 2 * 24999, &b);
    CHECK(ids_equal(&a, &b));
    k3_ids_free(&a);
    k3_ids_free(&b);
    /* a space resets the run: 20000 a, space, 20000 a is not cut */
    memset(s, 'a', 40001);
    s[20000] = ' ';
    encode_into(t, s, 40001, &a);
    CHECK(a.n == 5000 + 1 + 5000, "%zu ids", a.n); /* aaaa x 5000, " ", aaaa x 5000 */
    k3_ids_free(&a);
    free(s);
    k3_tok_free(t);
}

TEST(windows_of_400000_code_points) {
    k3_tokenizer *t = aa_tokenizer();
    if (!t) return;
    /* "aa" + "aaaa " x 80200: pieces "aaaaaa", " aaaa", ...; code point
     * 400000 falls inside a " aaaa" piece */
    size_t n = 2 + 5 * 80200;
    char *s = k3_xmalloc(n);
    memset(s, 'a', n);
    for (size_t k = 0; k < 80200; k++) s[2 + 5 * k + 4] = ' ';
    k3_ids uncut = {0};
    encode_into(t, s, 399996, &uncut); /* ends at a piece boundary (before a space) */
    encode_into(t, s + 399996, n - 399996, &uncut);
    check_cut(t, "window", s, n, 400000, &uncut);
    k3_ids_free(&uncut);
    free(s);
    k3_tok_free(t);
}

/* Over 1 MiB with several windows, slices are encoded in parallel; the ids
 * must equal the windows encoded one by one (each below the threshold). */
TEST(parallel_windows_equal_serial) {
    size_t n = 0, cap = 2600000;
    char *s = k3_xmalloc(cap + corpus_len);
    while (n + corpus_len < cap) {
        memcpy(s + n, corpus, corpus_len);
        n += corpus_len;
        s[n] = (char)('a' + n % 26); /* vary the seams */
        n++;
    }
    k3_ids whole = {0}, serial = {0};
    CHECK(k3_tok_encode_append(learned, s, n, 1, &whole) == 0, "%s", k3_errmsg());
    size_t start = 0, cps = 0, windows = 0;
    for (size_t i = 0; i <= n; i++) {
        int lead = i == n || ((uint8_t)s[i] & 0xC0) != 0x80; /* the corpus is valid UTF-8 */
        if (lead && (cps == 400000 || i == n)) {
            CHECK(k3_tok_encode_append(learned, s + start, i - start, 1, &serial) == 0);
            start = i;
            cps = 0;
            windows++;
        }
        cps += lead;
    }
    CHECK(windows >= 3, "%zu windows", windows);
    CHECK(ids_equal(&whole, &serial), "%zu ids vs %zu", whole.n, serial.n);
    k3_ids_free(&whole);
    k3_ids_free(&serial);
    free(s);
}

TEST(invalid_utf8_is_encoded_losslessly) {
    const char s[] = "ab\xff\xfe"
                     "cd\xe4\xbd"
                     " x\xed\xa0\x80y\xf0\x9f\x9a";
    int32_t *ids;
    size_t n, dn;
    CHECK(k3_tok_encode(learned, s, sizeof s - 1, 1, &ids, &n) == 0, "%s", k3_errmsg());
    char *back = k3_tok_decode_bytes(learned, ids, n, 0, &dn);
    CHECK(dn == sizeof s - 1 && !memcmp(back, s, dn));
    free(back);
    free(ids);
}

TEST(special_tokens_only_where_allowed) {
    const char *s = "x<|open|>y<|sep|>[BOS]<|reserved_token_";
    int32_t *ids;
    size_t n;
    int open = k3_tok_special_id(learned, "<|open|>"), sep = k3_tok_special_id(learned, "<|sep|>");
    int bos = k3_tok_special_id(learned, "[BOS]");
    CHECK(open == k3_tok_num_base(learned) + 3 && sep == open + 2 && bos == open - 3);
    k3_tok_encode(learned, s, strlen(s), 1, &ids, &n);
    int seen_open = 0, seen_sep = 0, seen_bos = 0;
    for (size_t i = 0; i < n; i++) {
        seen_open += ids[i] == open;
        seen_sep += ids[i] == sep;
        seen_bos += ids[i] == bos;
    }
    CHECK(seen_open == 1 && seen_sep == 1 && seen_bos == 1);
    free(ids);
    k3_tok_encode(learned, s, strlen(s), 0, &ids, &n);
    for (size_t i = 0; i < n; i++) CHECK(!k3_tok_is_special(learned, ids[i]), "id %d", ids[i]);
    free(ids);
    /* every reserved spelling is matched too */
    char name[64];
    snprintf(name, sizeof name, "a<|reserved_token_%d|>b", k3_tok_num_base(learned) + 8);
    k3_tok_encode(learned, name, strlen(name), 1, &ids, &n);
    CHECK(n == 3 && ids[1] == k3_tok_num_base(learned) + 8);
    free(ids);
}

TEST(decode_skips_flagged_specials_only) {
    int base = k3_tok_num_base(learned);
    int32_t ids[] = {base + 3, base + 2, base + 5, base + 0, base + 255};
    size_t n;
    char *s = k3_tok_decode(learned, ids, 5, 0, &n);
    CHECK(!strcmp(s, "<|open|><|end_of_msg|><|sep|>[BOS][PAD]"), "got '%s'", s);
    free(s);
    s = k3_tok_decode(learned, ids, 5, 1, &n);
    CHECK(!strcmp(s, "<|open|><|sep|>"), "got '%s'", s);
    free(s);
    int32_t bad[] = {-1, base + 256, 1 << 30};
    s = k3_tok_decode(learned, bad, 3, 0, &n);
    CHECK(n == 0);
    free(s);
}

/* Threads share one tokenizer (and its piece cache): same ids as alone. */
typedef struct {
    k3_ids want;
    int bad;
} thread_job;

static void *encode_many(void *arg) {
    thread_job *job = arg;
    for (int rep = 0; rep < 20; rep++) {
        k3_ids got = {0};
        k3_tok_encode_append(learned, corpus, corpus_len, rep & 1, &got);
        k3_ids *want = &job[rep & 1].want;
        if (!ids_equal(&got, want)) job->bad++;
        k3_ids_free(&got);
    }
    return NULL;
}

TEST(threads_share_a_tokenizer) {
    thread_job jobs[4][2];
    pthread_t th[4];
    for (int i = 0; i < 4; i++) {
        memset(jobs[i], 0, sizeof jobs[i]);
        k3_tok_encode_append(learned, corpus, corpus_len, 0, &jobs[i][0].want);
        k3_tok_encode_append(learned, corpus, corpus_len, 1, &jobs[i][1].want);
    }
    for (int i = 0; i < 4; i++) pthread_create(&th[i], NULL, encode_many, jobs[i]);
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        CHECK(jobs[i][0].bad == 0, "thread %d: %d encodings differ", i, jobs[i][0].bad);
        k3_ids_free(&jobs[i][0].want);
        k3_ids_free(&jobs[i][1].want);
    }
}

int main(void) {
    setup();
    RUN(learned_vocabulary_has_merges);
    RUN(fast_merge_equals_reference_on_awkward_sizes);
    RUN(encode_decode_round_trip_any_bytes);
    RUN(long_runs_are_cut_at_25000_code_points);
    RUN(windows_of_400000_code_points);
    RUN(parallel_windows_equal_serial);
    RUN(invalid_utf8_is_encoded_losslessly);
    RUN(special_tokens_only_where_allowed);
    RUN(decode_skips_flagged_specials_only);
    RUN(threads_share_a_tokenizer);
    k3_tok_free(learned);
    free(corpus);
    return t_done();
}
