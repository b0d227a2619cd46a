/* channels.c — the streaming channel state machine (see channels.h). */
#include "text/channels.h"

#include <stdlib.h>
#include <string.h>

#include "base/mem.h"
#include "text/pyjson.h"
#include "text/toolcall.h"

/* The transitions of chat.md §3.2 (plus THINK_OPEN stripped in REASONING). */
typedef struct {
    k3_xtml_marker marker;
    k3_chan_state next;
} transition;

static const transition reasoning_edges[] = {{K3_XM_THINK_CLOSE, K3_CHAN_CONTENT},
                                             {K3_XM_RESP_OPEN, K3_CHAN_CONTENT},
                                             {K3_XM_TOOLS_OPEN, K3_CHAN_TOOL},
                                             {K3_XM_THINK_OPEN, K3_CHAN_REASONING}};
static const transition content_edges[] = {{K3_XM_THINK_OPEN, K3_CHAN_REASONING},
                                           {K3_XM_TOOLS_OPEN, K3_CHAN_TOOL},
                                           {K3_XM_RESP_OPEN, K3_CHAN_CONTENT},
                                           {K3_XM_RESP_CLOSE, K3_CHAN_CONTENT},
                                           {K3_XM_MSG_CLOSE, K3_CHAN_CONTENT}};
static const transition tool_edges[] = {{K3_XM_TOOLS_CLOSE, K3_CHAN_CONTENT}};

static const transition *edges_of(k3_chan_state s, size_t *n) {
    switch (s) {
    case K3_CHAN_REASONING:
        *n = sizeof reasoning_edges / sizeof *reasoning_edges;
        return reasoning_edges;
    case K3_CHAN_CONTENT:
        *n = sizeof content_edges / sizeof *content_edges;
        return content_edges;
    default:
        *n = 1;
        return tool_edges;
    }
}

/* An event while it is being built: strings are offsets into the arena
 * (which may move as it grows) until the batch is handed out. */
typedef struct {
    k3_chan_kind kind;
    size_t text, len, name, args;
    int index;
} event_rec;

struct k3_chan {
    k3_xtml x;
    k3_chan_state state;
    k3_buf pending; /* text not yet emitted: at most a proper prefix of a marker */
    k3_buf section; /* body of the current tools section */
    size_t section_pos;
    size_t close_checked; /* section bytes known to hold no complete </call> after section_pos */
    int section_calls, total_calls, saw_tools;
    k3_buf arena; /* event strings of the current batch, each NUL-terminated */
    event_rec *recs;
    size_t nrec, rec_cap;
    k3_chan_event *out;
    size_t out_cap;
};

k3_chan *k3_chan_new(const k3_xtml *x, k3_chan_state initial) {
    k3_chan *c = k3_xcalloc(1, sizeof *c);
    c->x = *x;
    c->state = initial;
    return c;
}

void k3_chan_free(k3_chan *c) {
    if (!c) return;
    k3_buf_free(&c->pending);
    k3_buf_free(&c->section);
    k3_buf_free(&c->arena);
    free(c->recs);
    free(c->out);
    free(c);
}

k3_chan_state k3_chan_state_now(const k3_chan *c) {
    return c->state;
}
int k3_chan_tool_calls(const k3_chan *c) {
    return c->total_calls;
}
int k3_chan_saw_tools(const k3_chan *c) {
    return c->saw_tools;
}

static const char *last_occurrence(const char *s, size_t n, const char *pat, size_t pl) {
    const char *last = NULL, *p = s;
    while ((p = memmem(p, (size_t)(s + n - p), pat, pl))) last = p++;
    return last;
}

k3_chan_state k3_chan_initial_state(const k3_xtml *x, const char *prompt, size_t len) {
    const char *open =
        last_occurrence(prompt, len, x->marker[K3_XM_THINK_OPEN], x->marker_len[K3_XM_THINK_OPEN]);
    const char *close = last_occurrence(prompt, len, x->marker[K3_XM_THINK_CLOSE],
                                        x->marker_len[K3_XM_THINK_CLOSE]);
    return open && (!close || open > close) ? K3_CHAN_REASONING : K3_CHAN_CONTENT;
}

/* ---- event batch ---------------------------------------------------------- */

static size_t arena_put(k3_chan *c, const char *s, size_t n) {
    size_t off = c->arena.n;
    k3_buf_put(&c->arena, s, n);
    k3_buf_putc(&c->arena, 0);
    return off;
}

