/* xtml.c — the one table of XTML control tokens and tag names (see xtml.h). */
#include "text/xtml.h"

#include <stdio.h>
#include <string.h>

#include "base/err.h"

/* K3 control tokens: offset inside the tokenizer's control block and the K3
 * spelling (tokenizer_config.json of moonshotai/Kimi-K3, chat.md §1.3). */
static const struct {
    int block_offset;
    const char *k3_spelling;
} ctrl_table[K3_XC_COUNT] = {
    [K3_XC_EOM] = {2, "<|end_of_msg|>"},
    [K3_XC_OPEN] = {3, "<|open|>"},
    [K3_XC_CLOSE] = {4, "<|close|>"},
    [K3_XC_SEP] = {5, "<|sep|>"},
};

static const char *const tag_table[K3_XT_COUNT] = {
    [K3_XT_MESSAGE] = "message", [K3_XT_THINK] = "think", [K3_XT_RESPONSE] = "response",
    [K3_XT_TOOLS] = "tools",     [K3_XT_CALL] = "call",   [K3_XT_ARGUMENT] = "argument",
    [K3_XT_JSON] = "json",
};

/* Each structural marker = <|open|> or <|close|>, a tag name, <|sep|>. */
static const struct {
    k3_xtml_ctrl opener;
    k3_xtml_tag tag;
} marker_table[K3_XM_COUNT] = {
    [K3_XM_THINK_OPEN] = {K3_XC_OPEN, K3_XT_THINK},
    [K3_XM_THINK_CLOSE] = {K3_XC_CLOSE, K3_XT_THINK},
    [K3_XM_RESP_OPEN] = {K3_XC_OPEN, K3_XT_RESPONSE},
    [K3_XM_RESP_CLOSE] = {K3_XC_CLOSE, K3_XT_RESPONSE},
    [K3_XM_TOOLS_OPEN] = {K3_XC_OPEN, K3_XT_TOOLS},
    [K3_XM_TOOLS_CLOSE] = {K3_XC_CLOSE, K3_XT_TOOLS},
    [K3_XM_MSG_CLOSE] = {K3_XC_CLOSE, K3_XT_MESSAGE},
};

const char *k3_xtml_tag_name(k3_xtml_tag t) {
    return (unsigned)t < K3_XT_COUNT ? tag_table[t] : "";
}

const char *k3_xtml_image_placeholder(void) {
    return "<|kimi_image_placeholder|>";
}

static int set_ctrl(k3_xtml *x, k3_xtml_ctrl c, const char *s, size_t len, int32_t id) {
    if (len == 0 || len >= K3_XTML_SPELL_MAX)
        return k3_seterr("control token %d has an unusable spelling (%zu bytes)", (int)id, len);
    memcpy(x->ctrl[c], s, len);
    x->ctrl[c][len] = 0;
    x->ctrl_len[c] = len;
    x->ctrl_id[c] = id;
    return 0;
}

/* The tokenizer's spelling of control token c: the id at the K3 offset if
 * it is named, else the id of the K3 spelling. */
static int ctrl_from_tokenizer(k3_xtml *x, const k3_tokenizer *tok, k3_xtml_ctrl c) {
    int32_t id = k3_tok_block_start(tok) + ctrl_table[c].block_offset;
    size_t len = 0;
    const char *s = k3_tok_is_special(tok, id) ? k3_tok_token_bytes(tok, id, &len) : NULL;
    static const char reserved[] = "<|reserved_token_";
    if (s && len > 0 && !(len >= sizeof reserved - 1 && !memcmp(s, reserved, sizeof reserved - 1)))
        return set_ctrl(x, c, s, len, id);
    id = k3_tok_special_id(tok, ctrl_table[c].k3_spelling);
    if (id < 0)
        return k3_seterr("tokenizer has no control token %s (needed by the chat format)",
                         ctrl_table[c].k3_spelling);
    return set_ctrl(x, c, ctrl_table[c].k3_spelling, strlen(ctrl_table[c].k3_spelling), id);
}

