/* printer.c — user-facing rendering of a generation stream (see printer.h). */
#include "gen/printer.h"

#include "base/buf.h"
#include "base/mem.h"

#include <stdlib.h>
#include <string.h>

#define DIM "\033[2m"
#define RESET "\033[0m"

struct k3_printer {
    FILE *out;
    k3_xtml x;
    int tty;
    k3_chan *ch;
    int last_kind; /* -1 none yet, else K3_EV_REASONING / K3_EV_CONTENT */
    int dimmed;
    int at_line_start;
    size_t reasoning, content;
};

k3_printer *k3_printer_new(FILE *out, int tty, const k3_xtml *x, k3_chan_state initial) {
    k3_printer *p = k3_xcalloc(1, sizeof *p);
    p->out = out;
    p->tty = tty;
    p->x = *x;
    p->ch = k3_chan_new(x, initial, 1);
    p->last_kind = -1;
    p->at_line_start = 1;
    return p;
}

/* Text to the terminal with C0 controls (other than \n, \t) and DEL made harmless. */
static void write_safe(k3_printer *p, const char *s, size_t n) {
    size_t start = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if ((c < 0x20 && c != '\n' && c != '\t') || c == 0x7f) {
            fwrite(s + start, 1, i - start, p->out);
            fputs("\xef\xbf\xbd", p->out);
            start = i + 1;
        }
    }
    fwrite(s + start, 1, n - start, p->out);
}

static void write_text(k3_printer *p, const char *s, size_t n) {
    if (!n) return;
    if (p->tty)
        write_safe(p, s, n);
    else
        fwrite(s, 1, n, p->out);
    p->at_line_start = s[n - 1] == '\n';
}

static void new_line(k3_printer *p) {
    if (!p->at_line_start) fputc('\n', p->out);
    p->at_line_start = 1;
}

/* Switch the presentation when the channel changes. */
static void enter(k3_printer *p, int kind) {
    if (kind == p->last_kind) return;
    if (p->tty) {
        if (kind == K3_EV_REASONING && !p->dimmed) {
            fputs(DIM, p->out);
            p->dimmed = 1;
        }
        if (kind != K3_EV_REASONING && p->dimmed) {
            fputs(RESET, p->out);
            p->dimmed = 0;
            new_line(p); /* the answer starts on its own line */
            fputc('\n', p->out);
        }
    } else if (kind == K3_EV_REASONING) {
        new_line(p);
        fputs("[thinking]\n", p->out);
    } else if (p->last_kind == K3_EV_REASONING) {
        new_line(p);
        fputs("[answer]\n", p->out);
    }
    p->last_kind = kind;
}

static void show_events(k3_printer *p, const k3_chan_event *ev, size_t n) {
    for (size_t i = 0; i < n; i++) {
        switch (ev[i].kind) {
        case K3_EV_REASONING:
        case K3_EV_CONTENT:
            if (!ev[i].len) break;
            enter(p, ev[i].kind);
            write_text(p, ev[i].text, ev[i].len);
            if (ev[i].kind == K3_EV_REASONING)
                p->reasoning += ev[i].len;
            else
                p->content += ev[i].len;
            break;
        case K3_EV_TOOL_CALL:
            enter(p, K3_EV_CONTENT);
            new_line(p);
            fprintf(p->out, "[tool call] %s %s\n", ev[i].name, ev[i].arguments);
            p->at_line_start = 1;
            break;
        case K3_EV_TOOLS_END:
            break;
        }
    }
    fflush(p->out);
}

void k3_printer_push(k3_printer *p, const char *text, size_t len) {
    size_t n;
    const k3_chan_event *ev = k3_chan_push(p->ch, text, len, &n);
    show_events(p, ev, n);
}

void k3_printer_push_ctrl(k3_printer *p, k3_xtml_ctrl ctrl) {
    size_t n;
    const k3_chan_event *ev = k3_chan_push_ctrl(p->ch, ctrl, &n);
    show_events(p, ev, n);
}

void k3_printer_emit(k3_printer *p, int32_t id, const char *text, size_t len) {
    int ctrl = k3_xtml_struct_ctrl(&p->x, id);
    if (ctrl >= 0)
        k3_printer_push_ctrl(p, (k3_xtml_ctrl)ctrl);
    else
        k3_printer_push(p, text, len);
}

void k3_printer_finish(k3_printer *p) {
    size_t n;
    const k3_chan_event *ev = k3_chan_finish(p->ch, &n);
    show_events(p, ev, n);
    if (p->dimmed) fputs(RESET, p->out);
    p->dimmed = 0;
    new_line(p);
    fflush(p->out);
}

void k3_printer_free(k3_printer *p) {
    if (!p) return;
    k3_chan_free(p->ch);
    free(p);
}

size_t k3_printer_reasoning_bytes(const k3_printer *p) {
    return p->reasoning;
}
size_t k3_printer_content_bytes(const k3_printer *p) {
    return p->content;
}

k3_chan_state k3_printer_state(const k3_printer *p) {
    return k3_chan_state_now(p->ch);
}

void k3_print_ids(FILE *f, const char *what, const int32_t *ids, size_t n) {
    k3_buf b = {0};
    char num[32];
    snprintf(num, sizeof num, " (%zu):", n);
    k3_buf_puts(&b, "[k3] ");
    k3_buf_puts(&b, what);
    k3_buf_puts(&b, num);
    for (size_t i = 0; i < n; i++) {
        snprintf(num, sizeof num, "%s%d", i ? "," : " ", (int)ids[i]);
        k3_buf_puts(&b, num);
    }
    k3_buf_putc(&b, '\n');
    fwrite(b.s, 1, b.n, f);
    fflush(f);
    k3_buf_free(&b);
}
