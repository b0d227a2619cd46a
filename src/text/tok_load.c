/* tok_load.c — building a tokenizer: the tiktoken.model ranks file, the
 * tokenizer_config.json control-token names, or the byte-level layout for
 * models without tokenizer files (chat.md §1.1–1.3; layout in tokenizer.h).
 *
 * The ranks parser is strict where tiktoken would load garbage: every
 * problem is reported as "FILE:LINE: what was expected". */
#include "base/err.h"
#include "base/mem.h"
#include "text/tok_internal.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

const k3_named_token k3_named_tokens[] = {
    {0, "[BOS]", 1},
    {1, "[EOS]", 1},
    {2, "<|end_of_msg|>", 1},
    {3, "<|open|>", 0},
    {4, "<|close|>", 0},
    {5, "<|sep|>", 0},
    {6, "[start_header_id]", 1},
    {7, "[end_header_id]", 1},
    {9, "[EOT]", 1},
    {18, "<|media_begin|>", 1},
    {19, "<|media_content|>", 1},
    {20, "<|media_end|>", 1},
    {21, "<|media_pad|>", 1},
    {65, "<osagent_mode>", 1},
    {254, "[UNK]", 1},
    {255, "[PAD]", 1},
};
const size_t k3_num_named_tokens = sizeof k3_named_tokens / sizeof k3_named_tokens[0];

/* Ranks above this are refused: ids must stay far from INT32_MAX. */
#define MAX_RANKS (1u << 24)

/* ---- base64 ------------------------------------------------------------ */

static int b64_value(unsigned char c) {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
}

/* Strict standard base64 (length % 4 == 0, '=' only as final padding).
 * Writes at most 3n/4 bytes to out; returns the length or -1. */
static long b64_decode(const char *s, size_t n, uint8_t *out) {
    if (n == 0 || n % 4) return -1;
    size_t pad = 0;
    if (s[n - 1] == '=') pad = s[n - 2] == '=' ? 2 : 1;
    size_t w = 0;
    for (size_t i = 0; i < n; i += 4) {
        int v[4];
        for (int k = 0; k < 4; k++) {
            int last_group = i + 4 == n;
            if (last_group && k >= 4 - (int)pad) {
                v[k] = 0;
                continue;
            }
            v[k] = b64_value((unsigned char)s[i + k]);
            if (v[k] < 0) return -1;
        }
        uint32_t x =
            (uint32_t)v[0] << 18 | (uint32_t)v[1] << 12 | (uint32_t)v[2] << 6 | (uint32_t)v[3];
        size_t keep = i + 4 == n ? 3 - pad : 3;
        /* Non-canonical padding bits (e.g. "QR==") would decode ambiguously. */
        if (keep == 1 && (x & 0xFFFF)) return -1;
        if (keep == 2 && (x & 0xFF)) return -1;
        uint8_t bytes[3] = {(uint8_t)(x >> 16), (uint8_t)(x >> 8), (uint8_t)x};
        memcpy(out + w, bytes, keep);
        w += keep;
    }
    return (long)w;
}

/* ---- tiktoken.model ---------------------------------------------------- */

typedef struct {
    uint32_t n;        /* entries */
    uint8_t **tok;     /* by rank */
    uint32_t *len;     /* by rank */
    uint32_t *line_of; /* by rank: line number (1-based) */
} rank_lines;

static void rank_lines_free(rank_lines *rl) {
    if (rl->tok)
        for (uint32_t i = 0; i < rl->n; i++) free(rl->tok[i]);
    free(rl->tok);
    free(rl->len);
    free(rl->line_of);
    memset(rl, 0, sizeof *rl);
}

static int is_field_space(char c) {
    return c == ' ' || c == '\t' || c == '\v' || c == '\f';
}

/* Count non-empty lines (lines end at \n or \r, like bytes.splitlines). */
static size_t count_entries(const char *s, size_t n) {
    size_t count = 0, i = 0;
    while (i < n) {
        size_t e = i;
        while (e < n && s[e] != '\n' && s[e] != '\r') e++;
        if (e > i) count++;
        i = e + 1;
    }
    return count;
}

