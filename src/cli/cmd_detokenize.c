/* cmd_detokenize.c — `k3 detokenize`: token ids on stdin -> text on stdout.
 *
 *   k3 detokenize [--model DIR] [--skip-special] [--raw] [--null]
 *
 * Ids are separated by commas and/or whitespace. The bytes are repaired as
 * Python's errors="replace" would (--raw: write them as they are).
 * --skip-special drops control tokens whose `special` flag is set (keeps
 * <|open|>, <|close|>, <|sep|>). --null: each input line is one id list and
 * each decoded text is followed by a NUL byte. */
#include "base/err.h"
#include "base/mem.h"
#include "cli/cli.h"
#include "text/tokenizer.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void detokenize_usage(FILE *f) {
    fprintf(f, "usage: k3 detokenize [--model DIR] [--skip-special] [--raw] [--null] < ids\n"
               "  ids separated by commas or whitespace -> decoded text on stdout\n");
}

/* Parse one id at s[*i]; advances *i. -1 + message on a bad field. */
static int parse_id(const char *s, size_t n, size_t *i, int vocab, size_t index, int32_t *id) {
    size_t st = *i;
    long v = 0;
    while (*i < n && isdigit((unsigned char)s[*i]) && *i - st < 10) v = v * 10 + (s[(*i)++] - '0');
    if (*i == st || (*i < n && !isspace((unsigned char)s[*i]) && s[*i] != ','))
        return k3_seterr("id #%zu: expected a decimal token id at byte %zu", index + 1, st);
    if (v >= vocab)
        return k3_seterr("id #%zu: %ld is out of range (vocabulary has %d ids)", index + 1, v,
                         vocab);
    *id = (int32_t)v;
    return 0;
}

/* Ids of s[0..n) (commas/whitespace between them). */
static int parse_ids(const char *s, size_t n, int vocab, k3_ids *out) {
    size_t i = 0;
    while (i < n) {
        if (isspace((unsigned char)s[i]) || s[i] == ',') {
            i++;
            continue;
        }
        int32_t id = 0;
        if (parse_id(s, n, &i, vocab, out->n, &id)) return -1;
        k3_ids_push(out, id);
    }
    return 0;
}

static void write_text(const k3_tokenizer *tok, const k3_ids *v, int skip, int raw) {
    size_t n;
    char *s = raw ? k3_tok_decode_bytes(tok, v->ids, v->n, skip, &n)
                  : k3_tok_decode(tok, v->ids, v->n, skip, &n);
    fwrite(s, 1, n, stdout);
    free(s);
}

int cmd_detokenize(int argc, char **argv) {
    const char *model = NULL;
    int skip = 0, raw = 0, null_sep = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--model") && i + 1 < argc)
            model = argv[++i];
        else if (!strcmp(argv[i], "--skip-special"))
            skip = 1;
        else if (!strcmp(argv[i], "--raw"))
            raw = 1;
        else if (!strcmp(argv[i], "--null"))
            null_sep = 1;
        else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            detokenize_usage(stdout);
            return 0;
        } else {
            fprintf(
                stderr,
                "k3 detokenize: unknown or incomplete option '%s' (k3 detokenize --help lists the "
                "options)\n",
                argv[i]);
            return 2;
        }
    }
    k3_tokenizer *tok = k3_tok_for_model(model);
    if (!tok) k3_die("detokenize: %s", k3_errmsg());
    size_t len;
    char *in = k3_read_file("/dev/stdin", &len);
    if (!in) k3_die("detokenize: %s", k3_errmsg());
    int rc = 0;
    size_t start = 0;
    while (start < len || (!null_sep && start == 0)) {
        size_t end = len;
        if (null_sep) {
            end = start;
            while (end < len && in[end] != '\n') end++;
        }
        k3_ids v = {0};
        if (parse_ids(in + start, end - start, k3_tok_vocab_size(tok), &v)) {
            fprintf(stderr, "k3 detokenize: stdin: %s\n", k3_errmsg());
            rc = 1;
            k3_ids_free(&v);
            break;
        }
        write_text(tok, &v, skip, raw);
        if (null_sep) putchar(0);
        k3_ids_free(&v);
        start = end + 1;
    }
    free(in);
    k3_tok_free(tok);
    return rc;
}