static event_rec *new_rec(k3_chan *c, k3_chan_kind kind) {
    if (c->nrec == c->rec_cap) {
        c->rec_cap = c->rec_cap ? 2 * c->rec_cap : 16;
        c->recs = k3_xrealloc(c->recs, c->rec_cap * sizeof *c->recs);
    }
    event_rec *r = &c->recs[c->nrec++];
    memset(r, 0, sizeof *r);
    r->kind = kind;
    return r;
}

/* A text delta; merged into the previous one when it is of the same channel
 * and its string is the last thing in the arena. */
static void text_event(k3_chan *c, k3_chan_kind kind, const char *s, size_t n) {
    event_rec *last = c->nrec ? &c->recs[c->nrec - 1] : NULL;
    if (last && last->kind == kind && last->text + last->len + 1 == c->arena.n) {
        c->arena.n--; /* drop the NUL, append, terminate again */
        k3_buf_put(&c->arena, s, n);
        k3_buf_putc(&c->arena, 0);
        last->len += n;
        return;
    }
    event_rec *r = new_rec(c, kind);
    r->text = arena_put(c, s, n);
    r->len = n;
}

static const k3_chan_event *hand_out(k3_chan *c, size_t *n) {
    if (c->nrec > c->out_cap) {
        c->out_cap = c->nrec;
        c->out = k3_xrealloc(c->out, c->out_cap * sizeof *c->out);
    }
    for (size_t i = 0; i < c->nrec; i++) {
        const event_rec *r = &c->recs[i];
        int is_call = r->kind == K3_EV_TOOL_CALL;
        c->out[i] = (k3_chan_event){r->kind,
                                    c->arena.s + r->text,
                                    r->len,
                                    r->index,
                                    is_call ? c->arena.s + r->name : NULL,
                                    is_call ? c->arena.s + r->args : NULL};
    }
    *n = c->nrec;
    return c->out;
}

static void begin_batch(k3_chan *c) {
    c->nrec = 0;
    c->arena.n = 0;
}

/* ---- tools section ----------------------------------------------------------- */

/* Report every call of the section that has become complete. */
static void scan_section_calls(k3_chan *c) {
    k3_tool_call call;
    int rc;
    /* A call can only have completed if a closing call tag arrived: look for
     * one in the new bytes first (a long call streamed in small chunks would
     * otherwise be re-parsed from its start on every chunk). */
    char close[K3_XTML_MARKER_MAX];
    size_t cl = k3_xtml_close_tag(&c->x, K3_XT_CALL, close);
    size_t from = c->close_checked > c->section_pos + cl ? c->close_checked - cl : c->section_pos;
    c->close_checked = c->section.n;
    if (from >= c->section.n || !memmem(c->section.s + from, c->section.n - from, close, cl))
        return;
    while ((rc = k3_toolcall_next(&c->x, c->section.s, c->section.n, &c->section_pos, &call)) >=
           0) {
        if (rc == 0) continue;
        char *args = k3_toolcall_arguments_json(&call);
        event_rec *r = new_rec(c, K3_EV_TOOL_CALL);
        r->index = c->total_calls++;
        r->name = arena_put(c, call.name, strlen(call.name));
        r->args = arena_put(c, args, strlen(args));
        r->text = arena_put(c, "", 0);
        free(args);
        k3_tool_call_free(&call);
        c->section_calls++;
    }
}

static void end_section(k3_chan *c) {
    scan_section_calls(c);
    event_rec *r = new_rec(c, K3_EV_TOOLS_END);
    r->text = arena_put(c, c->section.s ? c->section.s : "", c->section.n);
    r->len = c->section.n;
    r->index = c->section_calls;
}

static void emit(k3_chan *c, const char *s, size_t n) {
    if (n == 0) return;
    if (c->state == K3_CHAN_TOOL) {
        k3_buf_put(&c->section, s, n);
        scan_section_calls(c);
    } else {
        text_event(c, c->state == K3_CHAN_REASONING ? K3_EV_REASONING : K3_EV_CONTENT, s, n);
    }
}

static void enter_state(k3_chan *c, k3_chan_state next) {
    if (c->state == K3_CHAN_TOOL && next != K3_CHAN_TOOL) end_section(c);
    if (next == K3_CHAN_TOOL && c->state != K3_CHAN_TOOL) {
        c->saw_tools = 1;
        c->section.n = 0;
        c->section_pos = 0;
        c->close_checked = 0;
        c->section_calls = 0;
    }
    c->state = next;
}