/* Split one line into exactly two whitespace-separated fields. */
static int two_fields(const char *l, size_t n, const char **f0, size_t *n0, const char **f1,
                      size_t *n1) {
    const char *f[3];
    size_t fl[3];
    int nf = 0;
    size_t i = 0;
    while (i < n) {
        while (i < n && is_field_space(l[i])) i++;
        if (i >= n) break;
        size_t st = i;
        while (i < n && !is_field_space(l[i])) i++;
        if (nf == 3) return -1;
        f[nf] = l + st;
        fl[nf++] = i - st;
    }
    if (nf != 2) return -1;
    *f0 = f[0], *n0 = fl[0], *f1 = f[1], *n1 = fl[1];
    return 0;
}

static int parse_rank(const char *s, size_t n, uint32_t *out) {
    if (n == 0 || n > 9) return -1;
    uint32_t v = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9') return -1;
        v = v * 10 + (uint32_t)(s[i] - '0');
    }
    *out = v;
    return 0;
}

/* Parse one "BASE64 RANK" line into rl (rank must be < rl->n, unused). */
static int parse_rank_line(rank_lines *rl, const char *l, size_t n, uint32_t line,
                           const char *what) {
    const char *b64, *num;
    size_t nb, nn;
    if (two_fields(l, n, &b64, &nb, &num, &nn))
        return k3_seterr("%s:%u: expected \"BASE64 RANK\" (two fields)", what, line);
    uint32_t rank;
    if (parse_rank(num, nn, &rank))
        return k3_seterr("%s:%u: rank '%.*s' is not a decimal number (at most 9 digits)", what,
                         line, (int)(nn > 40 ? 40 : nn), num);
    if (rank >= rl->n)
        return k3_seterr("%s:%u: rank %u out of range (the file has %u entries; ranks must be "
                         "0..%u)",
                         what, line, rank, rl->n, rl->n - 1);
    if (rl->tok[rank])
        return k3_seterr("%s:%u: duplicate rank %u (first on line %u)", what, line, rank,
                         rl->line_of[rank]);
    uint8_t *bytes = k3_xmalloc(nb / 4 * 3 + 1);
    long got = b64_decode(b64, nb, bytes);
    if (got <= 0) {
        free(bytes);
        return k3_seterr("%s:%u: bad base64 token '%.*s'", what, line, (int)(nb > 40 ? 40 : nb),
                         b64);
    }
    rl->tok[rank] = bytes;
    rl->len[rank] = (uint32_t)got;
    rl->line_of[rank] = line;
    return 0;
}

static int parse_ranks(const char *s, size_t n, const char *what, rank_lines *rl) {
    memset(rl, 0, sizeof *rl);
    size_t count = count_entries(s, n);
    if (count == 0) return k3_seterr("%s: no ranks (empty file)", what);
    if (count > MAX_RANKS) return k3_seterr("%s: %zu ranks, more than %u", what, count, MAX_RANKS);
    rl->n = (uint32_t)count;
    rl->tok = k3_xcalloc(count, sizeof *rl->tok);
    rl->len = k3_xcalloc(count, sizeof *rl->len);
    rl->line_of = k3_xcalloc(count, sizeof *rl->line_of);
    uint32_t line = 0;
    size_t i = 0;
    while (i < n) {
        size_t e = i;
        while (e < n && s[e] != '\n' && s[e] != '\r') e++;
        /* \r\n counts as one line break */
        line++;
        if (e > i && parse_rank_line(rl, s + i, e - i, line, what)) {
            rank_lines_free(rl);
            return -1;
        }
        if (e < n && s[e] == '\r' && e + 1 < n && s[e + 1] == '\n') e++;
        i = e + 1;
    }
    return 0;
}

