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
    k3_xtml x; /* spellings (to give back control tokens that form no structure) */
    k3_xtml t; /* token form: what the markers are matched in */
    k3_chan_state state;
    int tools_allowed;
    k3_buf pending; /* token form, not yet emitted: at most a proper prefix of a marker */
    k3_buf spell;   /* scratch: a span written back with spellings */
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

k3_chan *k3_chan_new(const k3_xtml *x, k3_chan_state initial, int tools_allowed) {
    k3_chan *c = k3_xcalloc(1, sizeof *c);
    c->x = *x;
    k3_xtml_token_form(x, &c->t);
    c->state = initial;
    c->tools_allowed = tools_allowed != 0;
    return c;
}

void k3_chan_free(k3_chan *c) {
    if (!c) return;
    k3_buf_free(&c->pending);
    k3_buf_free(&c->spell);
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
    if (!pl) return NULL;
    while ((p = memmem(p, (size_t)(s + n - p), pat, pl))) last = p++;
    return last;
}

k3_chan_state k3_chan_initial_state(const k3_xtml *x, const k3_tokenizer *tok, const int32_t *ids,
                                    size_t n) {
    /* The prompt in token form: control ids as their bytes (any other
     * control-block id as the EOM byte, a barrier no marker contains),
     * ordinary tokens as their bytes. */
    k3_xtml t;
    k3_xtml_token_form(x, &t);
    k3_buf b = {0};
    for (size_t i = 0; i < n; i++) {
        int c = k3_xtml_struct_ctrl(x, ids[i]);
        if (c >= 0) {
            k3_buf_putc(&b, (char)K3_XTML_CTRL_BYTE(c));
        } else if (k3_tok_is_special(tok, ids[i])) {
            k3_buf_putc(&b, (char)K3_XTML_CTRL_BYTE(K3_XC_EOM));
        } else {
            size_t len = 0;
            const char *bytes = k3_tok_token_bytes(tok, ids[i], &len);
            if (bytes) k3_xtml_put_text(&b, bytes, len);
        }
    }
    const char *open =
        last_occurrence(b.s, b.n, t.marker[K3_XM_THINK_OPEN], t.marker_len[K3_XM_THINK_OPEN]);
    const char *close =
        last_occurrence(b.s, b.n, t.marker[K3_XM_THINK_CLOSE], t.marker_len[K3_XM_THINK_CLOSE]);
    k3_chan_state st = open && (!close || open > close) ? K3_CHAN_REASONING : K3_CHAN_CONTENT;
    k3_buf_free(&b);
    return st;
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
    size_t cl = k3_xtml_close_tag(&c->t, K3_XT_CALL, close);
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

/* Token-form s[0..n) with control bytes written as their spellings, in
 * c->spell (valid until the next call). */
static const char *spelled(k3_chan *c, const char *s, size_t n, size_t *len) {
    c->spell.n = 0;
    k3_xtml_spell(&c->x, s, n, &c->spell);
    k3_buf_put(&c->spell, "", 0);
    *len = c->spell.n;
    return c->spell.s;
}

static void end_section(k3_chan *c) {
    scan_section_calls(c);
    size_t len;
    const char *body = spelled(c, c->section.s ? c->section.s : "", c->section.n, &len);
    event_rec *r = new_rec(c, K3_EV_TOOLS_END);
    r->text = arena_put(c, body, len);
    r->len = len;
    r->index = c->section_calls;
}

static void emit(k3_chan *c, const char *s, size_t n) {
    if (n == 0) return;
    if (c->state == K3_CHAN_TOOL) {
        k3_buf_put(&c->section, s, n);
        scan_section_calls(c);
    } else {
        size_t len;
        const char *text = spelled(c, s, n, &len);
        text_event(c, c->state == K3_CHAN_REASONING ? K3_EV_REASONING : K3_EV_CONTENT, text, len);
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
/* Length of an edge's marker, 0 when the edge is off (tools not allowed). */
static size_t edge_len(const k3_chan *c, const transition *e) {
    if (e->marker == K3_XM_TOOLS_OPEN && !c->tools_allowed) return 0;
    return c->t.marker_len[e->marker];
}

static long find_marker(const k3_chan *c, const char *s, size_t n, size_t from,
                        const transition **hit) {
    size_t ne;
    const transition *edges = edges_of(c->state, &ne);
    const k3_xtml *x = &c->t;
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
            size_t ml = edge_len(c, &edges[e]);
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
        if (edge_len(c, &edges[e]) > longest) longest = edge_len(c, &edges[e]);
    if (longest == 0) return 0;
    for (size_t h = n < longest ? n : longest - 1; h > 0; h--)
        for (size_t e = 0; e < ne; e++) {
            size_t ml = edge_len(c, &edges[e]);
            if (h < ml && !memcmp(s + n - h, c->t.marker[edges[e].marker], h)) return h;
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
        start = (size_t)at + c->t.marker_len[t->marker];
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
        k3_xtml_put_text(&c->pending, text, len);
        process_pending(c);
    }
    return hand_out(c, n_events);
}

static void push_ctrl(k3_chan *c, k3_xtml_ctrl ctrl) {
    if ((unsigned)ctrl >= K3_XC_COUNT || !c->t.ctrl_len[ctrl]) return;
    k3_buf_putc(&c->pending, (char)K3_XTML_CTRL_BYTE(ctrl));
    process_pending(c);
}

const k3_chan_event *k3_chan_push_ctrl(k3_chan *c, k3_xtml_ctrl ctrl, size_t *n_events) {
    begin_batch(c);
    push_ctrl(c, ctrl);
    return hand_out(c, n_events);
}

const k3_chan_event *k3_chan_push_token(k3_chan *c, k3_detok *d, int32_t id, size_t *n_events) {
    begin_batch(c);
    int ctrl = k3_xtml_struct_ctrl(&c->x, id);
    size_t len = 0;
    /* before a control token, an incomplete UTF-8 tail can no longer complete */
    const char *text = ctrl >= 0 ? k3_detok_flush(d, &len) : k3_detok_push(d, id, &len);
    if (len) {
        k3_xtml_put_text(&c->pending, text, len);
        process_pending(c);
    }
    if (ctrl >= 0) push_ctrl(c, (k3_xtml_ctrl)ctrl);
    return hand_out(c, n_events);
}

const k3_chan_event *k3_chan_finish(k3_chan *c, size_t *n_events) {
    begin_batch(c);
    const char *s = c->pending.s;
    size_t n = c->pending.n;
    if (c->state == K3_CHAN_TOOL) {
        emit(c, s, n); /* raw section text; only complete calls count */
        end_section(c);
        c->state = K3_CHAN_CONTENT;
    }
    /* Elsewhere the held text is a proper prefix of a marker, i.e. it starts
     * with a control token: a dangling marker cut by the end of the stream,
     * dropped (as SGLang does). */
    c->pending.n = 0;
    return hand_out(c, n_events);
}
