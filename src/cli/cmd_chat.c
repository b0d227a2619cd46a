/* cmd_chat.c — `k3 chat`: interactive multi-turn chat in the terminal.
 *
 * One line of stdin is one user turn (several with a trailing backslash or
 * between """ lines; line editing and history on a terminal: cli/lineedit.h). The conversation
 * lives in a single sequence cache: each turn prefills only its new tokens (the previous answer's
 * closing tags + the new user message + the assistant opener). Commands: /clear (forget the
 * conversation), /thinking on|off, /help, /exit (or end of input). Ctrl-C stops the current answer
 * and returns to the prompt; at the prompt it only prints a hint. */
#include "cli/cli.h"
#include "cli/lineedit.h"

#include "base/err.h"
#include "base/mem.h"
#include "gen/gen_opts.h"
#include "gen/generate.h"
#include "gen/printer.h"
#include "gen/session.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static volatile sig_atomic_t interrupted;

static void on_sigint(int sig) {
    (void)sig;
    interrupted = 1;
}

/* SIGINT without SA_RESTART: a blocked read returns EINTR instead of
 * swallowing the key press. */
static void install_sigint(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigint;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
}

typedef struct {
    const k3_gen_opts *o;
    k3_session s;
    k3_seq *seq;
    int thinking;
    int first;       /* next turn starts the conversation */
    int turn;        /* turns answered since start / /clear */
    k3_ids pending;  /* closing ids of the last answer, fed with the next turn */
    k3_ids history;  /* every id the cache holds: the drafter's context for the next turn */
    int interactive; /* stdin is a terminal */
} chat;

static int on_text(void *ctx, int32_t id, const char *text, size_t len) {
    k3_printer_emit(ctx, id, text, len);
    return 0;
}

static void forget(chat *c) {
    k3_seq_reset(c->seq);
    c->pending.n = 0;
    c->history.n = 0;
    c->first = 1;
    c->turn = 0;
}

static void report(const chat *c, const k3_gen_stats *st, int64_t before) {
    fprintf(stderr, "[k3] turn %d: prefilled %lld new tokens (cache %lld -> %lld)\n", c->turn,
            (long long)st->prompt_tokens, (long long)before,
            (long long)(before + st->prompt_tokens));
    fprintf(stderr,
            "[k3] turn %d: generated %lld tokens; prompt %.1f tokens/s, generation %.1f "
            "tokens/s\n",
            c->turn, (long long)st->gen_tokens,
            st->prompt_s > 0 ? (double)st->prompt_tokens / st->prompt_s : 0.0,
            st->gen_s > 0 ? (double)st->gen_tokens / st->gen_s : 0.0);
    if (st->spec_drafted)
        fprintf(stderr, "[k3] turn %d: speculative: %lld drafted, %lld accepted\n", c->turn,
                (long long)st->spec_drafted, (long long)st->spec_accepted);
}

/* One user turn: prefill the new tokens, stream the answer, remember how to
 * close it. */