/* BPE needs every single byte to be a token (chat.md §1.2). */
static int check_single_bytes(const k3_ranks *r, const char *what) {
    for (int b = 0; b < 256; b++) {
        uint8_t c = (uint8_t)b;
        if (k3_ranks_find(r, &c, 1) < 0)
            return k3_seterr("%s: byte 0x%02x has no rank (every single byte must be a token)",
                             what, b);
    }
    return 0;
}

static int build_ranks(k3_tokenizer *t, const char *s, size_t n, const char *what) {
    rank_lines rl;
    if (parse_ranks(s, n, what, &rl)) return -1;
    uint32_t da, db;
    int rc = k3_ranks_build(&t->ranks, rl.n, (const uint8_t *const *)rl.tok, rl.len, &da, &db);
    if (rc)
        k3_seterr("%s:%u: token bytes duplicate those of rank %u (line %u)", what, rl.line_of[db],
                  da, rl.line_of[da]);
    rank_lines_free(&rl);
    if (rc) return -1;
    if (check_single_bytes(&t->ranks, what)) return -1;
    t->num_base = (int)t->ranks.n;
    return 0;
}

/* ---- tokenizer_config.json --------------------------------------------- */

/* Parse a decimal control id key; -1 if it is not one. */
static long parse_id_key(const char *k) {
    if (!*k || strlen(k) > 10) return -1;
    long v = 0;
    for (const char *p = k; *p; p++) {
        if (*p < '0' || *p > '9') return -1;
        v = v * 10 + (*p - '0');
    }
    return v;
}

/* Fill names/flags (indexed by block offset) from added_tokens_decoder. */
static int parse_added_tokens(json_t *dec, const k3_tokenizer *t, char **names, int *flags,
                              const char *what) {
    if (!json_is_object(dec)) return k3_seterr("%s: added_tokens_decoder must be an object", what);
    const char *key;
    json_t *ent;
    json_object_foreach(dec, key, ent) {
        long id = parse_id_key(key);
        if (id < 0)
            return k3_seterr("%s: added_tokens_decoder[\"%.40s\"]: key must be a decimal token id",
                             what, key);
        if (id < t->block || id >= (long)t->block + t->block_len)
            return k3_seterr("%s: added_tokens_decoder[\"%s\"]: id outside the control block "
                             "[%d, %d)",
                             what, key, t->block, t->block + t->block_len);
        json_t *content = json_object_get(ent, "content");
        size_t clen = json_is_string(content) ? json_string_length(content) : 0;
        if (!json_is_object(ent) || !json_is_string(content) || clen == 0 ||
            strlen(json_string_value(content)) != clen)
            return k3_seterr("%s: added_tokens_decoder[\"%s\"].content: expected a non-empty "
                             "string without NUL",
                             what, key);
        json_t *special = json_object_get(ent, "special");
        if (special && !json_is_boolean(special))
            return k3_seterr("%s: added_tokens_decoder[\"%s\"].special: expected true or false",
                             what, key);
        int off = (int)(id - t->block);
        free(names[off]);
        names[off] = k3_xstrdup(json_string_value(content));
        flags[off] = special ? json_is_true(special) : 1;
    }
    return 0;
}

static int parse_config(const char *s, size_t n, const k3_tokenizer *t, char **names, int *flags,
                        const char *what) {
    json_error_t jerr;
    json_t *root = json_loadb(s, n, JSON_REJECT_DUPLICATES, &jerr);
    if (!root) return k3_seterr("%s:%d: invalid JSON: %s", what, jerr.line, jerr.text);
    int rc = 0;
    if (!json_is_object(root))
        rc = k3_seterr("%s: expected a JSON object", what);
    else if (json_object_get(root, "added_tokens_decoder"))
        rc = parse_added_tokens(json_object_get(root, "added_tokens_decoder"), t, names, flags,
                                what);
    json_decref(root);
    return rc;
}

/* ---- the control block and assembly ------------------------------------ */

