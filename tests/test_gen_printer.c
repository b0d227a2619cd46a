/* test_gen_printer.c — how generated text is shown (src/gen/printer.h):
 * markers stripped even when split across pieces, reasoning and answer
 * separated (plain headers off a terminal, dim on one), control characters
 * made harmless on a terminal, tool calls listed. */
#include "t.h"
#include "xtml_form.h"

#include "gen/printer.h"

#include <stdio.h>

static const char *model_output =
    "let me think<|close|>think<|sep|><|open|>response<|sep|>Hello there"
    "<|close|>response<|sep|><|close|>message<|sep|>";

/* Show `text` (spelled; generated with control tokens) cut into pieces of
 * `chunk` bytes of token form; return what was printed (malloc'd). */
static char *show(const char *text, size_t chunk, int tty, k3_chan_state initial) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    k3_xtml x;
    k3_xtml_init(&x, NULL);
    k3_printer *p = k3_printer_new(f, tty, &x, initial);
    size_t n;
    char *t = tf_len(text, &n);
    for (size_t i = 0; i < n; i += chunk) {
        size_t end = i + chunk < n ? i + chunk : n, start = i;
        for (size_t k = i; k <= end; k++) /* control bytes one by one, text in runs */
            if (k == end || k3_xtml_ctrl_of_byte((unsigned char)t[k]) >= 0) {
                if (k > start) k3_printer_push(p, t + start, k - start);
                if (k < end)
                    k3_printer_push_ctrl(p,
                                         (k3_xtml_ctrl)k3_xtml_ctrl_of_byte((unsigned char)t[k]));
                start = k + 1;
            }
    }
    free(t);
    k3_printer_finish(p);
    k3_printer_free(p);
    fclose(f);
    return buf;
}

TEST(plain_output_separates_reasoning_and_answer) {
    for (size_t chunk = 1; chunk <= 9; chunk++) {
        char *out = show(model_output, chunk, 0, K3_CHAN_REASONING);
        CHECK(!strcmp(out, "[thinking]\nlet me think\n[answer]\nHello there\n"), "chunk %zu: '%s'",
              chunk, out);
        free(out);
    }
}

TEST(content_only_has_no_headers) {
    char *out = show("Hi<|close|>response<|sep|><|close|>message<|sep|>", 3, 0, K3_CHAN_CONTENT);
    CHECK(!strcmp(out, "Hi\n"), "'%s'", out);
    free(out);
    out = show("", 1, 0, K3_CHAN_CONTENT);
    CHECK(!strcmp(out, ""), "nothing generated prints nothing: '%s'", out);
    free(out);
}

TEST(terminal_dims_reasoning_and_neutralises_controls) {
    char *out = show(model_output, 4, 1, K3_CHAN_REASONING);
    CHECK(!strcmp(out, "\033[2mlet me think\033[0m\n\nHello there\n"), "'%s'", out);
    free(out);
    out = show("a\033[31mb\x07"
               "c\td\n",
               2, 1, K3_CHAN_CONTENT);
    CHECK(!strcmp(out, "a\xef\xbf\xbd[31mb\xef\xbf\xbd"
                       "c\td\n"),
          "'%s'", out);
    free(out);
    out = show("a\033b", 1, 0, K3_CHAN_CONTENT); /* not a terminal: bytes as generated */
    CHECK(!strcmp(out, "a\033b\n"));
    free(out);
}

TEST(tool_calls_are_listed) {
    const char *t = "<|close|>think<|sep|><|open|>response<|sep|><|close|>response<|sep|>"
                    "<|open|>tools<|sep|><|open|>call tool=\"get_weather\" index=\"1\"<|sep|>"
                    "<|open|>argument key=\"city\" type=\"string\"<|sep|>Tokyo<|close|>argument"
                    "<|sep|><|close|>call<|sep|><|close|>tools<|sep|><|close|>message<|sep|>";
    char *out = show(t, 5, 0, K3_CHAN_REASONING);
    CHECK(strstr(out, "[tool call] get_weather {\"city\": \"Tokyo\"}\n") != NULL, "'%s'", out);
    CHECK(!strstr(out, "<|"), "a marker leaked: '%s'", out);
    free(out);
}

/* Marker spellings the model writes as ordinary text are printed as text. */
TEST(marker_text_is_printed) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    k3_xtml x;
    k3_xtml_init(&x, NULL);
    k3_printer *p = k3_printer_new(f, 0, &x, K3_CHAN_CONTENT);
    const char *s = "a<|open|>think<|sep|>b<|open|>tools<|sep|><|open|>call tool=\"f\"<|sep|>"
                    "<|close|>call<|sep|>";
    k3_printer_push(p, s, strlen(s));
    k3_printer_finish(p);
    k3_printer_free(p);
    fclose(f);
    CHECK(len == strlen(s) + 1 && !strncmp(buf, s, strlen(s)) && !strstr(buf, "[tool call]"),
          "'%s'", buf);
    free(buf);
}

int main(void) {
    RUN(plain_output_separates_reasoning_and_answer);
    RUN(content_only_has_no_headers);
    RUN(terminal_dims_reasoning_and_neutralises_controls);
    RUN(tool_calls_are_listed);
    RUN(marker_text_is_printed);
    return t_done();
}
