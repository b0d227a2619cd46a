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

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static volatile sig_atomic_t interrupted, prefilling;

/* Ctrl-C during the prefill ends the process at once (exit 130: a long
 * prompt would otherwise run to its end first). During decoding the first
 * Ctrl-C stops generating and still prints the statistics (exit 130 too); a
 * second one (default action restored) ends the process. */
static void on_sigint(int sig) {
    if (prefilling) {
        static const char msg[] = "\n[k3] interrupted during the prompt\n";
        ssize_t w = write(2, msg, sizeof msg - 1);
        (void)w;
        _exit(130);
    }
    interrupted = 1;
    signal(sig, SIG_DFL);
}

/* The handler, and SIGINT unblocked: a Ctrl-C that came while it was blocked
 * (or inherited blocked) is handled here, inside the prefill. */
static void arm_sigint(void) {
    signal(SIGINT, on_sigint);
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigprocmask(SIG_UNBLOCK, &set, NULL);
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

/* Whole stdin (--prompt -) or a file (-f) as the prompt; NULL + k3_errmsg. */
static char *read_prompt(const char *path) {
    FILE *f = path ? fopen(path, "rb") : stdin;
    if (!f) {
        k3_seterr("%s: cannot open: %s", path, strerror(errno));
        return NULL;
    }
    size_t cap = 4096, n = 0, r;
    char *buf = k3_xmalloc(cap);
    while ((r = fread(buf + n, 1, cap - n - 1, f)) > 0) {
        n += r;
        if (cap - n < 2) buf = k3_xrealloc(buf, cap *= 2);
    }
    int bad = ferror(f);
    if (path) fclose(f);
    if (bad) {
        free(buf);
        k3_seterr("%s: read error", path ? path : "stdin");
        return NULL;
    }
    buf[n] = 0;
    return buf;
}

static int on_text(void *ctx, int32_t id, const char *text, size_t len) {
    k3_printer_emit(ctx, id, text, len);
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
    if (st->spec_drafted || st->spec_accepted)
        printf("Speculative: %lld drafted, %lld accepted, %.2f tokens per step\n",
               (long long)st->spec_drafted, (long long)st->spec_accepted,
               st->steps ? (double)(st->gen_tokens - 1) / (double)st->steps : 0.0);
    printf("Peak memory: %.3f GB\n", (double)k3_peak_rss() / 1e9);
}

static int run(const k3_gen_opts *o, k3_session *s, const char *prompt) {
    k3_ids ids = {0};
    k3_chan_state initial;
    if (k3_session_turn(s, o->system, prompt, 1, o->thinking, !o->chat_template, &ids, &initial))
        return -1;
    if (o->ctx_size && ids.n > (size_t)o->ctx_size) {
        k3_seterr("the prompt has %zu tokens, more than --ctx-size %d", ids.n, o->ctx_size);
        k3_ids_free(&ids);
        return -1;
    }
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
                        .cancel = &interrupted,
                        .prefilling = &prefilling,
                        .spec_max = k3_gen_opts_spec(o),
                        .spec_cost = o->has_spec_cost ? o->spec_cost : NULL};
    if (o->ctx_size && gp.max_tokens > o->ctx_size - (int)ids.n)
        gp.max_tokens = o->ctx_size - (int)ids.n;
    k3_printer *pr = k3_printer_new(stdout, isatty(1), &s->x, initial);
    printf("==========\n");
    fflush(stdout);
    k3_gen_stats st;
    prefilling = 1; /* k3_generate clears it when the prompt is in the cache */
    arm_sigint();
    int rc = k3_generate(s->m, seq, s->tok, ids.ids, ids.n, &gp, on_text, pr, &st);
    prefilling = 0;
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
    char *read_text = NULL;
    const char *prompt = o.prompt ? o.prompt : "Hello";
    if (o.prompt_file || (o.prompt && !strcmp(o.prompt, "-"))) {
        prompt = read_text = read_prompt(o.prompt_file);
        if (!read_text) {
            fprintf(stderr, "k3 generate: %s\n", k3_errmsg());
            return 1;
        }
    }
    k3_session s;
    int rc = k3_session_open(&s, &o, stdout);
    if (!rc) rc = run(&o, &s, prompt);
    if (rc) fprintf(stderr, "k3 generate: %s\n", k3_errmsg());
    k3_session_close(&s);
    free(read_text);
    return rc ? 1 : interrupted ? 130 : 0; /* (a failed write: main.c's check_stdout) */
}
