/* test_text_tok_linear.c — work before a request is queued is linear and
 * bounded (issue 12 part 2), checked by counting, never by timing:
 *  - the pre-tokenizer creates at most one PCRE2 JIT stack (and one match
 *    data set) per thread, however many text segments are encoded: a chat
 *    of 1 000 messages (thousands of segments) creates none on a thread that
 *    already has one, and four threads create at most four;
 *  - binary input (mostly invalid UTF-8: thousands of valid runs) likewise;
 *  - tool results are put in call order correctly on a 40 000-message
 *    request (the old insertion sort + linear id search took tens of
 *    seconds here; the time is a benchmark in docs/chat.md, not asserted). */
#include "t.h"
#include "tok/learn_bpe.h"

#include "base/err.h"
#include "base/mem.h"
#include "text/chat.h"
#include "text/pretok.h"
#include "text/tokenizer.h"

#include <jansson.h>
#include <pthread.h>

static k3_tokenizer *learned;
static k3_xtml X;

static void setup(void) {
    size_t len;
    char *corpus = k3_read_file("tests/tok/corpus.txt", &len);
    if (!corpus) {
        printf("FAIL setup: %s\n", k3_errmsg());
        exit(1);
    }
    lb_vocab v;
    lb_learn(&v, corpus, len, 300);
    size_t n;
    char *ranks = lb_ranks_text(&v, &n);
    learned = k3_tok_from_memory(ranks, n, NULL, 0, "learned");
    free(ranks);
    lb_free(&v);
    free(corpus);
    if (!learned) {
        printf("FAIL setup: %s\n", k3_errmsg());
        exit(1);
    }
}

/* A chat request of n user/assistant messages with some text each. */
static json_t *chat_of(size_t n) {
    json_t *msgs = json_array();
    for (size_t i = 0; i < n; i++) {
        char text[96];
        snprintf(text, sizeof text, "message %zu: the quick brown fox, \xc3\xa9t\xc3\xa9 %zu!", i,
                 i * 7);
        json_array_append_new(
            msgs, json_pack("{ssss}", "role", i % 2 ? "assistant" : "user", "content", text));
    }
    return json_pack("{so}", "messages", msgs);
}

TEST(one_jit_stack_per_thread_for_a_long_chat) {
    json_t *req = chat_of(1000);
    k3_ids ids = {0};
    CHECK(k3_chat_encode(learned, req, &ids) == 0, "%s", k3_errmsg());
    size_t stacks = k3_pretok_jit_stacks_created(), sets = k3_pretok_match_sets_created();
    CHECK(stacks <= 1 && sets == 1, "first request on this thread: %zu stacks, %zu match sets",
          stacks, sets);
    k3_chat_segs segs = {0};
    k3_chat_input in;
    k3_chat_input_from_request(req, &in);
    k3_chat_build(&X, &in, &segs);
    CHECK(segs.n > 5000, "only %zu segments", segs.n);
    for (int rep = 0; rep < 5; rep++) { /* more requests: no new stack */
        ids.n = 0;
        CHECK(k3_chat_encode(learned, req, &ids) == 0);
    }
    CHECK(k3_pretok_jit_stacks_created() == stacks && k3_pretok_match_sets_created() == sets,
          "%zu -> %zu JIT stacks over %zu more segments", stacks, k3_pretok_jit_stacks_created(),
          5 * segs.n);
    k3_chat_segs_free(&segs);
    k3_ids_free(&ids);
    json_decref(req);
}

TEST(binary_input_needs_no_new_stack) {
    size_t n = 200000, before = k3_pretok_jit_stacks_created();
    char *b = k3_xmalloc(n);
    uint32_t x = 12345;
    for (size_t i = 0; i < n; i++) b[i] = (char)((x = x * 1103515245u + 12345u) >> 24);
    k3_ids ids = {0};
    CHECK(k3_tok_encode_append(learned, b, n, 0, &ids) == 0, "%s", k3_errmsg());
    size_t len;
    char *back = k3_tok_decode_bytes(learned, ids.ids, ids.n, 0, &len);
    CHECK(len == n && !memcmp(back, b, n), "round trip");
    CHECK(k3_pretok_jit_stacks_created() == before, "%zu new JIT stacks",
          k3_pretok_jit_stacks_created() - before);
    free(back);
    free(b);
    k3_ids_free(&ids);
}

static void *encode_chat(void *arg) {
    k3_ids ids = {0};
    for (int rep = 0; rep < 3; rep++) k3_chat_encode(learned, arg, &ids);
    k3_ids_free(&ids);
    return NULL;
}

TEST(threads_get_one_stack_each) {
    json_t *req = chat_of(200);
    size_t before = k3_pretok_jit_stacks_created();
    pthread_t th[4];
    for (int i = 0; i < 4; i++) pthread_create(&th[i], NULL, encode_chat, req);
    for (int i = 0; i < 4; i++) pthread_join(th[i], NULL);
    size_t made = k3_pretok_jit_stacks_created() - before;
    CHECK(made >= 1 && made <= 4, "4 threads x 3 requests made %zu JIT stacks", made);
    json_decref(req);
}

/* One assistant with n calls, the n results given in reverse order, with
 * names from the calls: rendered, the results must be in call order. */
TEST(tool_results_reordered_on_a_large_request) {
    size_t n = 40000;
    json_t *calls = json_array(), *msgs = json_array();
    for (size_t k = 0; k < n; k++) {
        char id[32], name[16];
        snprintf(id, sizeof id, "call_%zu", k);
        snprintf(name, sizeof name, "f%zu", k % 7);
        json_array_append_new(
            calls, json_pack("{sss{ssss}}", "id", id, "function", "name", name, "arguments", "{}"));
    }
    json_array_append_new(msgs, json_pack("{ssss}", "role", "user", "content", "go"));
    json_array_append_new(
        msgs, json_pack("{sssssO}", "role", "assistant", "content", "", "tool_calls", calls));
    for (size_t k = n; k-- > 0;) {
        char id[32], body[32];
        snprintf(id, sizeof id, "call_%zu", k);
        snprintf(body, sizeof body, "<result %zu>", k);
        json_array_append_new(
            msgs, json_pack("{ssssss}", "role", "tool", "tool_call_id", id, "content", body));
    }
    json_t *req = json_pack("{so}", "messages", msgs);
    size_t len;
    char *p = k3_chat_render(&X, req, &len);
    CHECK(p != NULL, "%s", k3_errmsg());
    /* one pass over the prompt (no strstr: a sanitizer's strstr measures
     * the whole rest of the haystack on every call) */
    size_t bad = 0, next = 0;
    for (size_t i = 0; p && i + 8 < len; i++)
        if (p[i] == '<' && !memcmp(p + i, "<result ", 8)) {
            if (strtoul(p + i + 8, NULL, 10) != next) bad++;
            next++;
        }
    CHECK(next == n, "%zu of %zu results rendered", next, n);
    CHECK(bad == 0, "%zu results out of call order", bad);
    free(p);
    json_decref(req);
    json_decref(calls);
}

int main(void) {
    setup();
    k3_xtml_init(&X, NULL);
    RUN(one_jit_stack_per_thread_for_a_long_chat);
    RUN(binary_input_needs_no_new_stack);
    RUN(threads_get_one_stack_each);
    RUN(tool_results_reordered_on_a_large_request);
    k3_tok_free(learned);
    return t_done();
}