/* ---- marker scanning ----------------------------------------------------------- */

/* Earliest complete active marker in s[from, n): its position, or -1. Every
 * marker starts with the <|open|> or <|close|> spelling, so only those
 * positions are tried. */
static long find_marker(const k3_chan *c, const char *s, size_t n, size_t from,
                        const transition **hit) {
    size_t ne;
    const transition *edges = edges_of(c->state, &ne);
    const k3_xtml *x = &c->x;
    /* next occurrence of each control spelling, searched again only once
     * passed, so the scan stays linear however many non-marker '<|' there are */
    const char *next[2] = {NULL, NULL};
    int done[2] = {0, 0};
    for (size_t p = from; p < n;) {
        for (int k = 0; k < 2; k++) {
            k3_xtml_ctrl ctl = k ? K3_XC_CLOSE : K3_XC_OPEN;
            if (!done[k] && !x->ctrl_len[ctl]) done[k] = 1; /* unset spelling: never matches */
            if (!done[k] && (!next[k] || next[k] < s + p)) {
                next[k] = memmem(s + p, n - p, x->ctrl[ctl], x->ctrl_len[ctl]);
                done[k] = !next[k];
            }
        }
        const char *q = !next[0]            ? next[1]
                        : !next[1]          ? next[0]
                        : next[0] < next[1] ? next[0]
                                            : next[1];
        if (!q) return -1;
        size_t at = (size_t)(q - s);
        for (size_t e = 0; e < ne; e++) {
            size_t ml = x->marker_len[edges[e].marker];
            if (ml && n - at >= ml && !memcmp(q, x->marker[edges[e].marker], ml)) {
                *hit = &edges[e];
                return (long)at;
            }
        }
        p = at + 1;
    }
    return -1;
}

/* Length of the longest suffix of s[0..n) that is a proper prefix of an
 * active marker (text that may still become one). */
static size_t held_suffix(const k3_chan *c, const char *s, size_t n) {
    size_t ne;
    const transition *edges = edges_of(c->state, &ne);
    size_t longest = 0;
    for (size_t e = 0; e < ne; e++)
        if (c->x.marker_len[edges[e].marker] > longest) longest = c->x.marker_len[edges[e].marker];
    if (longest == 0) return 0;
    for (size_t h = n < longest ? n : longest - 1; h > 0; h--)
        for (size_t e = 0; e < ne; e++) {
            size_t ml = c->x.marker_len[edges[e].marker];
            if (h < ml && !memcmp(s + n - h, c->x.marker[edges[e].marker], h)) return h;
        }
    return 0;
}

static void process_pending(k3_chan *c) {
    const char *s = c->pending.s;
    size_t n = c->pending.n, start = 0;
    const transition *t;
    long at;
    while ((at = find_marker(c, s, n, start, &t)) >= 0) {
        emit(c, s + start, (size_t)at - start);
        start = (size_t)at + c->x.marker_len[t->marker];
        enter_state(c, t->next);
    }
    size_t h = held_suffix(c, s + start, n - start);
    emit(c, s + start, n - start - h);
    memmove(c->pending.s, s + n - h, h);
    c->pending.n = h;
    c->pending.s[h] = 0;
}

const k3_chan_event *k3_chan_push(k3_chan *c, const char *text, size_t len, size_t *n_events) {
    begin_batch(c);
    if (len) {
        k3_buf_put(&c->pending, text, len);
        process_pending(c);
    }
    return hand_out(c, n_events);
}

static int starts_with_ctrl(const k3_xtml *x, const char *s, size_t n) {
    for (int k = K3_XC_OPEN; k <= K3_XC_CLOSE; k++)
        if (n >= x->ctrl_len[k] && !memcmp(s, x->ctrl[k], x->ctrl_len[k])) return 1;
    return 0;
}

const k3_chan_event *k3_chan_finish(k3_chan *c, size_t *n_events) {
    begin_batch(c);
    const char *s = c->pending.s;
    size_t n = c->pending.n;
    if (c->state == K3_CHAN_TOOL) {
        emit(c, s, n); /* raw section text; only complete calls count */
        end_section(c);
        c->state = K3_CHAN_CONTENT;
    } else if (n && !starts_with_ctrl(&c->x, s, n)) {
        emit(c, s, n);
    }
    c->pending.n = 0;
    return hand_out(c, n_events);
}