static void default_names(const k3_tokenizer *t, char **names, int *flags) {
    for (int i = 0; i < t->block_len; i++) flags[i] = 1;
    for (size_t i = 0; i < k3_num_named_tokens; i++) {
        const k3_named_token *nt = &k3_named_tokens[i];
        if (nt->offset >= t->block_len) continue; /* short byte-level block */
        names[nt->offset] = k3_xstrdup(nt->text);
        flags[nt->offset] = nt->special_flag;
    }
}

static void free_names(char **names, int n) {
    for (int i = 0; i < n; i++) free(names[i]);
    free(names);
}

void k3_tok_free(k3_tokenizer *t) {
    if (!t) return;
    k3_ranks_free(&t->ranks);
    if (t->specials)
        for (int i = 0; i < t->block_len; i++) free((char *)t->specials[i].text);
    free(t->specials);
    free(t->by_first);
    k3_pretok_free(t->pre);
    if (t->cache) {
        for (int i = 0; i < PIECE_CACHE_SLOTS; i++) {
            free(t->cache[i].key);
            free(t->cache[i].ids);
        }
        free(t->cache);
        pthread_mutex_destroy(&t->cache_lock);
    }
    free(t);
}

/* Sort key: first byte, longer first (leftmost match is then longest),
 * then the spelling itself so that equal spellings end up adjacent. */
typedef struct {
    const k3_special_token *tok;
    int32_t index;
} special_key;

static int cmp_special_key(const void *a, const void *b) {
    const k3_special_token *x = ((const special_key *)a)->tok, *y = ((const special_key *)b)->tok;
    if ((uint8_t)x->text[0] != (uint8_t)y->text[0])
        return (uint8_t)x->text[0] < (uint8_t)y->text[0] ? -1 : 1;
    if (x->len != y->len) return x->len > y->len ? -1 : 1;
    int c = memcmp(x->text, y->text, x->len);
    if (c) return c;
    return x->id < y->id ? -1 : 1;
}

static int build_special_index(k3_tokenizer *t) {
    special_key *keys = k3_xmalloc(sizeof *keys * (size_t)t->block_len);
    for (int i = 0; i < t->block_len; i++) keys[i] = (special_key){&t->specials[i], i};
    qsort(keys, (size_t)t->block_len, sizeof *keys, cmp_special_key);
    t->by_first = k3_xmalloc(sizeof(int32_t) * (size_t)t->block_len);
    int rc = 0;
    for (int i = 0; i < t->block_len; i++) {
        const k3_special_token *s = keys[i].tok;
        t->by_first[i] = keys[i].index;
        t->starts_special[(uint8_t)s->text[0]] = 1;
        const k3_special_token *p = i > 0 ? keys[i - 1].tok : NULL;
        if (p && !rc && p->len == s->len && !memcmp(p->text, s->text, s->len))
            rc = k3_seterr("control tokens %d and %d have the same spelling '%s'", p->id, s->id,
                           s->text);
    }
    free(keys);
    return rc;
}

int k3_tok_finish(k3_tokenizer *t, char *const *names, const int *flags) {
    t->specials = k3_xcalloc((size_t)t->block_len, sizeof *t->specials);
    for (int i = 0; i < t->block_len; i++) {
        k3_special_token *s = &t->specials[i];
        s->id = t->block + i;
        if (names[i]) {
            s->text = k3_xstrdup(names[i]);
        } else {
            char buf[48];
            snprintf(buf, sizeof buf, "<|reserved_token_%d|>", s->id);
            s->text = k3_xstrdup(buf);
        }
        s->len = strlen(s->text);
        s->special_flag = flags[i];
    }
    if (build_special_index(t)) return -1;
    t->pre = k3_pretok_new();
    if (!t->pre) return -1;
    t->cache = k3_xcalloc(PIECE_CACHE_SLOTS, sizeof *t->cache);
    pthread_mutex_init(&t->cache_lock, NULL);
    return 0;
}

