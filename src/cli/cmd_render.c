/* cmd_render.c — `k3 render`: an OpenAI chat request (JSON on stdin) ->
 * the exact Kimi K3 prompt string on stdout (chat.md §2), or its token ids.
 *
 *   k3 render [--model DIR] [--ids | --segments] < request.json
 *
 * The prompt is written byte for byte with no trailing newline. --ids
 * encodes it segment by segment as the reference does (one line of
 * comma-separated ids); --segments prints the segment list as JSON
 * ([[control, text], ...]) for debugging. Bad JSON or an invalid request:
 * a message naming the field on stderr, exit status 1. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "base/mem.h"
#include "cli/cli.h"
#include "text/chat.h"
#include "text/pyjson.h"
#include "text/tokenizer.h"
#include "text/xtml.h"

static void render_usage(FILE *f) {
    fprintf(f, "usage: k3 render [--model DIR] [--ids | --segments] < request.json\n"
               "  prints the prompt of an OpenAI chat request (messages, tools, tool_choice,\n"
               "  response_format, reasoning_effort, chat_template_kwargs.thinking, ...)\n"
               "  --model DIR   use DIR's tokenizer (control-token spellings, ids);\n"
               "                default: the K3 control tokens, byte-level ids\n"
               "  --ids         print the token ids instead (comma-separated, one line)\n"
               "  --segments    print the segments as JSON [[control, text], ...]\n");
}

/* The request from stdin; lone surrogate escapes become U+FFFD as in the
 * reference, instead of failing the parse. */
static json_t *read_request(void) {
    size_t cap = 1 << 16, n = 0, got;
    char *buf = k3_xmalloc(cap);
    while ((got = fread(buf + n, 1, cap - n, stdin)) > 0)
        if ((n += got) == cap) buf = k3_xrealloc(buf, cap *= 2);
    json_error_t err;
    json_t *req = k3_pyjson_loads(buf, n, &err);
    free(buf);
    if (!req)
        k3_die("render: stdin: invalid JSON at line %d column %d: %s", err.line, err.column,
               err.text);
    return req;
}

static void print_segments(const k3_chat_segs *segs) {
    json_t *arr = json_array();
    for (size_t i = 0; i < segs->n; i++)
        json_array_append_new(
            arr, json_pack("[b, s%]", segs->v[i].control, segs->v[i].text, segs->v[i].len));
    char *s = json_dumps(arr, JSON_ENSURE_ASCII);
    printf("%s\n", s);
    free(s);
    json_decref(arr);
}

static void print_ids(const k3_ids *ids) {
    for (size_t i = 0; i < ids->n; i++) printf(i ? ",%d" : "%d", ids->ids[i]);
    putchar('\n');
}

int cmd_render(int argc, char **argv) {
    const char *model = NULL;
    int ids_out = 0, segs_out = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--model") && i + 1 < argc)
            model = argv[++i];
        else if (!strcmp(argv[i], "--ids"))
            ids_out = 1;
        else if (!strcmp(argv[i], "--segments"))
            segs_out = 1;
        else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            render_usage(stdout);
            return 0;
        } else {
            fprintf(stderr,
                    "k3 render: unknown or incomplete option '%s' (k3 render --help lists the "
                    "options)\n",
                    argv[i]);
            return 2;
        }
    }
    k3_tokenizer *tok = model || ids_out ? k3_tok_for_model(model) : NULL;
    if ((model || ids_out) && !tok) k3_die("render: %s", k3_errmsg());
    k3_xtml x;
    if (k3_xtml_init(&x, tok)) k3_die("render: %s", k3_errmsg());
    json_t *req = read_request();
    k3_chat_input in;
    k3_chat_segs segs = {0};
    if (k3_chat_input_from_request(req, &in) || k3_chat_build(&x, &in, &segs))
        k3_die("render: %s", k3_errmsg());
    if (segs_out) {
        print_segments(&segs);
    } else if (ids_out) {
        k3_ids ids = {0};
        if (k3_chat_segs_encode(tok, &segs, &ids)) k3_die("render: %s", k3_errmsg());
        print_ids(&ids);
        k3_ids_free(&ids);
    } else {
        size_t len;
        char *prompt = k3_chat_segs_join(&segs, &len);
        fwrite(prompt, 1, len, stdout);
        free(prompt);
    }
    k3_chat_segs_free(&segs);
    json_decref(req);
    k3_tok_free(tok);
    return fflush(stdout) == 0 ? 0 : 1;
}
