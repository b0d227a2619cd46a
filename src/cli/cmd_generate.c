/* cmd_generate.c — `k3 generate`: one prompt in, a streamed answer out, then
 * the mlx-lm style statistics lines:
 *
 *     Prompt: N tokens, X tokens-per-sec
 *     Generation: N tokens, X tokens-per-sec
 *     Peak memory: X GB
 *
 * Without --model it runs on the built-in tiny model (random weights). */
#include "cli/cli.h"

#include "base/err.h"
#include "base/mem.h"
#include "gen/gen_opts.h"
#include "gen/generate.h"
#include "gen/printer.h"
#include "gen/session.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static volatile sig_atomic_t interrupted;

/* First Ctrl-C: stop generating and still print the statistics; a second
 * one (default action restored) ends the process. */
static void on_sigint(int sig) {
    interrupted = 1;
    signal(sig, SIG_DFL);
}

static const char *finish_name(k3_finish f) {
    switch (f) {
    case K3_FINISH_LENGTH:
        return "length (max tokens)";
    case K3_FINISH_STOP_ID:
        return "end-of-turn token";
    case K3_FINISH_STOP_STR:
        return "stop string";
    case K3_FINISH_CANCELLED:
        return "cancelled";
    default:
        return "error";
    }
}

/* Whole stdin as the prompt (--prompt -). */
static char *read_stdin(void) {
    size_t cap = 4096, n = 0, r;
    char *buf = k3_xmalloc(cap);
    while ((r = fread(buf + n, 1, cap - n - 1, stdin)) > 0) {
        n += r;
        if (cap - n < 2) buf = k3_xrealloc(buf, cap *= 2);
    }
    buf[n] = 0;
    return buf;
}

static int on_text(void *ctx, int32_t id, const char *text, size_t len) {
    (void)id;
    k3_printer_push(ctx, text, len);
    return 0;
}

static double per_sec(int64_t n, double s) {
    return s > 0 ? (double)n / s : 0.0;
}

static void print_stats(const k3_gen_stats *st) {
    printf("==========\n");
    printf("Prompt: %lld tokens, %.3f tokens-per-sec\n", (long long)st->prompt_tokens,
           per_sec(st->prompt_tokens, st->prompt_s));
    printf("Generation: %lld tokens, %.3f tokens-per-sec\n", (long long)st->gen_tokens,
           per_sec(st->gen_tokens, st->gen_s));
    printf("Peak memory: %.3f GB\n", (double)k3_peak_rss() / 1e9);
}

static int run(const k3_gen_opts *o, k3_session *s, const char *prompt) {
    k3_ids ids = {0};
    k3_chan_state initial;
    if (k3_session_turn(s, o->system, prompt, 1, o->thinking, !o->chat_template, &ids, &initial))
        return -1;
    if (o->verbose) k3_print_ids(stderr, "prompt ids", ids.ids, ids.n);
    k3_seq *seq = k3_seq_new(s->m);
    if (!seq) {
        k3_ids_free(&ids);
        return -1;
    }
    k3_gen_params gp = {.sp = o->sp,
                        .max_tokens = o->max_tokens,
                        .stops = o->stops,
                        .n_stops = o->n_stops,
                        .cancel = &interrupted};
    signal(SIGINT, on_sigint);
    k3_printer *pr = k3_printer_new(stdout, isatty(1), &s->x, initial);
    printf("==========\n");
    fflush(stdout);
    k3_gen_stats st;
    int rc = k3_generate(s->m, seq, s->tok, ids.ids, ids.n, &gp, on_text, pr, &st);
    k3_printer_finish(pr);
    if (!rc && st.finish == K3_FINISH_CANCELLED) printf("[stopped]\n");
    if (!rc) {
        if (o->verbose) {
            k3_print_ids(stderr, "generated ids", st.ids, (size_t)st.gen_tokens);
            fprintf(stderr, "[k3] prefilled %lld tokens; finished by %s\n",
                    (long long)st.prompt_tokens, finish_name(st.finish));
        }
        print_stats(&st);
    }
    k3_printer_free(pr);
    k3_gen_stats_free(&st);
    k3_seq_free(seq);
    k3_ids_free(&ids);
    return rc;
}

int cmd_generate(int argc, char **argv) {
    k3_gen_opts o;
    int prc = k3_gen_opts_parse(argc, argv, "generate", &o);
    if (prc) return prc == 1 ? 0 : 2;
    char *stdin_prompt = NULL;
    const char *prompt = o.prompt ? o.prompt : "Hello";
    if (o.prompt && !strcmp(o.prompt, "-")) prompt = stdin_prompt = read_stdin();
    k3_session s;
    int rc = k3_session_open(&s, &o, stdout);
    if (!rc) rc = run(&o, &s, prompt);
    if (rc) fprintf(stderr, "k3 generate: %s\n", k3_errmsg());
    k3_session_close(&s);
    free(stdin_prompt);
    return rc ? 1 : 0;
}