static k3_tokenizer *build_loaded(const char *ranks, size_t ranks_len, const char *ranks_what,
                                  const char *config, size_t config_len, const char *config_what) {
    k3_tokenizer *t = k3_xcalloc(1, sizeof *t);
    t->loaded = 1;
    char **names = NULL;
    int *flags = NULL;
    int ok = build_ranks(t, ranks, ranks_len, ranks_what) == 0;
    if (ok) {
        t->block = t->num_base;
        t->block_len = K3_TOK_BLOCK_LEN;
        names = k3_xcalloc(K3_TOK_BLOCK_LEN, sizeof *names);
        flags = k3_xcalloc(K3_TOK_BLOCK_LEN, sizeof *flags);
        if (config) {
            for (int i = 0; i < t->block_len; i++) flags[i] = 1;
            ok = parse_config(config, config_len, t, names, flags, config_what) == 0;
        } else {
            default_names(t, names, flags);
        }
    }
    if (ok) ok = k3_tok_finish(t, names, flags) == 0;
    if (names) free_names(names, K3_TOK_BLOCK_LEN);
    free(flags);
    if (!ok) {
        k3_tok_free(t);
        return NULL;
    }
    return t;
}

k3_tokenizer *k3_tok_from_memory(const char *ranks, size_t ranks_len, const char *config,
                                 size_t config_len, const char *what) {
    char cfg_what[512];
    snprintf(cfg_what, sizeof cfg_what, "%s (tokenizer config)", what);
    return build_loaded(ranks, ranks_len, what, config, config_len, cfg_what);
}

k3_tokenizer *k3_tok_load_files(const char *ranks_path, const char *config_path) {
    size_t rn, cn = 0;
    char *ranks = k3_read_regular_file(ranks_path, K3_SMALL_FILE_MAX, &rn);
    if (!ranks) return NULL;
    char *config = NULL;
    if (config_path) {
        config = k3_read_regular_file(config_path, K3_SMALL_FILE_MAX, &cn);
        if (!config) {
            free(ranks);
            return NULL;
        }
    }
    k3_tokenizer *t = build_loaded(ranks, rn, ranks_path, config, cn, config_path);
    free(ranks);
    free(config);
    return t;
}

static char *join_path(const char *dir, const char *name) {
    size_t n = strlen(dir) + strlen(name) + 2;
    char *p = k3_xmalloc(n);
    snprintf(p, n, "%s/%s", dir, name);
    return p;
}

k3_tokenizer *k3_tok_load(const char *model_dir) {
    char *ranks = join_path(model_dir, "tiktoken.model");
    char *config = join_path(model_dir, "tokenizer_config.json");
    k3_tokenizer *t = k3_tok_load_files(ranks, config);
    free(ranks);
    free(config);
    return t;
}

/* Control block placement for a byte-level vocabulary (tokenizer.h). */
static void byte_level_block(int vocab_size, int *block, int *block_len) {
    if (vocab_size >= K3_TOK_K3_VOCAB)
        *block = K3_TOK_K3_NUM_BASE;
    else if (vocab_size >= 256 + K3_TOK_BLOCK_LEN)
        *block = vocab_size - K3_TOK_BLOCK_LEN;
    else
        *block = 256;
    int room = vocab_size - *block;
    *block_len = room < K3_TOK_BLOCK_LEN ? room : K3_TOK_BLOCK_LEN;
}

k3_tokenizer *k3_tok_byte_level(int vocab_size) {
    if (vocab_size <= 256) {
        k3_seterr("byte-level tokenizer: vocab_size %d is too small (needs > 256: 256 byte ids "
                  "plus control tokens)",
                  vocab_size);
        return NULL;
    }
    k3_tokenizer *t = k3_xcalloc(1, sizeof *t);
    uint8_t bytes[256];
    const uint8_t *tok[256];
    uint32_t len[256];
    for (int b = 0; b < 256; b++) {
        bytes[b] = (uint8_t)b;
        tok[b] = &bytes[b];
        len[b] = 1;
    }
    uint32_t da, db;
    k3_ranks_build(&t->ranks, 256, tok, len, &da, &db); /* distinct bytes: cannot fail */
    t->num_base = 256;
    byte_level_block(vocab_size, &t->block, &t->block_len);
    char **names = k3_xcalloc((size_t)t->block_len, sizeof *names);
    int *flags = k3_xcalloc((size_t)t->block_len, sizeof *flags);
    default_names(t, names, flags);
    int rc = k3_tok_finish(t, names, flags);
    free_names(names, t->block_len);
    free(flags);
    if (rc) {
        k3_tok_free(t);
        return NULL;
    }
    return t;
}

