/* test_text_tok_stream.c — UTF-8 repair (Python errors="replace") and the
 * streaming detokenizer: fed split at every byte offset (two and three
 * pieces), through token ids, it emits only whole characters and, after
 * flush, exactly the repaired text of all bytes. */
#include "t.h"

#include "base/mem.h"
#include "text/tokenizer.h"
#include "text/utf8.h"

#define FFFD "\xEF\xBF\xBD"

static int is_valid_utf8(const char *s, size_t n) {
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        int st;
        size_t span = k3_utf8_scan((const uint8_t *)s + i, n - i, &cp, &st);
        if (st != K3_UTF8_OK) return 0;
        i += span;
    }
    return 1;
}

static void check_sanitize_n(const char *in, size_t n, const char *want, size_t want_len) {
    size_t len;
    char *got = k3_utf8_sanitize(in, n, &len);
    CHECK(len == want_len && !memcmp(got, want, len), "input of %zu bytes -> '%s'", n, got);
    free(got);
}

static void check_sanitize(const char *in, size_t n, const char *want) {
    check_sanitize_n(in, n, want, strlen(want));
}

/* Expected values are CPython's bytes.decode("utf-8", "replace"). */
TEST(sanitize_matches_python_replace) {
    check_sanitize("abc", 3, "abc");
    check_sanitize("\xE2\x82"
                   "A",
                   3, FFFD "A");                                /* truncated 3-byte, then ASCII */
    check_sanitize("\xF0\x80", 2, FFFD FFFD);                   /* F0 needs 90..BF next */
    check_sanitize("\xED\xA0\x80", 3, FFFD FFFD FFFD);          /* a UTF-16 surrogate */
    check_sanitize("\xC0\xAF", 2, FFFD FFFD);                   /* overlong */
    check_sanitize("\xF4\x90\x80\x80", 4, FFFD FFFD FFFD FFFD); /* > U+10FFFF */
    check_sanitize("\xE4\xBD", 2, FFFD);                        /* incomplete at the end: one */
    check_sanitize("\xF0\x9F\x9A", 3, FFFD);
    check_sanitize("\xF0\x9F\x9A\x80", 4, "\xF0\x9F\x9A\x80");
    check_sanitize("\x80\xBF", 2, FFFD FFFD);
    check_sanitize("\xFF"
                   "a\xFE",
                   3, FFFD "a" FFFD);
    check_sanitize("\xE0\x9F\x80", 3, FFFD FFFD FFFD); /* E0 needs A0..BF next */
    check_sanitize("\xEF\xBF\xBD", 3, FFFD);
    check_sanitize_n("a\0b", 3, "a\0b", 3);
}

/* A text with 1-4 byte characters, invalid bytes and a truncated tail. */
static const char MIXED[] = "a\xC3\xA9\xE4\xBD\xA0\xF0\x9F\x9A\x80z\xFF\xE2\x82"
                            "b\xED\xA0\x80"
                            "\xF0\x9F\x91\x8D\xF0\x9F\x8F\xBD\xE4\xBD";
#define MIXED_LEN (sizeof MIXED - 1)

/* Push MIXED in the given pieces; output must equal sanitize(MIXED). */
static void check_stream(const size_t *cuts, int ncuts) {
    size_t want_len;
    char *want = k3_utf8_sanitize(MIXED, MIXED_LEN, &want_len);
    k3_detok *d = k3_detok_new(NULL, 0);
    char got[512];
    size_t n = 0, prev = 0;
    for (int c = 0; c <= ncuts; c++) {
        size_t end = c < ncuts ? cuts[c] : MIXED_LEN, len;
        const char *out = k3_detok_push_bytes(d, MIXED + prev, end - prev, &len);
        CHECK(is_valid_utf8(out, len), "cut %zu: partial character emitted", end);
        memcpy(got + n, out, len);
        n += len;
        prev = end;
    }
    size_t len;
    const char *out = k3_detok_flush(d, &len);
    memcpy(got + n, out, len);
    n += len;
    CHECK(n == want_len && !memcmp(got, want, n), "cuts %zu/%zu: stream differs",
          ncuts ? cuts[0] : 0, ncuts > 1 ? cuts[1] : 0);
    k3_detok_free(d);
    free(want);
}

