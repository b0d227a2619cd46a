/* fuzz_replay_file.c — libFuzzer target for the replay corpus reader
 * (k3 bench --replay FILE.jsonl, src/gen/replay_file.h). Input: the file's
 * bytes. A read either succeeds with every line's strings whole and line
 * numbers increasing, or fails with nothing kept and a one-line message that
 * names the file and is valid UTF-8 without control characters. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "base/utf8safe.h"
#include "gen/replay_file.h"

static void check_message(void) {
    const char *m = k3_errmsg();
    size_t n = strlen(m);
    if (strncmp(m, "fuzz.jsonl:", 11) || !k3_utf8_valid(m, n)) abort();
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)m[i] < 0x20 || m[i] == 0x7f) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    size_t lines = 1;
    for (size_t i = 0; i < size; i++) lines += data[i] == '\n';
    k3_replay_doc d;
    memset(&d, 0xa5, sizeof d); /* the parser must set every field */
    if (k3_replay_parse("fuzz.jsonl", (const char *)data, size, &d)) {
        if (d.n || d.items) abort();
        check_message();
        return 0;
    }
    if (d.n < 1 || (size_t)d.n > lines) abort();
    for (int i = 0; i < d.n; i++) {
        const k3_replay_item *it = &d.items[i];
        if (it->line < 1 || (size_t)it->line > lines || (i && it->line <= d.items[i - 1].line))
            abort();
        if (it->prompt[it->prompt_len] || it->answer[it->answer_len]) abort();
        /* jansson hands out only valid UTF-8 */
        if (!k3_utf8_valid(it->prompt, it->prompt_len) ||
            !k3_utf8_valid(it->answer, it->answer_len))
            abort();
    }
    k3_replay_doc_free(&d);
    if (d.n || d.items) abort();
    return 0;
}
