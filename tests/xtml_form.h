/* xtml_form.h — test helper for the output parsers (text/channels.h,
 * text/toolcall.h), which take structure from control-token ids only.
 *
 * Tests write model output with the K3 spellings for readability; tf_len()
 * turns such a string into token form (text/xtml.h), i.e. what the parsers
 * see when the model generated real <|open|>/<|close|>/<|sep|> ids there.
 * tf_push() feeds token-form bytes to a k3_chan the way a generation does:
 * text runs with k3_chan_push, each control byte with k3_chan_push_ctrl.
 * Feeding the ORIGINAL spelled string with k3_chan_push instead is what a
 * model writing the spellings as ordinary text looks like. */
#ifndef K3_TESTS_XTML_FORM_H
#define K3_TESTS_XTML_FORM_H

#include <stdlib.h>
#include <string.h>

#include "text/channels.h"

/* Token form of a K3-spelled string (malloc'd, NUL-terminated); *len its length. */
static inline char *tf_len(const char *spelled, size_t *len) {
    static const char *const sp[4] = {"<|end_of_msg|>", "<|open|>", "<|close|>", "<|sep|>"};
    size_t n = strlen(spelled), w = 0;
    char *out = malloc(n + 1);
    for (size_t i = 0; i < n;) {
        int hit = -1;
        for (int c = 0; c < 4 && hit < 0; c++)
            if (!strncmp(spelled + i, sp[c], strlen(sp[c]))) hit = c;
        if (hit >= 0) {
            out[w++] = (char)K3_XTML_CTRL_BYTE(hit);
            i += strlen(sp[hit]);
        } else {
            out[w++] = spelled[i++];
        }
    }
    out[w] = 0;
    if (len) *len = w;
    return out;
}

typedef void (*tf_sink)(void *ctx, const k3_chan_event *ev, size_t n);

/* Feed token-form s[0..n) to ch; every batch of events goes to sink. */
static inline void tf_push(k3_chan *ch, const char *s, size_t n, tf_sink sink, void *ctx) {
    size_t start = 0, ne;
    for (size_t i = 0; i <= n; i++) {
        int c = i < n ? k3_xtml_ctrl_of_byte((unsigned char)s[i]) : -1;
        if (i < n && c < 0) continue;
        if (i > start) {
            const k3_chan_event *ev = k3_chan_push(ch, s + start, i - start, &ne);
            sink(ctx, ev, ne);
        }
        if (i < n) {
            const k3_chan_event *ev = k3_chan_push_ctrl(ch, (k3_xtml_ctrl)c, &ne);
            sink(ctx, ev, ne);
        }
        start = i + 1;
    }
}

#endif
