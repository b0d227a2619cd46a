/* output.c — generated ids → detokenizer + channels (by id) → stop strings
 * → the core's events (output.h, events.h). */
#include "serve/output.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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
                      const int32_t *prompt, int64_t n_prompt, unsigned long long seq_no,
                      const serve_render *render) {
    memset(o, 0, sizeof *o);
    o->engine = e;
    o->render = render;
    o->created = (long long)time(NULL);
    snprintf(o->id, sizeof o->id, "%s-%llx%04llx", q->kind == SERVE_CHAT ? "chatcmpl" : "cmpl",
             (unsigned long long)o->created, seq_no);
    if (q->n_stop) o->stopper = k3_stopper_new(q->stop, q->n_stop);
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
    memset(o, 0, sizeof *o);
}

static void emit(serve_output *o, const serve_ev *ev, k3_buf *out) {
    serve_render_emit(o->render, ev, out);
}

static void put_text(serve_output *o, int reasoning, const char *s, size_t n, k3_buf *out) {
    if (!n) return;
    serve_ev ev = {.kind = SERVE_EV_TEXT,
                   .channel = reasoning ? SERVE_CH_REASONING : SERVE_CH_CONTENT,
                   .text = s,
                   .len = n};
    emit(o, &ev, out);
}

/* One whole tool call (arguments: a JSON text, or one cut short). */
static void put_call(serve_output *o, const char *name, const char *args, int cut, k3_buf *out) {
    char call_id[80];
    snprintf(call_id, sizeof call_id, "call_%s_%d", o->id, o->n_tool_calls);
    serve_ev ev = {
        .kind = SERVE_EV_TOOL_START, .index = o->n_tool_calls, .call_id = call_id, .name = name};
    emit(o, &ev, out);
    ev.kind = SERVE_EV_TOOL_ARGS;
    ev.text = args;
    ev.len = strlen(args);
    emit(o, &ev, out);
    ev.kind = SERVE_EV_TOOL_END;
    ev.cut = cut;
    emit(o, &ev, out);
    o->n_tool_calls++;
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
    put_call(o, c.name, args, rc == K3_CALL_CUT, out);
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
            put_call(o, e->name, e->arguments, 0, out);
        } else if (e->kind == K3_EV_TOOLS_END && o->cut_by_limit) {
            on_cut_section(o, e, out);
        }
    }
}

void serve_output_begin(serve_output *o, k3_buf *out) {
    serve_ev ev = {.kind = SERVE_EV_START, .id = o->id, .created = o->created};
    emit(o, &ev, out);
}

void serve_output_logprob(serve_output *o, json_t *entry, k3_buf *out) {
    serve_ev ev = {.kind = SERVE_EV_LOGPROB, .logprob = entry};
    emit(o, &ev, out);
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
    serve_ev ev = {.kind = SERVE_EV_FINISH, .finish = fin, .usage = u};
    emit(o, &ev, out);
    return fin;
}
