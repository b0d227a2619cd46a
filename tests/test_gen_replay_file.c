/* test_gen_replay_file.c — the replay corpus reader and the --cost list
 * parser of k3 bench (src/gen/replay_file.h, src/gen/draft_study.h): what a
 * good file or list gives, and for every way one can be wrong, the exact
 * message (file, line, field) and that nothing is kept. */
#include "t.h"

#include "base/err.h"
#include "gen/draft_study.h"
#include "gen/replay_file.h"

#include <stdio.h>
#include <unistd.h>

/* Parse text as "f.jsonl"; 0 or -1. */
static int parse(const char *text, size_t len, k3_replay_doc *d) {
    return k3_replay_parse("f.jsonl", text, len, d);
}

/* text must fail with exactly the message want, keeping nothing. */
static void refused(const char *text, size_t len, const char *want) {
    k3_replay_doc d;
    int rc = parse(text, len, &d);
    CHECK(rc == -1, "accepted: %s", text);
    CHECK(!d.n && !d.items, "kept %d items", d.n);
    CHECK(!strcmp(k3_errmsg(), want), "message '%s', want '%s'", k3_errmsg(), want);
}
#define REFUSED(lit, want) refused(lit, sizeof lit - 1, want)

TEST(replay_good_lines) {
    static const char text[] =
        "{\"prompt\": \"a\\\"b\\\\c\\n\", \"answer\": \"caf\\u00e9 \\ud83d\\ude00\", \"x\": "
        "[1]}\r\n"
        "\r\n  \t\n"
        "{\"prompt\": \"\", \"answer\": \"n\\u0000l\"}"; /* no newline at the end */
    k3_replay_doc d;
    CHECK(parse(text, sizeof text - 1, &d) == 0, "%s", k3_errmsg());
    CHECK(d.n == 2, "%d lines", d.n);
    if (d.n != 2) return;
    CHECK(d.items[0].line == 1 && d.items[1].line == 4, "lines %d %d", d.items[0].line,
          d.items[1].line);
    CHECK(!strcmp(d.items[0].prompt, "a\"b\\c\n") && d.items[0].prompt_len == 6);
    CHECK(!strcmp(d.items[0].answer, "caf\xc3\xa9 \xf0\x9f\x98\x80"));
    CHECK(d.items[1].prompt_len == 0 && d.items[1].answer_len == 3 &&
          !memcmp(d.items[1].answer, "n\0l", 4));
    k3_replay_doc_free(&d);
    CHECK(!d.n && !d.items);
}

TEST(replay_bad_lines) {
    REFUSED("", "f.jsonl: no lines (each line is {\"prompt\": ..., \"answer\": ...})");
    REFUSED("\n \r\n\t\n", "f.jsonl: no lines (each line is {\"prompt\": ..., \"answer\": ...})");
    REFUSED("{\"prompt\": \"a\", \"answer\": \"bc\"}\nnot json\n",
            "f.jsonl:2: invalid token near 'not'");
    REFUSED("\n{\"prompt\": \"a\"}\n", "f.jsonl:2: missing \"answer\" (a string)");
    REFUSED("{\"answer\": \"a\"}", "f.jsonl:1: missing \"prompt\" (a string)");
    REFUSED("{\"prompt\": 7, \"answer\": \"a\"}",
            "f.jsonl:1: \"prompt\" must be a string, not a number");
    REFUSED("{\"prompt\": \"a\", \"answer\": null}",
            "f.jsonl:1: \"answer\" must be a string, not null");
    REFUSED("{\"prompt\": \"a\", \"answer\": [\"b\"]}",
            "f.jsonl:1: \"answer\" must be a string, not an array");
    REFUSED("[1, 2]", "f.jsonl:1: a line must be a JSON object {\"prompt\": ..., \"answer\": ...}, "
                      "not an array");
    REFUSED("42", "f.jsonl:1: a line must be a JSON object {\"prompt\": ..., \"answer\": ...}, "
                  "not a number");
    REFUSED("\"s\"", "f.jsonl:1: a line must be a JSON object {\"prompt\": ..., \"answer\": ...}, "
                     "not a string");
    REFUSED("{\"prompt\": \"a\", \"answer\": \"b\", \"n\": 123456789012345678901234567890}",
            "f.jsonl:1: too big integer");
    REFUSED("{\"prompt\": \"a\", \"answer\": \"b\", \"n\": 1e999}",
            "f.jsonl:1: real number overflow near '1e999'");
    REFUSED("{\"prompt\": \"a\", \"prompt\": \"b\", \"answer\": \"c\"}",
            "f.jsonl:1: duplicate object key near '\"prompt\"'");
    REFUSED("{\"prompt\": \"a\", \"answer\": \"\\ud800\"}",
            "f.jsonl:1: invalid Unicode '\\uD800' near '\"\\ud800\"'");
    REFUSED("{\"prompt\": \"a\", \"answer\": \"b\"} x", "f.jsonl:1: end of file expected near 'x'");
    /* raw bytes jansson quotes back are escaped: a NUL, a control byte, broken UTF-8 */
    REFUSED("{\"prompt\": \"a\0\", \"answer\": \"b\"}",
            "f.jsonl:1: control character 0x0 near '\"a'");
    REFUSED("{\"prompt\": \"\x1b[2J\", \"answer\": \"b\"}",
            "f.jsonl:1: control character 0x1b near '\"'");
    REFUSED("{\"prompt\": \"\xff\", \"answer\": \"b\"}",
            "f.jsonl:1: unable to decode byte 0xff near '\"'");
}