TEST(stream_every_two_way_split) {
    for (size_t a = 0; a <= MIXED_LEN; a++) check_stream(&a, 1);
}

TEST(stream_every_three_way_split) {
    for (size_t a = 0; a <= MIXED_LEN; a++)
        for (size_t b = a; b <= MIXED_LEN; b++) {
            size_t cuts[2] = {a, b};
            check_stream(cuts, 2);
        }
}

TEST(stream_byte_by_byte) {
    size_t cuts[MIXED_LEN];
    for (size_t i = 0; i < MIXED_LEN; i++) cuts[i] = i + 1;
    check_stream(cuts, (int)MIXED_LEN - 1);
}

TEST(stream_holds_incomplete_tail_until_flush) {
    k3_detok *d = k3_detok_new(NULL, 0);
    size_t len;
    k3_detok_push_bytes(d, "\xF0\x9F", 2, &len);
    CHECK(len == 0, "emitted %zu bytes of half an emoji", len);
    k3_detok_push_bytes(d, "\x9A", 1, &len);
    CHECK(len == 0);
    const char *out = k3_detok_push_bytes(d, "\x80!", 2, &len);
    CHECK(len == 5 && !memcmp(out, "\xF0\x9F\x9A\x80!", 5));
    /* a byte that can never complete is replaced at once */
    out = k3_detok_push_bytes(d, "\xFF", 1, &len);
    CHECK(len == 3 && !memcmp(out, FFFD, 3));
    /* never lose bytes at the end: flush turns a held tail into U+FFFD */
    k3_detok_push_bytes(d, "\xE4\xBD", 2, &len);
    CHECK(len == 0);
    out = k3_detok_flush(d, &len);
    CHECK(len == 3 && !memcmp(out, FFFD, 3));
    out = k3_detok_flush(d, &len);
    CHECK(len == 0);
    k3_detok_free(d);
}

/* Through ids: a byte-level tokenizer gives one id per byte, so every token
 * boundary is a split point. Control tokens arrive whole. */
TEST(stream_through_token_ids) {
    k3_tokenizer *t = k3_tok_byte_level(K3_TOK_K3_VOCAB);
    int32_t *ids;
    size_t nid;
    CHECK(k3_tok_encode(t, MIXED, MIXED_LEN, 0, &ids, &nid) == 0);
    CHECK(nid == MIXED_LEN);
    k3_detok *d = k3_detok_new(t, 0);
    char got[512];
    size_t n = 0, len;
    int32_t close = k3_tok_special_id(t, "<|close|>");
    for (size_t i = 0; i < nid; i++) {
        const char *out = k3_detok_push(d, ids[i], &len);
        memcpy(got + n, out, len), n += len;
        if (i == 3) { /* a control token in the middle of a character */
            out = k3_detok_push(d, close, &len);
            memcpy(got + n, out, len), n += len;
        }
    }
    const char *out = k3_detok_flush(d, &len);
    memcpy(got + n, out, len), n += len;
    /* bytes 0..3 = "a" + e-acute + first byte of U+4F60; then <|close|>
     * breaks that character */
    const char *want_head = "a\xC3\xA9" FFFD "<|close|>" FFFD FFFD;
    CHECK(n > strlen(want_head) && !memcmp(got, want_head, strlen(want_head)), "got '%.*s'", (int)n,
          got);
    k3_detok_free(d);
    free(ids);
    k3_tok_free(t);
}

TEST(stream_skip_special) {
    k3_tokenizer *t = k3_tok_byte_level(1000);
    k3_detok *d = k3_detok_new(t, 1);
    size_t len;
    const char *out = k3_detok_push(d, k3_tok_special_id(t, "<|end_of_msg|>"), &len);
    CHECK(len == 0);
    out = k3_detok_push(d, k3_tok_special_id(t, "<|open|>"), &len);
    CHECK(len == 8 && !memcmp(out, "<|open|>", 8));
    k3_detok_free(d);
    k3_tok_free(t);
}

int main(void) {
    RUN(sanitize_matches_python_replace);
    RUN(stream_every_two_way_split);
    RUN(stream_every_three_way_split);
    RUN(stream_byte_by_byte);
    RUN(stream_holds_incomplete_tail_until_flush);
    RUN(stream_through_token_ids);
    RUN(stream_skip_special);
    return t_done();
}
