/* output.c — generated ids → detokenizer + channels (by id) → stop strings
 * → OpenAI chunks (output.h). */
#include "serve/output.h"

#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "base/mem.h"
#include "gen/stop.h"
#include "serve/engine.h"
#include "text/channels.h"
#include "text/tokenizer.h"
#include "text/toolcall.h"

/* Tool calls are structure only when the request declared tools and did
 * not say tool_choice "none" (channels.h: otherwise a tools section the
 * model writes is returned as content text). */
static int tools_allowed(const serve_req *q) {
    if (!q->tools) return 0;
    const char *tc = json_string_value(q->tool_choice);
    return !(tc && !strcmp(tc, "none"));
}

int serve_output_init(serve_output *o, const serve_engine *e, const serve_req *q,
                      const int32_t *prompt, int64_t n_prompt, unsigned long long seq_no) {
    memset(o, 0, sizeof *o);
    o->engine = e;
    o->stream = q->stream;
    o->include_usage = q->include_usage;
    if (q->n_stop) o->stopper = k3_stopper_new(q->stop, q->n_stop);
    serve_resp_init(&o->resp, q->kind, e->name, seq_no);
    o->resp.streaming = q->stream;
    /* Drop control tokens whose `special` flag is set (<|end_of_msg|>,
     * reserved ids, media...): they are never text. <|open|>, <|close|> and
     * <|sep|> are taken by id by the channel parser (chat); completions get
     * their spellings as text. */
    o->detok = k3_detok_new(e->tok, 1);
    if (!o->detok) return -1;
    if (q->kind == SERVE_CHAT) {
        /* Where the generation starts: inside think if the prompt opened it
         * (control tokens by id: a user's text spelling changes nothing). */
        k3_chan_state st = k3_chan_initial_state(&e->xtml, e->tok, prompt, (size_t)n_prompt);
        o->channels = k3_chan_new(&e->xtml, st, tools_allowed(q));
        if (!o->channels) return -1;
    }
    return 0;
}

void serve_output_free(serve_output *o) {
    if (o->detok) k3_detok_free(o->detok);
    if (o->channels) k3_chan_free(o->channels);
    k3_stopper_free(o->stopper);
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

static void put_text(serve_output *o, int reasoning, const char *s, size_t n, k3_buf *out) {
    if (n) put_chunk(o, serve_resp_text(&o->resp, reasoning ? "reasoning" : "content", s, n), out);
}

/* Release what the stop matcher holds (it belongs to channel held_reasoning). */
static void release_held(serve_output *o, k3_buf *out) {
    if (!o->stopper) return;
    size_t n;
    const char *s = k3_stopper_flush(o->stopper, &n);
    put_text(o, o->held_reasoning, s, n, out);
}

/* Reasoning or content text through the stop strings. Stop strings match
 * within one channel's text (never marker tokens, never across a channel
 * change or a tool call). Returns 1 when one matched. */
static int text_out(serve_output *o, int reasoning, const char *s, size_t n, k3_buf *out) {
    if (!o->stopper) {
        put_text(o, reasoning, s, n, out);
        return 0;
    }
    if (reasoning != o->held_reasoning) {
        release_held(o, out);
        o->held_reasoning = reasoning;
    }
    size_t len;
    int hit;
    const char *t = k3_stopper_push(o->stopper, s, n, &len, &hit);
    put_text(o, reasoning, t, len, out);
    if (hit) o->stopped = 1;
    return hit;
}

/* A tools section left open by max_tokens. A call that only lacks its
 * closing tag is whole: reported as a call. One cut earlier is reported as
 * the last tool call, with `arguments` the JSON of the arguments that closed
 * without its final '}' (unparseable, as OpenAI's cut arguments are), and the
 * finish reason stays "length": never dropped, never run as if whole. */
static void on_cut_section(serve_output *o, const k3_chan_event *e, k3_buf *out) {
    k3_tool_call c;
    int rc = k3_toolcall_cut(&o->engine->xtml, e->text, e->len, &c);
    if (!rc) return;
    char *args = k3_toolcall_arguments_json(&c);
    if (rc == K3_CALL_CUT) {
        args[strlen(args) - 1] = 0; /* drop the closing brace */
        o->cut_call = 1;
    }
    release_held(o, out);
    put_chunk(o, serve_resp_tool_call(&o->resp, c.name, args), out);
    o->n_tool_calls++;
    free(args);
    k3_tool_call_free(&c);
}

static void on_events(serve_output *o, const k3_chan_event *ev, size_t n, k3_buf *out) {
    for (size_t i = 0; i < n && !o->stopped; i++) {
        const k3_chan_event *e = &ev[i];
        if (e->kind == K3_EV_REASONING || e->kind == K3_EV_CONTENT) {
            text_out(o, e->kind == K3_EV_REASONING, e->text, e->len, out);
        } else if (e->kind == K3_EV_TOOL_CALL) {
            release_held(o, out);
            put_chunk(o, serve_resp_tool_call(&o->resp, e->name, e->arguments), out);
            o->n_tool_calls++;
        } else if (e->kind == K3_EV_TOOLS_END && o->cut_by_limit) {
            on_cut_section(o, e, out);
        }
    }
}

void serve_output_begin(serve_output *o, k3_buf *out) {
    if (o->stream && o->resp.kind == SERVE_CHAT)
        k3_buf_puts_free(out, serve_resp_role_chunk(&o->resp));
}

int serve_output_token(serve_output *o, int32_t id, k3_buf *out) {
    if (o->stopped) return 1;
    size_t n = 0;
    if (o->channels) {
        const k3_chan_event *ev = k3_chan_push_token(o->channels, o->detok, id, &n);
        on_events(o, ev, n, out);
    } else {
        const char *t = k3_detok_push(o->detok, id, &n);
        text_out(o, 0, t, n, out);
    }
    return o->stopped;
}

const char *serve_output_end(serve_output *o, const char *finish_reason, const serve_usage *u,
                             k3_buf *out) {
    if (!o->stopped) {
        size_t len = 0;
        const char *t = k3_detok_flush(o->detok, &len);
        if (o->channels) {
            size_t n = 0;
            const k3_chan_event *ev = k3_chan_push(o->channels, t, len, &n);
            on_events(o, ev, n, out);
            if (!o->stopped) {
                o->cut_by_limit = !strcmp(finish_reason, "length");
                ev = k3_chan_finish(o->channels, &n);
                on_events(o, ev, n, out);
            }
        } else {
            text_out(o, 0, t, len, out);
        }
        if (!o->stopped) release_held(o, out);
    }
    const char *fin = finish_reason;
    /* whole calls are to be run, also when the limit cut what followed them */
    if ((!strcmp(fin, "stop") || !strcmp(fin, "length")) && o->n_tool_calls && !o->cut_call)
        fin = "tool_calls";
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
