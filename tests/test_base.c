/* test_base.c — base layer and scalar element types: errors, bf16/f16, E2M1/E8M0, wmat rows. */
#include "t.h"

#include <stdint.h>
#include <unistd.h>

#include "base/err.h"
#include "base/mem.h"
#include "quant/dtype.h"
#include "quant/wmat.h"

TEST(err_messages_compose) {
    k3_seterr("tensor %s missing", "x");
    k3_preferr("loading %s", "dir");
    CHECK(!strcmp(k3_errmsg(), "loading dir: tensor x missing"), "got '%s'", k3_errmsg());
}

TEST(bf16_round_trip_and_rounding) {
    CHECK(k3_bf16_to_f32(0x3f80) == 1.0f);
    CHECK(k3_f32_to_bf16(1.0f) == 0x3f80);
    /* 1 + 2^-8 is a tie between 1 and 1+2^-7: round to even (1.0) */
    CHECK(k3_f32_to_bf16(1.00390625f) == 0x3f80, "%04x", k3_f32_to_bf16(1.00390625f));
    CHECK(k3_f32_to_bf16(1.01171875f) == 0x3f82);
    for (int i = 0; i < 65536; i++) {
        float f = k3_bf16_to_f32((uint16_t)i);
        if (f == f) CHECK(k3_f32_to_bf16(f) == (uint16_t)i, "bits %04x", i);
    }
}

TEST(f16_round_trip_all_codes) {
    for (int i = 0; i < 65536; i++) {
        float f = k3_f16_to_f32((uint16_t)i);
        if (f == f) CHECK(k3_f32_to_f16(f) == (uint16_t)i, "bits %04x -> %g", i, f);
    }
    CHECK(k3_f16_to_f32(0x3c00) == 1.0f);
    CHECK(k3_f16_to_f32(0x0001) == ldexpf(1.0f, -24));
}

TEST(mxfp4_table_and_scales) {
    CHECK(k3_e2m1_table[7] == 6.0f && k3_e2m1_table[15] == -6.0f);
    CHECK(k3_e2m1_table[8] == 0.0f && signbit(k3_e2m1_table[8]), "code 8 is -0");
    CHECK(k3_e8m0_to_f32(127) == 1.0f);
    CHECK(k3_e8m0_to_f32(0) == ldexpf(1.0f, -127));
    CHECK(k3_e8m0_to_f32(254) == ldexpf(1.0f, 127));
    CHECK(isnan(k3_e8m0_to_f32(255)));
}

TEST(mxfp4_row_low_nibble_first) {
    uint8_t packed[16] = {0}, scale[1] = {128}; /* scale 2 */
    packed[0] = 0x72;                           /* col0 code 2 (1.0), col1 code 7 (6.0) */
    k3_wmat W = {.fmt = K3_W_MXFP4,
                 .rows = 1,
                 .cols = 32,
                 .data = packed,
                 .row_stride = 16,
                 .scales = scale,
                 .scale_stride = 1,
                 .bits = 4,
                 .group = 32};
    float out[32];
    k3_wmat_row(&W, 0, 0, 32, out);
    CHECK(out[0] == 2.0f && out[1] == 12.0f && out[2] == 0.0f, "%g %g %g", out[0], out[1], out[2]);
}

TEST(proc_field_reads_first_matching_line) {
    char path[] = "/tmp/k3_test_proc_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0, "mkstemp");
    if (fd < 0) return;
    FILE *f = fdopen(fd, "w");
    fputs("MemTotal:       24000 kB\nMemAvailable:   1234 kB\nMemAvailable: 99 kB\n"
          "read_bytes: 18446744073709551615\n",
          f);
    fclose(f);
    CHECK(k3_proc_field(path, "MemAvailable:") == 1234, "first match");
    CHECK(k3_proc_field(path, "MemTotal:") == 24000, "first line");
    CHECK(k3_proc_field(path, "read_bytes:") == UINT64_MAX, "full 64-bit range");
    CHECK(k3_proc_field(path, "Missing:") == 0, "missing key");
    CHECK(k3_proc_field(path, "Mem") == 0, "prefix of a key reads the rest as a number: none");
    unlink(path);
    CHECK(k3_proc_field(path, "MemTotal:") == 0, "missing file");
    /* Two reads of /proc/self/status: RSS may grow between them, so no order is checked. */
    CHECK(k3_peak_rss() > 0 && k3_current_rss() > 0, "VmHWM and VmRSS read");
}

/* k3_big_calloc / k3_big_realloc / k3_big_free: zero-filled at every size
 * (below and above K3_BIG_MIN), blocks from K3_BIG_MIN up on a 2 MiB
 * boundary, realloc keeps the contents across the threshold both ways. */
TEST(big_alloc_zeroed_aligned_realloc) {
    const size_t sizes[] = {1,          4096,           K3_BIG_MIN - 65,
                            K3_BIG_MIN, K3_BIG_MIN + 1, 3 * K3_BIG_MIN + 7};
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
        size_t n = sizes[i];
        unsigned char *p = k3_big_calloc(n);
        CHECK(p, "k3_big_calloc(%zu): %s", n, k3_errmsg());
        if (!p) continue;
        size_t nz = 0;
        for (size_t j = 0; j < n; j++) nz += p[j] != 0;
        CHECK(nz == 0, "k3_big_calloc(%zu): %zu bytes not zero", n, nz);
        if (n >= K3_BIG_MIN)
            CHECK(((uintptr_t)p & ((2u << 20) - 1)) == 0, "k3_big_calloc(%zu) = %p: not on 2 MiB",
                  n, (void *)p);
        for (size_t j = 0; j < n; j++) p[j] = (unsigned char)(j * 7 + i);
        /* grow past the threshold, then shrink below it: the prefix survives */
        size_t up = n * 2 + K3_BIG_MIN, down = n < 100 ? n : 100;
        unsigned char *q = k3_big_realloc(p, up);
        CHECK(q, "k3_big_realloc(%zu -> %zu)", n, up);
        if (!q) {
            k3_big_free(p);
            continue;
        }
        size_t bad = 0;
        for (size_t j = 0; j < n; j++) bad += q[j] != (unsigned char)(j * 7 + i);
        q[up - 1] = 1; /* the grown block is writable to its end */
        unsigned char *r = k3_big_realloc(q, down);
        CHECK(r, "k3_big_realloc(%zu -> %zu)", up, down);
        if (!r) {
            k3_big_free(q);
            continue;
        }
        for (size_t j = 0; j < down; j++) bad += r[j] != (unsigned char)(j * 7 + i);
        CHECK(bad == 0, "size %zu: %zu bytes changed by realloc", n, bad);
        k3_big_free(r);
    }
    k3_big_free(NULL);
}

int main(void) {
    RUN(err_messages_compose);
    RUN(bf16_round_trip_and_rounding);
    RUN(f16_round_trip_all_codes);
    RUN(mxfp4_table_and_scales);
    RUN(mxfp4_row_low_nibble_first);
    RUN(proc_field_reads_first_matching_line);
    RUN(big_alloc_zeroed_aligned_realloc);
    return t_done();
}
