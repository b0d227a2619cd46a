/* replay_file.h — the corpus of the replay benchmark (k3 bench --replay
 * FILE.jsonl): one JSON object a line with the string fields "prompt" and
 * "answer", read and checked here, then tokenized for gen/replay.h.
 *
 * The file is hostile input: every way a line can be wrong (not JSON, not an
 * object, a field missing or not a string, a number jansson cannot hold,
 * bytes that are not UTF-8, an answer too short to replay) is an error
 * naming the file, the line and, where there is one, the field. Blank lines
 * (spaces, tabs, a CR) are skipped; a CR before each newline is allowed;
 * other keys are ignored; a string may hold NUL (\u0000). */
#ifndef K3_GEN_REPLAY_FILE_H
#define K3_GEN_REPLAY_FILE_H

#include "text/tokenizer.h"

#include <stddef.h>
#include <stdint.h>

/* Files larger than this are refused (a corpus is text, read whole). */
#define K3_REPLAY_FILE_MAX (256u << 20)

/* One line of the file. The strings are NUL-terminated and may also hold
 * NUL bytes, so their lengths are what counts. */
typedef struct {
    char *prompt, *answer;
    size_t prompt_len, answer_len;
    int line; /* 1-based line number in the file */
} k3_replay_item;

typedef struct {
    k3_replay_item *items;
    int n;          /* >= 1 after a successful read */
    char name[256]; /* the file's name as messages give it: control bytes and
                       bytes that are not UTF-8 spelled \xHH, so an error is one
                       printable line whatever the path holds */
} k3_replay_doc;

/* One line of a replay file, tokenized. */
typedef struct {
    int32_t *p, *a; /* prompt and answer ids */
    size_t np, na;
} k3_replay_text;

/* Parse text[0..len) (any bytes) as the file `name` (used in messages).
 * 0, or -1 + k3_errmsg "NAME:LINE: ..." with *out empty (but its name). */
int k3_replay_parse(const char *name, const char *text, size_t len, k3_replay_doc *out);
/* Read and parse the file at path. 0, or -1 + k3_errmsg naming it. */
int k3_replay_read(const char *path, k3_replay_doc *out);
void k3_replay_doc_free(k3_replay_doc *d);

/* Every item of d tokenized (no special tokens), each answer cut to
 * max_answer tokens (0: whole); an answer needs >= 2 tokens. d->n texts, or
 * NULL + k3_errmsg "NAME:LINE: ...". */
k3_replay_text *k3_replay_tokenize(const k3_replay_doc *d, const k3_tokenizer *tok,
                                   size_t max_answer);
void k3_replay_texts_free(k3_replay_text *L, int n);

#endif
