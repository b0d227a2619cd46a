/* synth_tok.c — the tokenizer files of a synthetic checkpoint: tiktoken.model
 * (base64 ranks) and tokenizer_config.json with the K3 control tokens, laid
 * out like the byte-level tokenizer (see synth.h). */
#include "gen/synth.h"

#include "base/err.h"
#include "base/mem.h"
#include "text/tokenizer.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void base64(const unsigned char *in, size_t n, char *out) {
    static const char tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    size_t o = 0;
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)in[i] << 16;
        if (i + 1 < n) v |= (uint32_t)in[i + 1] << 8;
        if (i + 2 < n) v |= in[i + 2];
        out[o++] = tab[(v >> 18) & 63];
        out[o++] = tab[(v >> 12) & 63];
        out[o++] = i + 1 < n ? tab[(v >> 6) & 63] : '=';
        out[o++] = i + 2 < n ? tab[v & 63] : '=';
    }
    out[o] = 0;
}

/* Letters by English frequency; filler tokens are built from them. */
static const char first_chars[] = " etaoinshrdlcumwfgypbvkjxqz";
static const char next_chars[] = "etaoinshrdlcumwfgypbvkjxqz";

/* Filler rank r (0-based, after the 256 bytes): breadth first over strings
 * "<first><next>..." — all 2-character ones, then 3, ... Each one's prefix is
 * also a token, so the BPE can reach it. Writes the string into buf. */
static size_t filler_token(long r, char *buf) {
    long count = (long)strlen(first_chars) * (long)strlen(next_chars);
    int len = 2;
    while (r >= count) {
        r -= count;
        count *= (long)strlen(next_chars);
        len++;
    }
    for (int i = len - 1; i > 0; i--) {
        buf[i] = next_chars[r % (long)strlen(next_chars)];
        r /= (long)strlen(next_chars);
    }
    buf[0] = first_chars[r];
    return (size_t)len;
}

static int write_ranks(const char *dir, int num_base) {
    char path[4096];
    snprintf(path, sizeof path, "%s/tiktoken.model", dir);
    FILE *f = fopen(path, "w");
    if (!f) return k3_seterr("%s: cannot create: %s", path, strerror(errno));
    char tok[32], b64[64];
    for (int r = 0; r < num_base; r++) {
        size_t n = 1;
        if (r < 256)
            tok[0] = (char)r;
        else
            n = filler_token(r - 256, tok);
        base64((const unsigned char *)tok, n, b64);
        fprintf(f, "%s %d\n", b64, r);
    }
    if (fclose(f)) return k3_seterr("%s: write error", path);
    return 0;
}

static json_t *added_tokens(int block) {
    json_t *d = json_object();
    for (size_t i = 0; i < k3_num_named_tokens; i++) {
        char id[16];
        snprintf(id, sizeof id, "%d", block + k3_named_tokens[i].offset);
        json_object_set_new(d, id,
                            json_pack("{sssbsbsbsbsb}", "content", k3_named_tokens[i].text,
                                      "lstrip", 0, "normalized", 0, "rstrip", 0, "single_word", 0,
                                      "special", k3_named_tokens[i].special_flag));
    }
    return d;
}

int k3_synth_tokenizer(const char *dir, int vocab_size) {
    if (vocab_size < 257)
        return k3_seterr("tokenizer for %s: vocab_size %d < 257", dir, vocab_size);
    int block = k3_synth_block_start(vocab_size);
    if (write_ranks(dir, block)) return -1;
    json_t *cfg = json_pack(
        "{sssssssssssosos[s]sI}", "tokenizer_class", "TikTokenTokenizer", "bos_token", "[BOS]",
        "eos_token", "[EOS]", "pad_token", "[PAD]", "unk_token", "[UNK]", "added_tokens_decoder",
        added_tokens(block), "auto_map",
        json_pack("{s[sn]}", "AutoTokenizer", "tokenization_kimi.TikTokenTokenizer"),
        "additional_special_tokens", "<|end_of_msg|>", "model_max_length", (json_int_t)1048576);
    char path[4096];
    snprintf(path, sizeof path, "%s/tokenizer_config.json", dir);
    int rc = cfg && !json_dump_file(cfg, path, JSON_INDENT(2) | JSON_PRESERVE_ORDER)
                 ? 0
                 : k3_seterr("%s: cannot write", path);
    json_decref(cfg);
    return rc;
}