size_t k3_xtml_open_prefix(const k3_xtml *x, k3_xtml_tag tag, char *buf) {
    return (size_t)snprintf(buf, K3_XTML_MARKER_MAX, "%s%s", x->ctrl[K3_XC_OPEN],
                            k3_xtml_tag_name(tag));
}

size_t k3_xtml_close_tag(const k3_xtml *x, k3_xtml_tag tag, char *buf) {
    return (size_t)snprintf(buf, K3_XTML_MARKER_MAX, "%s%s%s", x->ctrl[K3_XC_CLOSE],
                            k3_xtml_tag_name(tag), x->ctrl[K3_XC_SEP]);
}

static void build_markers(k3_xtml *x) {
    for (int m = 0; m < K3_XM_COUNT; m++) {
        /* Built in a local buffer: x->ctrl and x->marker live in the same struct, and
         * gcc's -Wrestrict (under -fsanitize) cannot tell they never overlap. */
        char buf[sizeof x->marker[m]];
        int n = snprintf(buf, sizeof buf, "%s%s%s", x->ctrl[marker_table[m].opener],
                         tag_table[marker_table[m].tag], x->ctrl[K3_XC_SEP]);
        memcpy(x->marker[m], buf, sizeof buf);
        x->marker_len[m] = (size_t)n;
    }
}

int k3_xtml_init(k3_xtml *x, const k3_tokenizer *tok) {
    memset(x, 0, sizeof *x);
    for (int c = 0; c < K3_XC_COUNT; c++) {
        int rc = tok ? ctrl_from_tokenizer(x, tok, (k3_xtml_ctrl)c)
                     : set_ctrl(x, (k3_xtml_ctrl)c, ctrl_table[c].k3_spelling,
                                strlen(ctrl_table[c].k3_spelling), -1);
        if (rc) return -1;
    }
    build_markers(x);
    return 0;
}

void k3_xtml_token_form(const k3_xtml *x, k3_xtml *t) {
    memset(t, 0, sizeof *t);
    for (int c = 0; c < K3_XC_COUNT; c++) {
        t->ctrl_id[c] = x->ctrl_id[c];
        if (!x->ctrl_len[c]) continue;
        t->ctrl[c][0] = (char)K3_XTML_CTRL_BYTE(c);
        t->ctrl_len[c] = 1;
    }
    build_markers(t);
    for (int m = 0; m < K3_XM_COUNT; m++) /* a marker needs both of its control tokens */
        if (!x->marker_len[m] || !t->ctrl_len[marker_table[m].opener] || !t->ctrl_len[K3_XC_SEP])
            t->marker_len[m] = 0;
}

int k3_xtml_ctrl_of_byte(unsigned char b) {
    return b >= K3_XTML_CTRL_BYTE(0) && b < K3_XTML_CTRL_BYTE(K3_XC_COUNT)
               ? (int)(b - K3_XTML_CTRL_BYTE(0))
               : -1;
}

int k3_xtml_struct_ctrl(const k3_xtml *x, int32_t id) {
    if (id < 0) return -1;
    for (int c = K3_XC_OPEN; c <= K3_XC_SEP; c++)
        if (x->ctrl_len[c] && x->ctrl_id[c] == id) return c;
    return -1;
}

void k3_xtml_spell(const k3_xtml *x, const char *s, size_t n, k3_buf *out) {
    size_t start = 0;
    for (size_t i = 0; i < n; i++) {
        int c = k3_xtml_ctrl_of_byte((unsigned char)s[i]);
        if (c < 0) continue;
        k3_buf_put(out, s + start, i - start);
        k3_buf_put(out, x->ctrl[c], x->ctrl_len[c]);
        start = i + 1;
    }
    k3_buf_put(out, s + start, n - start);
}

void k3_xtml_put_text(k3_buf *out, const char *s, size_t n) {
    size_t start = 0;
    for (size_t i = 0; i < n; i++) {
        if ((unsigned char)s[i] < 0xF8) continue;
        k3_buf_put(out, s + start, i - start);
        k3_buf_put(out, "\xef\xbf\xbd", 3);
        start = i + 1;
    }
    k3_buf_put(out, s + start, n - start);
}
