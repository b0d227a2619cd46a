/* test_text_tok_load.c — building tokenizers: strict tiktoken.model and
 * tokenizer_config.json parsing (errors name the source and line), the
 * control block, the byte-level layouts, and the K3 pre-tokenizer splits
 * of chat.md §1.4. */
#include "t.h"

#include "base/err.h"
#include "base/mem.h"
#include "text/pretok.h"
#include "text/tokenizer.h"

/* The 256 single bytes as ranks 0..255 (byte order), as base64 lines. */
static char *byte_ranks(size_t extra_cap) {
    static const char a[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    char *s = k3_xmalloc(256 * 12 + extra_cap + 1);
    size_t n = 0;
    for (int b = 0; b < 256; b++)
        n += (size_t)sprintf(s + n, "%c%c== %d\n", a[b >> 2], a[(b & 3) << 4], b);
    return s;
}

static k3_tokenizer *load_with(const char *extra, const char *config) {
    char *s = byte_ranks(strlen(extra));
    strcat(s, extra);
    k3_tokenizer *t =
        k3_tok_from_memory(s, strlen(s), config, config ? strlen(config) : 0, "tiktoken.model");
    free(s);
    return t;
}

static void expect_error(const char *extra, const char *config, const char *want) {
    k3_tokenizer *t = load_with(extra, config);
    CHECK(t == NULL, "loaded despite: %s", want);
    CHECK(strstr(k3_errmsg(), want) != NULL, "error '%s' lacks '%s'", k3_errmsg(), want);
    k3_tok_free(t);
}

TEST(valid_ranks_load) {
    k3_tokenizer *t = load_with("aGk= 256\n\nIGhp 257\r\n", NULL);
    CHECK(t != NULL, "%s", k3_errmsg());
    if (!t) return;
    CHECK(k3_tok_num_base(t) == 258 && k3_tok_vocab_size(t) == 258 + 256);
    int32_t *ids;
    size_t n;
    k3_tok_encode(t, "hi hi", 5, 0, &ids, &n);
    CHECK(n == 2 && ids[0] == 256 && ids[1] == 257, "n=%zu", n);
    free(ids);
    k3_tok_free(t);
}

TEST(malformed_ranks_name_the_line) {
    expect_error("aGk 256\n", NULL, "tiktoken.model:257: bad base64");
    expect_error("a!k= 256\n", NULL, "tiktoken.model:257: bad base64");
    expect_error("aGk=256\n", NULL, "tiktoken.model:257: expected \"BASE64 RANK\"");
    expect_error("aGk= 256 7\n", NULL, "tiktoken.model:257: expected \"BASE64 RANK\"");
    expect_error("aGk= x1\n", NULL, "tiktoken.model:257: rank 'x1' is not a decimal");
    expect_error("aGk= -1\n", NULL, "tiktoken.model:257: rank '-1' is not a decimal");
    expect_error("aGk= 300\n", NULL, "tiktoken.model:257: rank 300 out of range");
    expect_error("aGk= 3\nIGhp 256\n", NULL,
                 "tiktoken.model:257: duplicate rank 3 (first on line 4)");
    expect_error("aGk= 256\naGk= 257\n", NULL,
                 "tiktoken.model:258: token bytes duplicate those of rank 256 (line 257)");
    expect_error("QR== 256\n", NULL, "tiktoken.model:257: bad base64"); /* non-canonical */
    expect_error("aGk=== 256\n", NULL, "bad base64");
}

TEST(missing_single_byte_is_an_error) {
    const char *s = "YQ== 0\nYg== 1\n";
    k3_tokenizer *t = k3_tok_from_memory(s, strlen(s), NULL, 0, "small.model");
    CHECK(!t && strstr(k3_errmsg(), "small.model: byte 0x00 has no rank"), "%s", k3_errmsg());
    t = k3_tok_from_memory("", 0, NULL, 0, "empty.model");
    CHECK(!t && strstr(k3_errmsg(), "empty.model: no ranks"), "%s", k3_errmsg());
}

TEST(missing_files_name_the_path) {
    k3_tokenizer *t = k3_tok_load("/nonexistent/model");
    CHECK(!t && strstr(k3_errmsg(), "/nonexistent/model/tiktoken.model"), "%s", k3_errmsg());
    t = k3_tok_for_model("/nonexistent/model");
    CHECK(!t && strstr(k3_errmsg(), "config.json"), "%s", k3_errmsg());
}

TEST(config_names_the_control_block) {
    const char *cfg = "{\"added_tokens_decoder\": {"
                      "\"256\": {\"content\": \"[BOS]\", \"special\": true},"
                      "\"259\": {\"content\": \"<|open|>\", \"special\": false},"
                      "\"300\": {\"content\": \"<think>\"}}}";
    k3_tokenizer *t = load_with("", cfg);
    CHECK(t != NULL, "%s", k3_errmsg());
    if (!t) return;
    CHECK(k3_tok_special_id(t, "[BOS]") == 256);
    CHECK(k3_tok_special_id(t, "<|open|>") == 259);
    CHECK(k3_tok_special_id(t, "<think>") == 300);
    CHECK(k3_tok_special_id(t, "<|sep|>") == -1); /* not named in this config */
    CHECK(k3_tok_special_id(t, "<|reserved_token_261|>") == 261);
    CHECK(k3_tok_special_id(t, "<|open|") == -1 && k3_tok_special_id(t, "") == -1);
    CHECK(!k3_tok_special_flag(t, 259) && k3_tok_special_flag(t, 256) &&
          k3_tok_special_flag(t, 300));
    size_t n;
    const k3_special_token *sp = k3_tok_specials(t, &n);
    CHECK(n == 256 && sp[3].id == 259 && !strcmp(sp[3].text, "<|open|>") && sp[3].len == 8);
    const char *b = k3_tok_token_bytes(t, 300, &n);
    CHECK(b && n == 7 && !memcmp(b, "<think>", 7));
    b = k3_tok_token_bytes(t, 'A', &n);
    CHECK(b && n == 1 && b[0] == 'A');
    CHECK(k3_tok_token_bytes(t, 512, &n) == NULL && n == 0);
    k3_tok_free(t);
}

TEST(malformed_config_is_an_error) {
    expect_error("", "{\"added_tokens_decoder\": ", "(tokenizer config):1: invalid JSON");
    expect_error("", "[1]", "expected a JSON object");
    expect_error("", "{\"added_tokens_decoder\": []}", "added_tokens_decoder must be an object");
    expect_error("", "{\"added_tokens_decoder\": {\"12\": {\"content\": \"x\"}}}",
                 "added_tokens_decoder[\"12\"]: id outside the control block [256, 512)");
    expect_error("", "{\"added_tokens_decoder\": {\"abc\": {\"content\": \"x\"}}}",
                 "key must be a decimal token id");
    expect_error("", "{\"added_tokens_decoder\": {\"257\": {\"content\": 5}}}",
                 "added_tokens_decoder[\"257\"].content: expected a non-empty string");
    expect_error("", "{\"added_tokens_decoder\": {\"257\": {\"content\": \"x\", \"special\": 1}}}",
                 ".special: expected true or false");
    expect_error("",
                 "{\"added_tokens_decoder\": {\"257\": {\"content\": \"[A]\"}, \"258\": "
                 "{\"content\": \"[A]\"}}}",
                 "control tokens 257 and 258 have the same spelling '[A]'");
    /* not adjacent in id order, with a same-length spelling between them */
    expect_error("",
                 "{\"added_tokens_decoder\": {\"257\": {\"content\": \"[A]\"}, \"258\": "
                 "{\"content\": \"[B]\"}, \"259\": {\"content\": \"[A]\"}}}",
                 "control tokens 257 and 259 have the same spelling '[A]'");
}

TEST(byte_level_layouts) {
    struct {
        int vocab, block, len, open, pad;
    } cases[] = {
        {163840, 163584, 256, 163587, 163839},
        {200000, 163584, 256, 163587, 163839},
        {1000, 744, 256, 747, 999},
        {512, 256, 256, 259, 511},
        {300, 256, 44, 259, -1},
        {262, 256, 6, 259, -1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        k3_tokenizer *t = k3_tok_byte_level(cases[i].vocab);
        CHECK(t != NULL, "vocab %d: %s", cases[i].vocab, k3_errmsg());
        if (!t) continue;
        CHECK(k3_tok_block_start(t) == cases[i].block && k3_tok_num_base(t) == 256);
        CHECK(k3_tok_vocab_size(t) == cases[i].block + cases[i].len);
        CHECK(k3_tok_special_id(t, "<|open|>") == cases[i].open, "vocab %d", cases[i].vocab);
        CHECK(k3_tok_special_id(t, "[PAD]") == cases[i].pad, "vocab %d", cases[i].vocab);
        CHECK(k3_tok_special_id(t, "<|end_of_msg|>") == cases[i].block + 2);
        CHECK(!k3_tok_is_loaded(t));
        int32_t *ids;
        size_t n;
        k3_tok_encode(t, "A<|sep|>\xC3\xA9", 10, 1, &ids, &n);
        CHECK(n == 4 && ids[0] == 65 && ids[1] == cases[i].block + 5 && ids[2] == 0xC3 &&
              ids[3] == 0xA9);
        free(ids);
        k3_tok_free(t);
    }
    CHECK(k3_tok_byte_level(256) == NULL && strstr(k3_errmsg(), "vocab_size 256 is too small"));
    CHECK(k3_tok_byte_level(97) == NULL);
}

/* chat.md §1.8: the control-token ids of the real K3 layout. */
TEST(k3_control_ids) {
    k3_tokenizer *t = k3_tok_byte_level(K3_TOK_K3_VOCAB);
    static const struct {
        const char *s;
        int id, flag;
    } want[] = {{"[BOS]", 163584, 1},
                {"[EOS]", 163585, 1},
                {"<|end_of_msg|>", 163586, 1},
                {"<|open|>", 163587, 0},
                {"<|close|>", 163588, 0},
                {"<|sep|>", 163589, 0},
                {"[start_header_id]", 163590, 1},
                {"[end_header_id]", 163591, 1},
                {"[EOT]", 163593, 1},
                {"<|media_begin|>", 163602, 1},
                {"<|media_content|>", 163603, 1},
                {"<|media_end|>", 163604, 1},
                {"<|media_pad|>", 163605, 1},
                {"<osagent_mode>", 163649, 1},
                {"[UNK]", 163838, 1},
                {"[PAD]", 163839, 1},
                {"<|reserved_token_163592|>", 163592, 1},
                {"<|reserved_token_163837|>", 163837, 1}};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        CHECK(k3_tok_special_id(t, want[i].s) == want[i].id, "%s", want[i].s);
        CHECK(k3_tok_special_flag(t, want[i].id) == want[i].flag, "%s", want[i].s);
    }
    CHECK(k3_tok_special_id(t, "<think>") == -1 && k3_tok_special_id(t, "<|im_end|>") == -1);
    /* <|open|>think<|sep|> as three segments (control, text, control) */
    k3_ids v = {0};
    k3_tok_encode_append(t, "<|open|>", 8, 1, &v);
    k3_tok_encode_append(t, "think", 5, 0, &v);
    k3_tok_encode_append(t, "<|sep|>", 7, 1, &v);
    CHECK(v.n == 7 && v.ids[0] == 163587 && v.ids[6] == 163589);
    k3_ids_free(&v);
    k3_tok_free(t);
}

/* ---- pre-tokenizer --------------------------------------------------- */

typedef struct {
    char out[2048];
    size_t n;
} joined;

static int join_piece(void *ctx, const char *p, size_t n) {
    joined *j = ctx;
    if (j->n + n + 2 >= sizeof j->out) return 1;
    if (j->n) j->out[j->n++] = '/'; /* no test input contains '/' */
    memcpy(j->out + j->n, p, n);
    j->n += n;
    j->out[j->n] = 0;
    return 0;
}

static void check_split(k3_pretok *p, const char *in, const char *want) {
    joined j = {{0}, 0};
    CHECK(k3_pretok_split(p, in, strlen(in), join_piece, &j) == 0, "%s", k3_errmsg());
    CHECK(!strcmp(j.out, want), "'%s' -> '%s', want '%s'", in, j.out, want);
}

TEST(pretok_spec_examples) {
    k3_pretok *p = k3_pretok_new();
    CHECK(p != NULL, "%s", k3_errmsg());
    if (!p) return;
    check_split(p, "Hello world", "Hello/ world");
    check_split(p, "你好世界", "你好世界");
    check_split(p, "I'm here. He'LL go", "I'm/ here/./ He'LL/ go");
    check_split(p, "emoji 🚀🚀 test!!!\n", "emoji/ 🚀🚀/ test/!!!\n");
    check_split(p, "mixed中文English123中文", "mixed/中文/English/123/中文");
    check_split(p, "  leading and trailing  \n\n  x", " / leading/ and/ trailing/  \n\n/ / x");
    check_split(p, "sunny <|open|>x<|sep|>", "sunny/ <|/open/|>/x/<|/sep/|>");
    check_split(p, "1234567", "123/456/7");
    /* \p{sc=Han}: U+3006 is Script=Common (scx=Han), so not a Han run */
    check_split(p, "〆切", "〆/切");
    /* explicit White_Space: U+180E is not \s for the reference */
    check_split(p,
                "a\xE1\xA0\x8E"
                "b",
                "a/\xE1\xA0\x8E"
                "b");
    /* (?i:'s) folds U+017F */
    check_split(p, "it'ſ", "it'ſ");
    check_split(p, "x\xC2\xA0\xC2\xA0y", "x/\xC2\xA0/\xC2\xA0y");
    check_split(p, "a\r\n\r\nb", "a/\r\n\r\n/b");
    k3_pretok_free(p);
}

TEST(pretok_pieces_tile_random_text) {
    static const char *alpha[] = {"a",
                                  "Z",
                                  "1",
                                  "'",
                                  "s",
                                  " ",
                                  "  ",
                                  "\n",
                                  "\r",
                                  "\t",
                                  "中",
                                  "〆",
                                  "한",
                                  "é",
                                  "\xCC\x81",
                                  "🚀",
                                  "!",
                                  "\xC2\xA0",
                                  "\xE2\x80\xA8",
                                  "\xE3\x80\x80",
                                  "\xC2\x85",
                                  "\x0B",
                                  "\x1C",
                                  "\xE1\xA0\x8E"};
    k3_pretok *p = k3_pretok_new();
    t_seed(3);
    for (int rep = 0; rep < 2000; rep++) {
        char in[400];
        size_t n = 0;
        int len = (int)((t_rand() + 1) * 40);
        for (int i = 0; i < len; i++) {
            const char *a = alpha[(int)((t_rand() + 1) / 2 * 24) % 24];
            memcpy(in + n, a, strlen(a));
            n += strlen(a);
        }
        in[n] = 0;
        joined j = {{0}, 0};
        CHECK(k3_pretok_split(p, in, n, join_piece, &j) == 0, "%s", k3_errmsg());
        /* without the separators the pieces are the input */
        size_t w = 0, pieces_len = 0;
        for (size_t i = 0; i < j.n; i++) pieces_len += j.out[i] != '/';
        for (size_t i = 0; i < n; i++) w += in[i] != '/';
        CHECK(pieces_len == w, "rep %d: pieces cover %zu of %zu bytes", rep, pieces_len, w);
    }
    k3_pretok_free(p);
}

int main(void) {
    RUN(valid_ranks_load);
    RUN(malformed_ranks_name_the_line);
    RUN(missing_single_byte_is_an_error);
    RUN(missing_files_name_the_path);
    RUN(config_names_the_control_block);
    RUN(malformed_config_is_an_error);
    RUN(byte_level_layouts);
    RUN(k3_control_ids);
    RUN(pretok_spec_examples);
    RUN(pretok_pieces_tile_random_text);
    return t_done();
}
