/* chat_render.c — the segment writer and XTML tag primitives of chat.md
 * §2.1, shared by the message renderer (chat.c) and the tool-call renderer
 * (chat_args.c): text and control segments, open_tag / close_tag with
 * escaped attributes, and the end of a message. */
#include "text/chat_render.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/mem.h"

static void seg_push(k3_chat_segs *s, const char *text, size_t n, int control) {
    if (n == 0) return; /* the reference drops empty segments */
    if (s->n == s->cap) {
        s->cap = s->cap ? 2 * s->cap : 64;
        s->v = k3_xrealloc(s->v, s->cap * sizeof *s->v);
    }
    char *t = k3_xmalloc(n + 1);
    memcpy(t, text, n);
    t[n] = 0;
    s->v[s->n++] = (k3_chat_seg){t, n, control};
}

void k3_r_text(k3_render *r, const char *s, size_t n) {
    seg_push(r->out, s, n, 0);
}
void k3_r_ctrl(k3_render *r, k3_xtml_ctrl c) {
    seg_push(r->out, r->x->ctrl[c], r->x->ctrl_len[c], 1);
}
void k3_r_ctrl_text(k3_render *r, const char *s, size_t n) {
    seg_push(r->out, s, n, 1);
}
static void r_texts(k3_render *r, const char *s) {
    k3_r_text(r, s, strlen(s));
}

/* esc(v): "&" -> "&amp;" first, then '"' -> "&quot;"; nothing else. */
static void attr_value(k3_render *r, const char *v, size_t n) {
    k3_buf b = {0};
    for (size_t i = 0; i < n; i++) {
        if (v[i] == '&')
            k3_buf_puts(&b, "&amp;");
        else if (v[i] == '"')
            k3_buf_puts(&b, "&quot;");
        else
            k3_buf_putc(&b, v[i]);
    }
    k3_r_text(r, b.s, b.n);
    k3_buf_free(&b);
}

void k3_r_open(k3_render *r, k3_xtml_tag tag, const k3_attr *attrs, size_t nattrs) {
    k3_r_ctrl(r, K3_XC_OPEN);
    r_texts(r, k3_xtml_tag_name(tag));
    for (size_t i = 0; i < nattrs; i++) { /* four text segments per attribute */
        char key[80];
        snprintf(key, sizeof key, " %s", attrs[i].key);
        r_texts(r, key);
        r_texts(r, "=\"");
        attr_value(r, attrs[i].val, attrs[i].len);
        r_texts(r, "\"");
    }
    k3_r_ctrl(r, K3_XC_SEP);
}

void k3_r_close(k3_render *r, k3_xtml_tag tag) {
    k3_r_ctrl(r, K3_XC_CLOSE);
    r_texts(r, k3_xtml_tag_name(tag));
    k3_r_ctrl(r, K3_XC_SEP);
}

void k3_r_end_message(k3_render *r) {
    k3_r_close(r, K3_XT_MESSAGE);
    k3_r_ctrl(r, K3_XC_EOM);
}
