/* lineedit.c — chat input: libedit on a terminal, multi-line messages (see lineedit.h). */
#include "cli/lineedit.h"

#include "base/mem.h"

#include <editline/readline.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

struct cli_lines {
    int interactive;
    volatile sig_atomic_t *interrupted;
    char *history; /* file, or NULL */
    char *line;    /* getline buffer (not interactive) */
    size_t cap;
    char *msg; /* the message being returned */
    size_t len, msg_cap;
};

static char *history_path(void) {
    const char *e = getenv("K3_HISTORY");
    if (e) return *e ? k3_xstrdup(e) : NULL;
    const char *home = getenv("HOME");
    if (!home || !*home) return NULL;
    size_t n = strlen(home) + 16;
    char *p = k3_xmalloc(n);
    snprintf(p, n, "%s/.k3_history", home);
    return p;
}

cli_lines *cli_lines_open(int interactive, volatile sig_atomic_t *interrupted) {
    cli_lines *l = k3_xcalloc(1, sizeof *l);
    l->interactive = interactive;
    l->interrupted = interrupted;
    if (interactive) {
        rl_catch_signals = 0; /* our SIGINT handler stays in charge */
        rl_initialize();
        using_history();
        stifle_history(1000);
        l->history = history_path();
        if (l->history) read_history(l->history); /* a missing file is fine */
    }
    return l;
}

static void hint(void) {
    printf("\n[Ctrl-C stops an answer; /exit or Ctrl-D leaves]\n");
    fflush(stdout);
}

/* One physical line without its newline, malloc'd; NULL at end of input. */
static char *raw_line(cli_lines *l, int more) {
    for (;;) {
        errno = 0;
        if (l->interactive) {
            char *s = readline(more ? "... " : ">> ");
            if (s) return s;
        } else {
            ssize_t n = getline(&l->line, &l->cap, stdin);
            if (n >= 0) {
                while (n > 0 && (l->line[n - 1] == '\n' || l->line[n - 1] == '\r'))
                    l->line[--n] = 0;
                return k3_xstrdup(l->line);
            }
            clearerr(stdin);
        }
        if (!*l->interrupted && errno != EINTR) return NULL;
        *l->interrupted = 0; /* Ctrl-C at the prompt: a hint, and ask again */
        hint();
    }
}

static void append(cli_lines *l, const char *s, size_t n) {
    if (l->len + n + 2 > l->msg_cap) {
        l->msg_cap = (l->len + n + 2) * 2;
        l->msg = k3_xrealloc(l->msg, l->msg_cap);
    }
    memcpy(l->msg + l->len, s, n);
    l->len += n;
    l->msg[l->len] = 0;
}

const char *cli_lines_next(cli_lines *l) {
    l->len = 0;
    append(l, "", 0);
    int block = 0, nlines = 0, got = 0;
    for (;;) {
        char *s = raw_line(l, block || nlines);
        if (!s) return got ? l->msg : NULL; /* end of input ends an open message too */
        got = 1;
        size_t n = strlen(s);
        if (!strcmp(s, "\"\"\"")) { /* opens or closes a block */
            free(s);
            if (block) break;
            block = 1;
            continue;
        }
        int cont = !block && n && s[n - 1] == '\\';
        if (nlines++) append(l, "\n", 1);
        append(l, s, cont ? n - 1 : n);
        free(s);
        if (!block && !cont) break;
    }
    if (l->interactive && l->len) add_history(l->msg);
    return l->msg;
}

void cli_lines_close(cli_lines *l) {
    if (!l) return;
    if (l->interactive && l->history) write_history(l->history);
    free(l->history);
    free(l->line);
    free(l->msg);
    free(l);
}
