/* output.c — generated ids → detokenizer → stop strings → channels →
 * OpenAI chunks (output.h). */
#include "serve/output.h"

#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "base/mem.h"
#include "serve/engine.h"
#include "text/channels.h"
#include "text/tokenizer.h"

/* Where the generation starts: inside think if the prompt opened it
 * (decided on the prompt text, as the channel parser defines it). */
static k3_chan_state initial_state(const serve_engine *e, const int32_t *prompt, int64_t n) {
    size_t len = 0;
    char *text = k3_tok_decode_bytes(e->tok, prompt, (size_t)n, 0, &len);
    k3_chan_state st = k3_chan_initial_state(&e->xtml, text ? text : "", text ? len : 0);
    free(text);
    return st;
}

int serve_output_init(serve_output *o, const serve_engine *e, const serve_req *q,
                      const int32_t *prompt, int64_t n_prompt, unsigned long long seq_no) {
    memset(o, 0, sizeof *o);
    o->engine = e;
    o->stream = q->stream;
    o->include_usage = q->include_usage;
    o->stop = q->stop;
    o->n_stop = q->n_stop;
    for (int i = 0; i < q->n_stop; i++) {
        size_t l = strlen(q->stop[i]);
        if (l - 1 > o->stop_hold) o->stop_hold = l - 1;
    }
    serve_resp_init(&o->resp, q->kind, e->name, seq_no);
    o->resp.streaming = q->stream;
    /* Drop control tokens whose `special` flag is set (<|end_of_msg|>,
     * reserved ids, media...): they are never text. <|open|>, <|close|> and
     * <|sep|> are kept so the channel parser sees the XTML markers. */
    o->detok = k3_detok_new(e->tok, 1);
    if (!o->detok) return -1;
    if (q->kind == SERVE_CHAT) {
        o->channels = k3_chan_new(&e->xtml, initial_state(e, prompt, n_prompt));
        if (!o->channels) return -1;
    }
    return 0;
}

void serve_output_free(serve_output *o) {
    if (o->detok) k3_detok_free(o->detok);
    if (o->channels) k3_chan_free(o->channels);
    k3_buf_free(&o->pending);
    if (o->resp.tool_calls) serve_resp_free(&o->resp);
    memset(o, 0, sizeof *o);
}

/* Serialize a piece of output; the chunk is sent only when streaming (the
 * response object accumulates it either way). */
static void put_chunk(serve_output *o, char *chunk, k3_buf *out) {
    if (o->stream)
        k3_buf_puts_free(out, chunk);
    else
        free(chunk);
}

static void on_events(serve_output *o, const k3_chan_event *ev, size_t n, k3_buf *out) {
    for (size_t i = 0; i < n; i++) {
        const k3_chan_event *e = &ev[i];
        if (e->kind == K3_EV_REASONING && e->len)
            put_chunk(o, serve_resp_text(&o->resp, "reasoning", e->text, e->len), out);
        else if (e->kind == K3_EV_CONTENT && e->len)
            put_chunk(o, serve_resp_text(&o->resp, "content", e->text, e->len), out);
        else if (e->kind == K3_EV_TOOL_CALL) {
            put_chunk(o, serve_resp_tool_call(&o->resp, e->name, e->arguments), out);
            o->n_tool_calls++;
        }
    }
}

/* Text past the stop filter: completions send it as is, chat parses it. */
static void feed(serve_output *o, const char *text, size_t len, k3_buf *out) {
    if (!len) return;
    if (!o->channels) {
        put_chunk(o, serve_resp_text(&o->resp, "content", text, len), out);
        return;
    }
    size_t n = 0;
    const k3_chan_event *ev = k3_chan_push(o->channels, text, len, &n);
    on_events(o, ev, n, out);
}

/* Length of the longest prefix of s[0..n) that ends on a UTF-8 boundary. */
static size_t utf8_floor(const char *s, size_t n) {
    while (n > 0 && ((unsigned char)s[n] & 0xC0) == 0x80) n--;
    return n;
}

/* Append text to the pending buffer; release what can no longer be part
 * of a stop string. Returns 1 when a stop string matched. */
static int stop_filter(serve_output *o, const char *text, size_t len, k3_buf *out) {
    if (!o->n_stop) {
        feed(o, text, len, out);
        return 0;
    }
    k3_buf_put(&o->pending, text, len);
    const char *p = o->pending.s;
    size_t n = o->pending.n, first = n;
    for (int i = 0; i < o->n_stop; i++) {
        const char *m = memmem(p, n, o->stop[i], strlen(o->stop[i]));
        if (m && (size_t)(m - p) < first) first = (size_t)(m - p);
    }
    if (first < n) {
        feed(o, p, first, out);
        o->pending.n = 0;
        o->stopped = 1;
        return 1;
    }
    size_t keep = o->stop_hold < n ? o->stop_hold : n;
    size_t emit = keep < n ? utf8_floor(p, n - keep) : 0;
    feed(o, p, emit, out);
    memmove(o->pending.s, p + emit, n - emit);
    o->pending.n = n - emit;
    return 0;
}

void serve_output_begin(serve_output *o, k3_buf *out) {
    if (o->stream && o->resp.kind == SERVE_CHAT)
        k3_buf_puts_free(out, serve_resp_role_chunk(&o->resp));
}

int serve_output_token(serve_output *o, int32_t id, k3_buf *out) {
    if (o->stopped) return 1;
    size_t len = 0;
    const char *t = k3_detok_push(o->detok, id, &len);
    return len ? stop_filter(o, t, len, out) : 0;
}

const char *serve_output_end(serve_output *o, const char *finish_reason, const serve_usage *u,
                             k3_buf *out) {
    if (!o->stopped) {
        size_t len = 0;
        const char *t = k3_detok_flush(o->detok, &len);
        if (len) stop_filter(o, t, len, out);
        if (!o->stopped) feed(o, o->pending.s, o->pending.n, out);
        o->pending.n = 0;
    }
    if (o->channels) {
        size_t n = 0;
        const k3_chan_event *ev = k3_chan_finish(o->channels, &n);
        on_events(o, ev, n, out);
    }
    const char *fin = finish_reason;
    if (!strcmp(fin, "stop") && o->n_tool_calls) fin = "tool_calls";
    if (o->stream) {
        k3_buf_puts_free(out, serve_resp_finish_chunk(&o->resp, fin));
        if (o->include_usage) k3_buf_puts_free(out, serve_resp_usage_chunk(&o->resp, u));
        static const char done[] = "data: [DONE]\n\n";
        k3_buf_put(out, done, sizeof done - 1);
    } else {
        k3_buf_puts_free(out, serve_resp_full(&o->resp, fin, u));
    }
    return fin;
}
