/* xtml.h — the XTML vocabulary in one place: the four control tokens the chat
 * format is built from, the tag names, and the structural markers derived
 * from them (chat.md §2.1, §3.2).
 *
 * Nothing else in k3 spells "<|open|>" or "response<|sep|>": the renderer
 * (chat.h), the output channel parser (channels.h) and the tool-call parser
 * (toolcall.h) all take a k3_xtml, which is filled from the tokenizer's
 * control-token table (k3_xtml_init) so that the spellings are whatever the
 * model's tokenizer_config.json names the ids at the K3 control offsets. */
#ifndef K3_TEXT_XTML_H
#define K3_TEXT_XTML_H

#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "text/tokenizer.h"

/* The control tokens of XTML. */
typedef enum {
    K3_XC_EOM,   /* <|end_of_msg|>: ends every message, generation stop token */
    K3_XC_OPEN,  /* <|open|>: starts an opening tag */
    K3_XC_CLOSE, /* <|close|>: starts a closing tag */
    K3_XC_SEP,   /* <|sep|>: ends a tag header */
    K3_XC_COUNT
} k3_xtml_ctrl;

/* The tag names (ordinary text in the vocabulary). */
typedef enum {
    K3_XT_MESSAGE,
    K3_XT_THINK,
    K3_XT_RESPONSE,
    K3_XT_TOOLS,
    K3_XT_CALL,
    K3_XT_ARGUMENT,
    K3_XT_JSON,
    K3_XT_COUNT
} k3_xtml_tag;

/* The structural markers the output parser looks for (chat.md §3.2). */
typedef enum {
    K3_XM_THINK_OPEN,
    K3_XM_THINK_CLOSE,
    K3_XM_RESP_OPEN,
    K3_XM_RESP_CLOSE,
    K3_XM_TOOLS_OPEN,
    K3_XM_TOOLS_CLOSE,
    K3_XM_MSG_CLOSE,
    K3_XM_COUNT
} k3_xtml_marker;

#define K3_XTML_SPELL_MAX 64
#define K3_XTML_MARKER_MAX (2 * K3_XTML_SPELL_MAX + 16)

typedef struct {
    char ctrl[K3_XC_COUNT][K3_XTML_SPELL_MAX]; /* NUL-terminated spellings */
    size_t ctrl_len[K3_XC_COUNT];
    int32_t ctrl_id[K3_XC_COUNT]; /* token ids (-1 when built without a tokenizer) */
    char marker[K3_XM_COUNT][K3_XTML_MARKER_MAX];
    size_t marker_len[K3_XM_COUNT];
} k3_xtml;

/* Fill *x from the tokenizer's control block: the id at each K3 offset
 * (<|end_of_msg|> block+2, <|open|> +3, <|close|> +4, <|sep|> +5) and the
 * spelling the tokenizer gives it; if that id is unnamed (reserved) the K3
 * spelling is looked up instead. tok == NULL: the K3 spellings, ids -1.
 * Returns 0, or -1 + k3_errmsg when the tokenizer lacks a control token. */
int k3_xtml_init(k3_xtml *x, const k3_tokenizer *tok);

/* "<|open|>" + tag (the start of an opening tag, attributes follow) and
 * "<|close|>" + tag + "<|sep|>" (a closing tag), NUL-terminated into buf
 * (K3_XTML_MARKER_MAX bytes). Return the length. */
size_t k3_xtml_open_prefix(const k3_xtml *x, k3_xtml_tag tag, char *buf);
size_t k3_xtml_close_tag(const k3_xtml *x, k3_xtml_tag tag, char *buf);

/* The name of a tag ("message", "think", ...). */
const char *k3_xtml_tag_name(k3_xtml_tag t);

/* ---- token form: what the output parsers work on -------------------------
 *
 * Generated output is parsed by token ids, never by spelling: a model that
 * writes the ordinary-text spelling "<|open|>tools<|sep|>" (i.e. the BPE
 * tokens of those characters) has written text, not structure. Internally
 * the channel and tool-call parsers see the stream in "token form": each of
 * the four control tokens is the single byte K3_XTML_CTRL_BYTE(c)
 * (0xF8..0xFB, bytes that never occur in UTF-8) and everything else is the
 * text of ordinary tokens, with any byte >= 0xF8 replaced by U+FFFD before
 * it gets there. So the only way to produce a control byte is a control
 * token id. k3_xtml_token_form() gives the k3_xtml whose spellings are those
 * bytes; k3_xtml_spell() turns token form back into spelled text for the
 * places where a control token that forms no structure is shown as text. */
#define K3_XTML_CTRL_BYTE(c) ((unsigned char)(0xF8u + (unsigned)(c)))

/* *t = x with every control spelling replaced by its one token-form byte and
 * the markers rebuilt from them (ids kept). Spellings x lacks stay empty, so
 * an empty k3_xtml gives an empty token form (matches nothing). */
void k3_xtml_token_form(const k3_xtml *x, k3_xtml *t);
/* The control token a token-form byte stands for, or -1 for a text byte. */
int k3_xtml_ctrl_of_byte(unsigned char b);
/* The control token (OPEN, CLOSE or SEP) that id is in x, or -1. EOM is not
 * included: it ends a message and is never part of a marker. */
int k3_xtml_struct_ctrl(const k3_xtml *x, int32_t id);
/* Append token-form s[0..n) to *out with each control byte written as its
 * spelling in x (bytes of a control x has no spelling for are dropped). */
void k3_xtml_spell(const k3_xtml *x, const char *s, size_t n, k3_buf *out);
/* Append text s[0..n) of ordinary tokens to *out in token form: bytes
 * >= 0xF8 (never in UTF-8) become U+FFFD, so text can never yield a
 * control byte. */
void k3_xtml_put_text(k3_buf *out, const char *s, size_t n);

/* Literal text a renderer puts where an image goes when no image prompts are
 * given (chat.md §2.3.2); it is not a vocabulary token. */
const char *k3_xtml_image_placeholder(void);

#endif
