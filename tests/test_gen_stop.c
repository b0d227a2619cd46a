/* test_gen_stop.c — stop strings over streamed text (src/gen/stop.h): every
 * way of cutting a text into pieces gives the same output as matching on the
 * whole text at once (the reference: strstr on the concatenation). */
#include "t.h"

#include "gen/stop.h"

/* Feed text cut at the given points; collect the output; return hit. */
static int run_pieces(k3_stopper *s, const char *text, const size_t *cuts, int ncuts, char *out,
                      size_t *out_len) {
    size_t pos = 0, n = strlen(text), ol, o = 0;
    int hit = 0;
    for (int i = 0; i <= ncuts && !hit; i++) {
        size_t end = i < ncuts ? cuts[i] : n;
        const char *e = k3_stopper_push(s, text + pos, end - pos, &ol, &hit);
        memcpy(out + o, e, ol);
        o += ol;
        pos = end;
    }
    if (!hit) {
        const char *e = k3_stopper_flush(s, &ol);
        memcpy(out + o, e, ol);
        o += ol;
    }
    *out_len = o;
    return hit;
}

/* Reference. Generation stops at the first piece after which some stop
 * string is complete: the earliest match end e, rounded up to the end c of
 * the piece holding it. The output is the text before the earliest-starting
 * match among those complete by c. cuts: sorted piece ends. */
static size_t reference(const char *text, const char *const *stops, int n, const size_t *cuts,
                        int ncuts, int *hit) {
    size_t len = strlen(text), first_end = len + 1;
    for (int i = 0; i < n; i++) {
        const char *p = strstr(text, stops[i]);
        if (p && (size_t)(p - text) + strlen(stops[i]) < first_end)
            first_end = (size_t)(p - text) + strlen(stops[i]);
    }
    *hit = first_end <= len;
    if (!*hit) return len;
    size_t c = len;
    for (int i = 0; i < ncuts; i++)
        if (cuts[i] >= first_end) {
            c = cuts[i];
            break;
        }
    size_t best = len;
    for (int i = 0; i < n; i++)
        for (const char *p = strstr(text, stops[i]); p; p = strstr(p + 1, stops[i]))
            if ((size_t)(p - text) + strlen(stops[i]) <= c && (size_t)(p - text) < best)
                best = (size_t)(p - text);
    return best;
}

static void check_all_cuts(const char *text, const char *const *stops, int n) {
    size_t len = strlen(text);
    int want_hit;
    size_t want;
    k3_stopper *s = k3_stopper_new(stops, n);
    char out[256];
    /* every single cut point and every pair of cut points */
    for (size_t a = 0; a <= len; a++)
        for (size_t b = a; b <= len; b++) {
            size_t cuts[2] = {a, b}, ol;
            want = reference(text, stops, n, cuts, 2, &want_hit);
            k3_stopper_reset(s);
            int hit = run_pieces(s, text, cuts, 2, out, &ol);
            CHECK(hit == want_hit && ol == want && !memcmp(out, text, want),
                  "'%s' cut at %zu,%zu: hit %d len %zu (want %d %zu)", text, a, b, hit, ol,
                  want_hit, want);
        }
    /* one byte at a time */
    size_t cuts[64], ol;
    for (size_t i = 0; i < len && i < 64; i++) cuts[i] = i + 1;
    want = reference(text, stops, n, cuts, (int)(len < 64 ? len : 64), &want_hit);
    k3_stopper_reset(s);
    int hit = run_pieces(s, text, cuts, (int)(len < 64 ? len : 64), out, &ol);
    CHECK(hit == want_hit && ol == want, "'%s' byte by byte", text);
    k3_stopper_free(s);
}

TEST(stop_strings_across_every_split) {
    const char *one[] = {"END"};
    check_all_cuts("hello END world", one, 1);
    check_all_cuts("EN EN ENDEND", one, 1);
    check_all_cuts("no stop here E", one, 1);
    check_all_cuts("ENEND", one, 1);
    const char *two[] = {"abcd", "bc"};
    check_all_cuts("xxabcdyy", two, 2); /* "bc" completes first, inside "abcd" */
    check_all_cuts("xbcxabcdyy", two, 2);
    check_all_cuts("xxabyy", two, 2);
    const char *over[] = {"aab", "ab"};
    check_all_cuts("aaaab", over, 2);
    const char *utf[] = {"\xe4\xbd\xa0\xe5\xa5\xbd"};
    check_all_cuts("say \xe4\xbd\xa0\xe5\xa5\xbd!", utf, 1);
}

TEST(held_text_is_released_when_it_cannot_match) {
    const char *stops[] = {"STOP"};
    k3_stopper *s = k3_stopper_new(stops, 1);
    size_t ol;
    int hit;
    const char *o = k3_stopper_push(s, "abST", 4, &ol, &hit);
    CHECK(ol == 2 && !memcmp(o, "ab", 2) && !hit, "holds the possible prefix 'ST'");
    o = k3_stopper_push(s, "x", 1, &ol, &hit);
    CHECK(ol == 3 && !memcmp(o, "STx", 3), "released once it cannot match");
    o = k3_stopper_push(s, "STO", 3, &ol, &hit);
    CHECK(ol == 0);
    o = k3_stopper_push(s, "P tail", 6, &ol, &hit);
    CHECK(hit && ol == 0, "stop string completed; nothing after it");
    k3_stopper_free(s);
}

TEST(no_stop_strings_passes_everything) {
    k3_stopper *s = k3_stopper_new(NULL, 0);
    size_t ol;
    int hit;
    const char *o = k3_stopper_push(s, "abc", 3, &ol, &hit);
    CHECK(ol == 3 && !hit && !memcmp(o, "abc", 3));
    o = k3_stopper_flush(s, &ol);
    CHECK(ol == 0);
    k3_stopper_free(s);
    const char *empty[] = {""};
    s = k3_stopper_new(empty, 1);
    o = k3_stopper_push(s, "abc", 3, &ol, &hit);
    CHECK(ol == 3 && !hit, "an empty stop string is ignored");
    k3_stopper_free(s);
}

int main(void) {
    RUN(stop_strings_across_every_split);
    RUN(held_text_is_released_when_it_cannot_match);
    RUN(no_stop_strings_passes_everything);
    return t_done();
}
