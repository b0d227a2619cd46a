/* replay_file.c — reading, checking and tokenizing a replay corpus (see
 * replay_file.h). */
#include "gen/replay_file.h"

#include "base/err.h"
#include "base/mem.h"
#include "base/utf8safe.h"

#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* jansson's message can quote the bytes it stopped at: they reach a
 * terminal, so control bytes and broken UTF-8 are escaped. */
static int line_err(const char *name, int line, const char *what) {
    char safe[512];
    k3_utf8_escape(safe, sizeof safe, what, strlen(what), K3_UTF8_CTRL);
    return k3_seterr("%s:%d: %s", name, line, safe);
}

static int blank(const char *s, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (s[i] != ' ' && s[i] != '\t' && s[i] != '\r') return 0;
    return 1;
}

static const char *type_name(const json_t *v) {
    switch (json_typeof(v)) {
    case JSON_OBJECT:
        return "an object";
    case JSON_ARRAY:
        return "an array";
    case JSON_STRING:
        return "a string";
    case JSON_INTEGER:
    case JSON_REAL:
        return "a number";
    case JSON_TRUE:
    case JSON_FALSE:
        return "a boolean";
    default:
        return "null";
    }
}

/* A copy of the string field `key` of o into *s / *n; -1 + message if it is
 * missing or not a string. */
static int take_string(const json_t *o, const char *key, const char *name, int line, char **s,
                       size_t *n) {
    const json_t *v = json_object_get(o, key);
    if (!v) return k3_seterr("%s:%d: missing \"%s\" (a string)", name, line, key);
    if (!json_is_string(v))
        return k3_seterr("%s:%d: \"%s\" must be a string, not %s", name, line, key, type_name(v));
    *n = json_string_length(v);
    *s = k3_xmalloc(*n + 1);
    memcpy(*s, json_string_value(v), *n + 1);
    return 0;
}

/* One non-blank line into *it. */
static int parse_line(const char *name, int line, const char *s, size_t n, k3_replay_item *it) {
    json_error_t e;
    json_t *o = json_loadb(s, n, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL | JSON_DECODE_ANY, &e);
    int rc = 0;
    if (!o)
        rc = line_err(name, line, e.text);
    else if (!json_is_object(o))
        rc = k3_seterr("%s:%d: a line must be a JSON object {\"prompt\": ..., \"answer\": ...}, "
                       "not %s",
                       name, line, type_name(o));
    else
        rc = take_string(o, "prompt", name, line, &it->prompt, &it->prompt_len) ||
             take_string(o, "answer", name, line, &it->answer, &it->answer_len);
    it->line = line;
    json_decref(o);
    return rc ? -1 : 0;
}

int k3_replay_parse(const char *path, const char *text, size_t len, k3_replay_doc *out) {
    memset(out, 0, sizeof *out);
    k3_utf8_escape(out->name, sizeof out->name, path, strlen(path), K3_UTF8_CTRL);
    const char *name = out->name;
    int line = 0, cap = 0, rc = 0;
    for (size_t at = 0; !rc && at < len;) {
        const char *nl = memchr(text + at, '\n', len - at);
        size_t n = nl ? (size_t)(nl - (text + at)) : len - at;
        if (line == INT_MAX) return k3_replay_doc_free(out), k3_seterr("%s: too many lines", name);
        line++;
        if (!blank(text + at, n)) {
            if (out->n == cap) {
                cap = cap ? 2 * cap : 16;
                out->items = k3_xrealloc(out->items, sizeof *out->items * (size_t)cap);
            }
            k3_replay_item *it = &out->items[out->n];
            memset(it, 0, sizeof *it);
            out->n++; /* counted even on error, so the free below sees its strings */
            rc = parse_line(name, line, text + at, n, it);
        }
        at += n + 1;
    }
    if (!rc && !out->n)
        rc = k3_seterr("%s: no lines (each line is {\"prompt\": ..., "
                       "\"answer\": ...})",
                       name);
    if (rc) k3_replay_doc_free(out);
    return rc ? -1 : 0;
}

int k3_replay_read(const char *path, k3_replay_doc *out) {
    memset(out, 0, sizeof *out);
    k3_utf8_escape(out->name, sizeof out->name, path, strlen(path), K3_UTF8_CTRL);
    const char *name = out->name;
    FILE *f = fopen(path, "rb");
    if (!f) return k3_seterr("%s: cannot open: %s", name, strerror(errno));
    struct stat st; /* a regular file's size is known before reading it */
    if (!fstat(fileno(f), &st) && S_ISREG(st.st_mode) && st.st_size > K3_REPLAY_FILE_MAX) {
        fclose(f);
        return k3_seterr("%s: larger than %u MiB", name, K3_REPLAY_FILE_MAX >> 20);
    }
    size_t cap = 1 << 16, n = 0, got;
    char *buf = k3_xmalloc(cap);
    while ((got = fread(buf + n, 1, cap - n, f)) > 0) {
        n += got;
        if (n > K3_REPLAY_FILE_MAX) break;
        if (n == cap) buf = k3_xrealloc(buf, cap *= 2);
    }
    int bad = ferror(f), rc;
    fclose(f);
    if (bad)
        rc = k3_seterr("%s: cannot read (a directory, or an I/O error)", name);
    else if (n > K3_REPLAY_FILE_MAX)
        rc = k3_seterr("%s: larger than %u MiB", name, K3_REPLAY_FILE_MAX >> 20);
    else
        rc = k3_replay_parse(path, buf, n, out);
    free(buf);
    return rc;
}

void k3_replay_doc_free(k3_replay_doc *d) {
    for (int i = 0; i < d->n; i++) free(d->items[i].prompt), free(d->items[i].answer);
    free(d->items);
    d->items = NULL;
    d->n = 0; /* the name stays, for a message after the free */
}

k3_replay_text *k3_replay_tokenize(const k3_replay_doc *d, const k3_tokenizer *tok,
                                   size_t max_answer) {
    const char *name = d->name;
    k3_replay_text *L = k3_xcalloc((size_t)d->n, sizeof *L);
    for (int i = 0; i < d->n; i++) {
        const k3_replay_item *it = &d->items[i];
        k3_replay_text *r = &L[i];
        int rc = k3_tok_encode(tok, it->prompt, it->prompt_len, 0, &r->p, &r->np) ||
                 k3_tok_encode(tok, it->answer, it->answer_len, 0, &r->a, &r->na);
        if (rc) k3_preferr("%s:%d", name, it->line);
        if (!rc && max_answer && r->na > max_answer) r->na = max_answer;
        if (!rc && r->na < 2)
            rc = k3_seterr("%s:%d: \"answer\" has %zu token%s, a replay needs at least 2", name,
                           it->line, r->na, r->na == 1 ? "" : "s");
        if (rc) return k3_replay_texts_free(L, d->n), NULL;
    }
    return L;
}

void k3_replay_texts_free(k3_replay_text *L, int n) {
    for (int i = 0; L && i < n; i++) free(L[i].p), free(L[i].a);
    free(L);
}
