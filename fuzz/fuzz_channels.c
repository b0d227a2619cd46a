/* fuzz_channels.c — libFuzzer target for the streaming channel parser.
 * Input: one byte choosing the initial state, tools on/off and the
 * chunking, then the generated stream in token form (text/xtml.h: bytes
 * 0xF8..0xFB are the control tokens, pushed with k3_chan_push_ctrl; the
 * rest is text, pushed with k3_chan_push). Feeding it whole and feeding it
 * in chunks must give the same reasoning, content and tool calls. And the
 * same stream with every control token written as its spelling in ordinary
 * text must give no structure at all: content == that text. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "text/channels.h"
#include "text/pyjson.h"

typedef struct {
    k3_buf reasoning, content, calls;
} acc;

static void take(acc *a, const k3_chan_event *ev, size_t n) {
    for (size_t i = 0; i < n; i++) {
        if (ev[i].kind == K3_EV_REASONING) k3_buf_put(&a->reasoning, ev[i].text, ev[i].len);
        if (ev[i].kind == K3_EV_CONTENT) k3_buf_put(&a->content, ev[i].text, ev[i].len);
        if (ev[i].kind == K3_EV_TOOL_CALL) {
            k3_buf_puts(&a->calls, ev[i].name);
            k3_buf_puts(&a->calls, ev[i].arguments);
        }
        if (ev[i].kind == K3_EV_TOOLS_END) k3_buf_putc(&a->calls, '|');
    }
}

/* Token-form s[0..n): text runs via k3_chan_push, control bytes via push_ctrl. */
static void push_tf(k3_chan *ch, const char *s, size_t n, acc *a) {
    size_t start = 0, ne;
    for (size_t i = 0; i <= n; i++) {
        int c = i < n ? k3_xtml_ctrl_of_byte((unsigned char)s[i]) : -1;
        if (i < n && c < 0) continue;
        if (i > start) take(a, k3_chan_push(ch, s + start, i - start, &ne), ne);
        if (i < n) take(a, k3_chan_push_ctrl(ch, (k3_xtml_ctrl)c, &ne), ne);
        start = i + 1;
    }
}

/* chunk: 0 = whole, else pseudo-random chunk lengths 1..chunk from seed. */
static void run(const k3_xtml *x, k3_chan_state st, int tools, const char *s, size_t n,
                unsigned seed, unsigned chunk, acc *a) {
    k3_chan *ch = k3_chan_new(x, st, tools);
    size_t ne, pos = 0;
    while (pos < n) {
        seed = seed * 1103515245u + 12345u;
        size_t len = chunk ? 1 + (seed >> 16) % chunk : n;
        if (len > n - pos) len = n - pos;
        push_tf(ch, s + pos, len, a);
        pos += len;
    }
    const k3_chan_event *ev = k3_chan_finish(ch, &ne);
    take(a, ev, ne);
    k3_chan_free(ch);
}

static int same(const k3_buf *a, const k3_buf *b) {
    return a->n == b->n && (a->n == 0 || !memcmp(a->s, b->s, a->n));
}

static void acc_free(acc *a) {
    k3_buf_free(&a->reasoning);
    k3_buf_free(&a->content);
    k3_buf_free(&a->calls);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static k3_xtml x;
    static int ready;
    if (!ready) ready = !k3_xtml_init(&x, NULL);
    if (size < 1) return 0;
    k3_chan_state st = data[0] & 1 ? K3_CHAN_REASONING : K3_CHAN_CONTENT;
    int tools = !(data[0] & 2);
    unsigned chunk = 1 + (data[0] >> 2) % 24;
    const char *in = (const char *)data + 1;
    size_t n = size - 1;
    acc whole = {0}, split = {0}, text = {0};
    run(&x, st, tools, in, n, data[0], 0, &whole);
    run(&x, st, tools, in, n, data[0], chunk, &split);
    if (!same(&whole.reasoning, &split.reasoning) || !same(&whole.content, &split.content) ||
        !same(&whole.calls, &split.calls))
        abort();
    /* the spelled stream as ordinary text: no structure, returned exactly */
    k3_buf spelled = {0}, want = {0};
    k3_xtml_spell(&x, in, n, &spelled);
    k3_xtml_put_text(&want, spelled.s ? spelled.s : "", spelled.n);
    k3_chan *ch = k3_chan_new(&x, K3_CHAN_CONTENT, 1);
    size_t ne;
    take(&text, k3_chan_push(ch, spelled.s ? spelled.s : "", spelled.n, &ne), ne);
    take(&text, k3_chan_finish(ch, &ne), ne);
    k3_chan_free(ch);
    if (text.reasoning.n || text.calls.n || !same(&text.content, &want)) abort();
    k3_buf_free(&spelled);
    k3_buf_free(&want);
    acc_free(&text);
    acc_free(&whole);
    acc_free(&split);
    return 0;
}