static int answer(chat *c, const char *user) {
    interrupted = 0;
    /* SIGINT is unblocked here, not at start-up: a Ctrl-C that came while it
     * was blocked (inherited blocked, as the suite does to stop an answer
     * without racing it) stops this answer, not the wait at the prompt */
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigprocmask(SIG_UNBLOCK, &set, NULL);
    k3_ids ids = {0};
    for (size_t i = 0; i < c->pending.n; i++) k3_ids_push(&ids, c->pending.ids[i]);
    k3_chan_state initial;
    if (k3_session_turn(&c->s, c->first ? c->o->system : NULL, user, c->first, c->thinking, 0, &ids,
                        &initial)) {
        k3_ids_free(&ids);
        return -1;
    }
    int64_t before = k3_seq_len(c->seq);
    int ctx = c->o->ctx_size;
    if (ctx && before + (int64_t)ids.n >= ctx) { /* no room for even one answer token */
        printf("[the conversation would pass --ctx-size %d tokens (%lld + %zu); /clear starts "
               "over]\n",
               ctx, (long long)before, ids.n);
        fflush(stdout);
        k3_ids_free(&ids);
        return 0;
    }
    c->turn++;
    if (c->o->verbose) k3_print_ids(stderr, "prefill ids", ids.ids, ids.n);
    k3_gen_params gp = {.sp = c->o->sp,
                        .max_tokens = c->o->max_tokens,
                        .stops = c->o->stops,
                        .n_stops = c->o->n_stops,
                        .cancel = &interrupted,
                        .spec_max = k3_gen_opts_spec(c->o),
                        .spec_cost = c->o->has_spec_cost ? c->o->spec_cost : NULL,
                        .draft_context = c->history.ids,
                        .n_draft_context = c->history.n};
    if (ctx && gp.max_tokens > ctx - before - (int64_t)ids.n)
        gp.max_tokens = (int)(ctx - before - (int64_t)ids.n);
    gp.sp.seed += (uint64_t)c->turn - 1; /* a fresh but reproducible stream per turn */
    k3_printer *pr = k3_printer_new(stdout, isatty(1), &c->s.x, initial);
    k3_gen_stats st;
    int rc = k3_generate(c->s.m, c->seq, c->s.tok, ids.ids, ids.n, &gp, on_text, pr, &st);
    k3_printer_finish(pr);
    int cut = !rc && st.prompt_tokens < (int64_t)ids.n; /* stopped inside the prompt */
    if (!rc && st.finish == K3_FINISH_CANCELLED)
        printf(cut ? "[stopped during the prompt; the conversation starts over]\n" : "[stopped]\n");
    c->pending.n = 0;
    if (cut) { /* the cache holds part of a message: nothing can follow it */
        if (c->o->verbose) report(c, &st, before);
        forget(c);
        interrupted = 0;
        k3_printer_free(pr);
        k3_gen_stats_free(&st);
        k3_ids_free(&ids);
        return 0;
    }
    if (!rc)
        rc = k3_session_close_turn(&c->s, st.last_id, st.finish == K3_FINISH_STOP_ID,
                                   k3_printer_state(pr), &c->pending);
    if (!rc) { /* the cache now holds this turn's prompt and all but the last answer id */
        for (size_t i = 0; i < ids.n; i++) k3_ids_push(&c->history, ids.ids[i]);
        for (int64_t i = 0; i + 1 < st.gen_tokens; i++) k3_ids_push(&c->history, st.ids[i]);
        c->first = 0;
        if (c->o->verbose) {
            report(c, &st, before);
            k3_print_ids(stderr, "generated ids", st.ids, (size_t)st.gen_tokens);
        }
    }
    interrupted = 0;
    k3_printer_free(pr);
    k3_gen_stats_free(&st);
    k3_ids_free(&ids);
    return rc;
}

/* Slash commands; returns 1 if line was one (handled), -1 for /exit. */
static int command(chat *c, const char *line) {
    if (line[0] != '/') return 0;
    if (!strcmp(line, "/exit") || !strcmp(line, "/quit")) return -1;
    if (!strcmp(line, "/clear")) {
        forget(c);
        printf("[conversation cleared]\n");
    } else if (!strcmp(line, "/thinking on") || !strcmp(line, "/thinking off")) {
        c->thinking = !strcmp(line, "/thinking on");
        printf("[thinking %s]\n", c->thinking ? "on" : "off");
    } else if (!strcmp(line, "/help")) {
        printf("/clear  forget the conversation\n/thinking on|off\n/exit   leave (or Ctrl-D)\n"
               "Ctrl-C  stop the current answer\n"
               "a line ending in \\ continues the message on the next line; \"\"\" on a line of "
               "its own\nopens and closes a message of several lines\n");
    } else {
        printf("[unknown command %s; /help lists them]\n", line);
    }
    fflush(stdout);
    return 1;
}

static int loop(chat *c) {
    int rc = 0;
    if (c->interactive)
        printf("[k3] chat: type a message, /help for commands; end a line with \\ or put \"\"\"\n"
               "[k3] on lines of their own around a message to write several lines\n");
    cli_lines *in = cli_lines_open(c->interactive, &interrupted);
    const char *line;
    while (!rc && (line = cli_lines_next(in))) {
        if (!*line) continue;
        int cmd = command(c, line);
        if (cmd < 0) break;
        if (cmd) continue;
        rc = answer(c, line);
    }
    cli_lines_close(in);
    return rc;
}

int cmd_chat(int argc, char **argv) {
    k3_gen_opts o;
    int prc = k3_gen_opts_parse(argc, argv, "chat", &o);
    if (prc) return prc == 1 ? 0 : 2;
    chat c = {.o = &o, .thinking = o.thinking, .first = 1, .interactive = isatty(0)};
    int rc = k3_session_open(&c.s, &o, stdout);
    if (!rc && !(c.seq = k3_seq_new(c.s.m))) rc = -1;
    if (!rc) {
        install_sigint();
        rc = loop(&c);
    }
    if (rc) fprintf(stderr, "k3 chat: %s\n", k3_errmsg());
    if (c.seq) k3_seq_free(c.seq);
    k3_ids_free(&c.pending);
    k3_ids_free(&c.history);
    k3_session_close(&c.s);
    return rc ? 1 : 0;
}