/* config.json of model_dir, parsed; NULL + k3_errmsg. */
static json_t *load_model_config(const char *model_dir) {
    char *path = join_path(model_dir, "config.json");
    size_t len;
    char *text = k3_read_regular_file(path, K3_SMALL_FILE_MAX, &len);
    json_t *root = NULL;
    if (text) {
        json_error_t jerr;
        root = json_loadb(text, len, 0, &jerr);
        if (!root) k3_seterr("%s: invalid JSON: %s (line %d)", path, jerr.text, jerr.line);
    }
    free(text);
    free(path);
    return root;
}

/* vocab_size from config.json (top level or text_config); -1 + k3_errmsg. */
static int config_vocab_size(json_t *root, const char *model_dir) {
    json_t *vs = json_object_get(root, "vocab_size");
    if (!json_is_integer(vs))
        vs = json_object_get(json_object_get(root, "text_config"), "vocab_size");
    if (json_is_integer(vs) && json_integer_value(vs) > 0 && json_integer_value(vs) < (1 << 26))
        return (int)json_integer_value(vs);
    return k3_seterr("%s/config.json: vocab_size: expected a positive integer (top level or "
                     "text_config)",
                     model_dir);
}

int k3_tok_byte_level_requested(void) {
    const char *e = getenv("K3_BYTE_TOKENIZER");
    return e && *e && strcmp(e, "0");
}

/* The byte-level stand-in is only for checkpoints that say so (config.json
 * "k3_tokenizer": "byte-level") or when the user asks (--byte-tokenizer /
 * K3_BYTE_TOKENIZER=1): a real K3 directory that lost tiktoken.model would
 * otherwise tokenize every byte as a token and answer blank. */
static k3_tokenizer *fallback(const char *model_dir, json_t *root, int vocab_size) {
    json_t *mark = json_object_get(root, "k3_tokenizer");
    if (json_is_string(mark) && !strcmp(json_string_value(mark), "byte-level"))
        return k3_tok_byte_level(vocab_size);
    if (k3_tok_byte_level_requested()) return k3_tok_byte_level(vocab_size);
    k3_seterr("%s: no tiktoken.model: copy tiktoken.model and tokenizer_config.json from the "
              "release into the model directory (for a test checkpoint whose ids are raw bytes, "
              "pass --byte-tokenizer or add \"k3_tokenizer\": \"byte-level\" to its "
              "config.json)",
              model_dir);
    return NULL;
}

static int have_ranks(const char *model_dir) {
    char *ranks = join_path(model_dir, "tiktoken.model");
    struct stat st;
    int have = stat(ranks, &st) == 0;
    free(ranks);
    return have;
}

k3_tokenizer *k3_tok_open(const char *model_dir, int vocab_size) {
    if (have_ranks(model_dir)) return k3_tok_load(model_dir);
    json_t *root = load_model_config(model_dir);
    k3_tokenizer *t = root ? fallback(model_dir, root, vocab_size) : NULL;
    json_decref(root);
    return t;
}

k3_tokenizer *k3_tok_for_model(const char *model_dir) {
    if (!model_dir) return k3_tok_byte_level(K3_TOK_K3_VOCAB);
    if (have_ranks(model_dir)) return k3_tok_load(model_dir);
    json_t *root = load_model_config(model_dir);
    if (!root) return NULL;
    int v = config_vocab_size(root, model_dir);
    k3_tokenizer *t = v < 0 ? NULL : fallback(model_dir, root, v);
    json_decref(root);
    return t;
}
