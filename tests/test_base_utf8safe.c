/* test_base_utf8safe.c — UTF-8-safe escaping/truncation (base/utf8safe.h): the
 * output is always valid UTF-8, NUL-terminated, within the buffer, cut only on
 * character boundaries; invalid bytes and (in log mode) control characters
 * become \xHH. Checked exhaustively over every cut point of awkward inputs. */
#include "base/utf8safe.h"
#include "t.h"

TEST(valid_basics) {
    CHECK(k3_utf8_valid("", 0));
    CHECK(k3_utf8_valid("abc", 3));
    CHECK(k3_utf8_valid("\xc3\xa9", 2));
    CHECK(k3_utf8_valid("\xf0\x9f\x98\x80", 4));
    CHECK(!k3_utf8_valid("\xc3", 1));             /* cut */
    CHECK(!k3_utf8_valid("\xff", 1));             /* never valid */
    CHECK(!k3_utf8_valid("\xc0\xaf", 2));         /* overlong */
    CHECK(!k3_utf8_valid("\xed\xa0\x80", 3));     /* surrogate */
    CHECK(!k3_utf8_valid("\xf4\x90\x80\x80", 4)); /* > U+10FFFF */
    CHECK(k3_utf8_char_len("\xe2\x82\xac", 3) == 3);
    CHECK(k3_utf8_char_len("\xe2\x82\xac", 2) == 0);
}

TEST(escape_invalid_bytes) {
    char out[64];
    size_t n = k3_utf8_escape(out, sizeof out, "/\xff", 2, 0);
    CHECK(!strcmp(out, "/\\xff") && n == 5, "got '%s'", out);
    k3_utf8_escape(out, sizeof out, "G\xc3T", 3, 0);
    CHECK(!strcmp(out, "G\\xc3T"), "got '%s'", out);
    k3_utf8_escape(out, sizeof out, "caf\xc3\xa9", 5, 0); /* valid: unchanged */
    CHECK(!strcmp(out, "caf\xc3\xa9"), "got '%s'", out);
    k3_utf8_escape(out, sizeof out, NULL, 5, 0);
    CHECK(!strcmp(out, ""));
}

TEST(escape_control_for_logs) {
    char out[64];
    k3_utf8_escape(out, sizeof out, "/x\nforged\x1b[31m", 14, K3_UTF8_CTRL);
    CHECK(!strcmp(out, "/x\\x0aforged\\x1b[31m"), "got '%s'", out);
    k3_utf8_escape(out, sizeof out,
                   "a\xc2\x9b"
                   "b\x7f",
                   5, K3_UTF8_CTRL); /* C1 CSI, DEL */
    CHECK(!strcmp(out, "a\\xc2\\x9bb\\x7f"), "got '%s'", out);
    k3_utf8_escape(out, sizeof out, "a\nb", 3, 0); /* message mode keeps them (JSON escapes) */
    CHECK(!strcmp(out, "a\nb"));
}

/* Every cap from 1 to 40 over inputs mixing 1-4 byte characters, invalid
 * bytes and controls: valid, within cap, and a prefix of the uncut escape. */
TEST(truncation_on_boundaries) {
    static const char *inputs[] = {
        "\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9",
        "a\xf0\x9f\x98\x80"
        "b\xe2\x82\xac\xff\xc3\n\x1b\xf0\x9f\x98\x80\xe2\x82\xac"
        "cdef",
        "\xff\xfe\xfd\xfc\xfb\xfa\xf9\xf8\xf7\xf6\xf5",
    };
    for (size_t t = 0; t < sizeof inputs / sizeof *inputs; t++) {
        size_t len = strlen(inputs[t]);
        for (int flags = 0; flags < 2; flags++) {
            char full[256];
            size_t nf = k3_utf8_escape(full, sizeof full, inputs[t], len, flags);
            CHECK(k3_utf8_valid(full, nf));
            for (size_t cap = 1; cap <= 40; cap++) {
                char out[64];
                memset(out, 'Z', sizeof out);
                size_t n = k3_utf8_escape(out, cap, inputs[t], len, flags);
                CHECK(n < cap && out[n] == 0 && strlen(out) == n, "cap %zu", cap);
                CHECK(out[cap] == 'Z', "wrote past cap %zu", cap);
                CHECK(k3_utf8_valid(out, n), "input %zu cap %zu: invalid", t, cap);
                if (n == nf) {
                    CHECK(!strcmp(out, full));
                } else if (cap >= 4) { /* cut: a prefix of the full escape, then "..." */
                    CHECK(n >= 3 && !strcmp(out + n - 3, "..."), "cap %zu '%s'", cap, out);
                    CHECK(!strncmp(out, full, n - 3), "cap %zu not a prefix", cap);
                    CHECK(n + 4 + 4 > cap, "cap %zu: cut too early (%zu)", cap, n); /* tight */
                }
            }
        }
    }
}

TEST(snprintf_any_bytes) {
    char out[32];
    char big[600];
    memset(big, 'a', 199);
    memcpy(big + 199, "\xc3\xa9", 3);
    size_t n = k3_utf8_snprintf(out, sizeof out, 0, "model '%s'", big);
    CHECK(k3_utf8_valid(out, n) && n < sizeof out);
    n = k3_utf8_snprintf(out, sizeof out, 0, "%.200s", big); /* precision cuts the é */
    CHECK(k3_utf8_valid(out, n));
    char big2[1024];
    for (int i = 0; i < 400; i++) memcpy(big2 + 2 * i, "\xc3\xa9", 2);
    big2[800] = 0;
    char msg[512];
    n = k3_utf8_snprintf(msg, sizeof msg, 0, "role '%s'", big2);
    CHECK(k3_utf8_valid(msg, n) && n < sizeof msg && !strcmp(msg + n - 3, "..."));
}

int main(void) {
    RUN(valid_basics);
    RUN(escape_invalid_bytes);
    RUN(escape_control_for_logs);
    RUN(truncation_on_boundaries);
    RUN(snprintf_any_bytes);
    return t_done();
}
