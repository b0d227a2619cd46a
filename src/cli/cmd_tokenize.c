/* cmd_tokenize.c — `k3 tokenize`: text on stdin -> comma-separated token ids.
 *
 *   k3 tokenize [--model DIR] [--no-special] [--null]
 *
 * DIR's tiktoken.model + tokenizer_config.json, or a byte-level tokenizer
 * for DIR/config.json's vocab_size when DIR has no tokenizer files; without
 * --model, byte-level with the K3 vocabulary size. Control-token spellings
 * in the text become their ids (like the reference encode's default
 * allow_special_tokens=True) unless --no-special. --null: stdin holds
 * NUL-separated texts; print one line of ids per text (batch checks). */
#include "base/err.h"
#include "base/mem.h"
#include "cli/cli.h"
#include "text/tokenizer.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void tokenize_usage(FILE *f) {
    fprintf(f, "usage: k3 tokenize [--model DIR] [--no-special] [--null] < text\n"
               "  prints the token ids of stdin (all bytes, including a final newline),\n"
               "  comma-separated, on one line\n"
               "  --model DIR    tokenizer of DIR (tiktoken.model, else byte-level for\n"
               "                 config.json's vocab_size); default: byte-level K3 layout\n"
               "  --no-special   control-token spellings (<|open|>) are ordinary text\n"
               "  --null         stdin is NUL-separated texts; one output line per text\n"
               "  --stats        print bytes, tokens, seconds and MB/s (wall, cpu) to stderr\n");
}

static char *read_stdin(size_t *len) {
    size_t cap = 1 << 16, n = 0;
    char *buf = k3_xmalloc(cap);
    size_t got;
    while ((got = fread(buf + n, 1, cap - n, stdin)) > 0) {
        n += got;
        if (n == cap) buf = k3_xrealloc(buf, cap *= 2);
    }
    *len = n;
    return buf;
}

/* Print ids comma-separated into one line. Hand-formatted: printf per id
 * cost as much as the encoding itself on large inputs. */
static void print_ids(const k3_ids *v) {
    char buf[1 << 14];
    size_t w = 0;
    for (size_t i = 0; i < v->n; i++) {
        if (w > sizeof buf - 16) fwrite(buf, 1, w, stdout), w = 0;
        if (i) buf[w++] = ',';
        char digits[12];
        int nd = 0;
        uint32_t x = (uint32_t)v->ids[i]; /* ids are never negative */
        do digits[nd++] = (char)('0' + x % 10), x /= 10;
        while (x);
        while (nd) buf[w++] = digits[--nd];
    }
    buf[w++] = '\n';
    fwrite(buf, 1, w, stdout);
}

int cmd_tokenize(int argc, char **argv) {
    const char *model = NULL;
    int allow_special = 1, null_sep = 0, stats = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--model") && i + 1 < argc)
            model = argv[++i];
        else if (!strcmp(argv[i], "--no-special"))
            allow_special = 0;
        else if (!strcmp(argv[i], "--null"))
            null_sep = 1;
        else if (!strcmp(argv[i], "--stats"))
            stats = 1;
        else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            tokenize_usage(stdout);
            return 0;
        } else {
            fprintf(stderr,
                    "k3 tokenize: unknown or incomplete option '%s' (k3 tokenize --help lists the "
                    "options)\n",
                    argv[i]);
            return 2;
        }
    }
    k3_tokenizer *tok = k3_tok_for_model(model);
    if (!tok) k3_die("tokenize: %s", k3_errmsg());
    size_t len;
    char *text = read_stdin(&len);
    double t0 = k3_now();
    clock_t c0 = clock();
    size_t ntok = 0, start = 0;
    int rc = 0;
    for (;;) {
        size_t end = start;
        if (null_sep)
            while (end < len && text[end]) end++;
        else
            end = len;
        k3_ids v = {0};
        if (k3_tok_encode_append(tok, text + start, end - start, allow_special, &v)) {
            fprintf(stderr, "k3 tokenize: %s\n", k3_errmsg());
            rc = 1;
            k3_ids_free(&v);
            break;
        }
        print_ids(&v);
        ntok += v.n;
        k3_ids_free(&v);
        if (end >= len || (null_sep && end + 1 >= len)) break;
        start = end + 1;
    }
    double dt = k3_now() - t0, cpu = (double)(clock() - c0) / CLOCKS_PER_SEC;
    if (stats) /* CPU time too: on a shared machine the wall clock is noisy */
        fprintf(stderr, "%zu bytes, %zu tokens, %.3f s wall (%.2f MB/s), %.3f s cpu (%.2f MB/s)\n",
                len, ntok, dt, dt > 0 ? len / dt / 1e6 : 0.0, cpu, cpu > 0 ? len / cpu / 1e6 : 0.0);
    free(text);
    k3_tok_free(tok);
    return rc;
}