/* The file's name in a message is one printable line whatever it holds. */
TEST(replay_name_escaped) {
    k3_replay_doc d;
    CHECK(k3_replay_parse("a\nb\x1b\xff.jsonl", "[1]", 3, &d) == -1);
    CHECK(!strcmp(k3_errmsg(), "a\\x0ab\\x1b\\xff.jsonl:1: a line must be a JSON object "
                               "{\"prompt\": ..., \"answer\": ...}, not an array"),
          "%s", k3_errmsg());
    CHECK(k3_replay_read("/nonexistent/\n", &d) == -1);
    CHECK(!strcmp(k3_errmsg(), "/nonexistent/\\x0a: cannot open: No such file or directory"), "%s",
          k3_errmsg());
}

/* A file on disk: one that cannot be opened, a directory, one too large. */
TEST(replay_files) {
    k3_replay_doc d;
    CHECK(k3_replay_read("/nonexistent/r.jsonl", &d) == -1 && !d.n);
    CHECK(!strcmp(k3_errmsg(), "/nonexistent/r.jsonl: cannot open: No such file or directory"),
          "%s", k3_errmsg());
    CHECK(k3_replay_read("/", &d) == -1 && !d.n);
    CHECK(!strcmp(k3_errmsg(), "/: cannot read (a directory, or an I/O error)"), "%s", k3_errmsg());
    char path[] = "/tmp/k3-replay-XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0 && ftruncate(fd, (off_t)K3_REPLAY_FILE_MAX + 1) == 0); /* sparse */
    CHECK(k3_replay_read(path, &d) == -1 && !d.n);
    char want[128];
    snprintf(want, sizeof want, "%s: larger than 256 MiB", path);
    CHECK(!strcmp(k3_errmsg(), want), "%s", k3_errmsg());
    CHECK(ftruncate(fd, 0) == 0 && write(fd, "{\"prompt\":\"p\",\"answer\":\"ab\"}\n", 29) == 29);
    CHECK(k3_replay_read(path, &d) == 0 && d.n == 1, "%s", k3_errmsg());
    k3_replay_doc_free(&d);
    close(fd);
    unlink(path);
}

/* arg must fail with exactly want. */
static void cost_refused(const char *arg, const char *want) {
    k3_study_cost c;
    CHECK(k3_study_cost_parse(arg, &c) == -1, "accepted '%s'", arg);
    CHECK(!strcmp(k3_errmsg(), want), "'%s': message '%s', want '%s'", arg, k3_errmsg(), want);
}

TEST(cost_good) {
    k3_study_cost c;
    CHECK(k3_study_cost_parse("h100-bf16=1.5,2,.25,1e-6,1e6", &c) == 0, "%s", k3_errmsg());
    CHECK(!strcmp(c.name, "h100-bf16") && c.n == 5 && c.c[0] == 1 && c.c[1] == 1.5 &&
          c.c[3] == 0.25 && c.c[4] == 1e-6 && c.c[5] == 1e6);
    CHECK(k3_study_cost_parse("abcdefghijklmnopqrstuvw=1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16",
                              &c) == 0 &&
              c.n == 16 && c.c[16] == 16,
          "%s", k3_errmsg());
}

TEST(cost_bad) {
    const char *name = "--cost expects NAME=c1,c2,... (NAME 1..23 printable characters, no "
                       "spaces), got ";
    char want[256];
    static const char *bad_names[] = {"1,2", "=1", "a b=1", "abcdefghijklmnopqrstuvwx=1", "\t=1"};
    static const char *shown[] = {"'1,2'", "'=1'", "'a b=1'", "'abcdefghijklmnopqrstuvwx=1'",
                                  "'\\x09=1'"};
    for (int i = 0; i < 5; i++) {
        snprintf(want, sizeof want, "%s%s", name, shown[i]);
        cost_refused(bad_names[i], want);
    }
    cost_refused("n\xff=1", "--cost expects NAME=c1,c2,... (NAME 1..23 printable characters, no "
                            "spaces), got 'n\\xff=1'");
    const char *range = "expected a number (costs > 0, 1e-06..1e+06), got";
    static const char *bad[] = {"a=",    "a=1,,2", "a=1,",   "a=0",  "a=-2", "a=1e-7", "a=1e999",
                                "a=nan", "a=inf",  "a=0x10", "a= 1", "a=1x", "a=1\xc3"};
    static const char *item[] = {"1 ''",     "2 ''",      "2 ''",      "1 '0'",   "1 '-2'",
                                 "1 '1e-7'", "1 '1e999'", "1 'nan'",   "1 'inf'", "1 '0x10'",
                                 "1 ' 1'",   "1 '1x'",    "1 '1\\xc3'"};
    for (int i = 0; i < 13; i++) {
        const char *sp = strchr(item[i], ' ');
        snprintf(want, sizeof want, "--cost a: cost %.*s: %s %s", (int)(sp - item[i]), item[i],
                 range, sp + 1);
        cost_refused(bad[i], want);
    }
    cost_refused("a=1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17", "--cost a: more than 16 costs");
}

int main(void) {
    RUN(replay_good_lines);
    RUN(replay_bad_lines);
    RUN(replay_name_escaped);
    RUN(replay_files);
    RUN(cost_good);
    RUN(cost_bad);
    return t_done();
}
