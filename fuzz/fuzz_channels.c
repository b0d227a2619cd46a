/* fuzz_channels.c — libFuzzer target for the streaming channel parser.
 * Input: one byte choosing the initial state and the chunking, then the
 * generated text. Feeding it whole and feeding it in chunks must give the
 * same reasoning, content and tool calls. */
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

/* chunk: 0 = whole, else pseudo-random chunk lengths 1..chunk from seed. */
static void run(const k3_xtml *x, k3_chan_state st, const char *s, size_t n, unsigned seed,
                unsigned chunk, acc *a) {
    k3_chan *ch = k3_chan_new(x, st);
    size_t ne, pos = 0;
    while (pos < n) {
        seed = seed * 1103515245u + 12345u;
        size_t len = chunk ? 1 + (seed >> 16) % chunk : n;
        if (len > n - pos) len = n - pos;
        const k3_chan_event *ev = k3_chan_push(ch, s + pos, len, &ne);
        take(a, ev, ne);
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
    unsigned chunk = 1 + (data[0] >> 1) % 24;
    acc whole = {0}, split = {0};
    run(&x, st, (const char *)data + 1, size - 1, data[0], 0, &whole);
    run(&x, st, (const char *)data + 1, size - 1, data[0], chunk, &split);
    if (!same(&whole.reasoning, &split.reasoning) || !same(&whole.content, &split.content) ||
        !same(&whole.calls, &split.calls))
        abort();
    acc_free(&whole);
    acc_free(&split);
    return 0;
}
