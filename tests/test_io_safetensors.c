/* test_io_safetensors.c — strict header validation of safetensors buffers: the
 * good case, and every malformed header the loader must refuse with a clear
 * message (never a crash): truncated file, header length past the end, bad
 * JSON, unknown dtype, wrong byte size, offsets out of range / reversed /
 * overlapping, bad shapes, duplicate names within and across shards. */
#include "base/err.h"
#include "io/safetensors.h"
#include "t.h"

static uint8_t g_buf[4096];

/* header JSON + `data` bytes of payload -> g_buf; returns total length. */
static size_t mk(const char *hdr, size_t data) {
    size_t n = strlen(hdr);
    for (int i = 0; i < 8; i++) g_buf[i] = (uint8_t)((uint64_t)n >> (8 * i));
    memcpy(g_buf + 8, hdr, n);
    for (size_t i = 0; i < data; i++) g_buf[8 + n + i] = (uint8_t)i;
    return 8 + n + data;
}

/* Expect k3_st_add_buffer to fail with a message containing `want`. */
static void reject(const char *hdr, size_t data, const char *want) {
    k3_st st;
    k3_st_init(&st);
    size_t len = mk(hdr, data);
    int rc = k3_st_add_buffer(&st, g_buf, len, "bad.safetensors");
    CHECK(rc == -1, "accepted: %s", hdr);
    CHECK(strstr(k3_errmsg(), want) && strstr(k3_errmsg(), "bad.safetensors"),
          "message \"%s\" lacks \"%s\"", k3_errmsg(), want);
    k3_st_clear(&st);
}

TEST(valid_file_is_read_in_place) {
    k3_st st;
    k3_st_init(&st);
    size_t len =
        mk("{\"__metadata__\":{\"format\":\"pt\"},\"b\":{\"dtype\":\"BF16\",\"shape\":[2,3],"
           "\"data_offsets\":[8,20]},\"a\":{\"dtype\":\"F32\",\"shape\":[2],"
           "\"data_offsets\":[0,8]},\"z\":{\"dtype\":\"U8\",\"shape\":[0],"
           "\"data_offsets\":[20,20]}}  ",
           20);
    CHECK(k3_st_add_buffer(&st, g_buf, len, "ok") == 0, "%s", k3_errmsg());
    CHECK(k3_st_finish(&st) == 0, "%s", k3_errmsg());
    CHECK(st.n == 3);
    const k3_tensor *a = k3_st_find(&st, "a"), *b = k3_st_find(&st, "b");
    CHECK(a && b && !k3_st_find(&st, "c") && !k3_st_find(&st, "__metadata__"));
    if (a && b) {
        CHECK(a->dtype == K3_DT_F32 && a->ndim == 1 && a->shape[0] == 2 && a->bytes == 8);
        CHECK(b->dtype == K3_DT_BF16 && k3_tensor_numel(b) == 6 && b->bytes == 12);
        CHECK(b->data == a->data + 8 && a->data[1] == 1, "points into the buffer");
    }
    k3_st_clear(&st);
}

TEST(truncated_and_header_length) {
    k3_st st;
    k3_st_init(&st);
    CHECK(k3_st_add_buffer(&st, g_buf, 5, "short") == -1 && strstr(k3_errmsg(), "too short"));
    size_t len = mk("{}", 0);
    g_buf[0] = 200; /* header length 200 > file */
    CHECK(k3_st_add_buffer(&st, g_buf, len, "f") == -1 && strstr(k3_errmsg(), "past the end"), "%s",
          k3_errmsg());
    memset(g_buf, 0xff, 8); /* 2^64-1 */
    CHECK(k3_st_add_buffer(&st, g_buf, len, "f") == -1 && strstr(k3_errmsg(), "past the end"));
    /* a file cut inside the data section */
    len = mk("{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]}}", 16);
    CHECK(k3_st_add_buffer(&st, g_buf, len - 3, "cut") == -1 && strstr(k3_errmsg(), "truncated"),
          "%s", k3_errmsg());
    k3_st_clear(&st);
}

TEST(bad_json_and_entries) {
    reject("{\"a\":", 0, "not valid JSON");
    reject("[1,2]", 0, "not a JSON object");
    reject("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},\"a\":{}}", 4, "JSON");
    reject("{\"a\":5}", 0, "not an object");
    reject("{\"a\":{\"shape\":[1],\"data_offsets\":[0,4]}}", 4, "dtype");
    reject("{\"a\":{\"dtype\":\"F7\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4,
           "unknown dtype \"F7\"");
    reject("{\"a\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,4]}}", 4, "shape[0]");
    reject("{\"a\":{\"dtype\":\"F32\",\"shape\":\"x\",\"data_offsets\":[0,4]}}", 4, "shape");
    reject("{\"a\":{\"dtype\":\"F32\",\"shape\":[4611686018427387904,4],\"data_offsets\":[0,4]}}",
           4, "overflows");
    reject("{\"a\":{\"dtype\":\"F32\",\"shape\":[1]}}", 4, "data_offsets");
    reject("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0]}}", 4, "data_offsets");
}

TEST(offsets_and_sizes) {
    reject("{\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}", 8, "expected 12");
    reject("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,16]}}", 12,
           "past the data");
    reject("{\"a\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[8,4]}}", 12, "begin <= end");
    reject("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[-4,0]}}", 12, "begin <= end");
    reject("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
           "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}",
           12, "overlap");
}

TEST(duplicate_names_across_shards) {
    static uint8_t b1[256], b2[256];
    size_t l1 = mk("{\"w\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[0,2]}}", 2);
    memcpy(b1, g_buf, l1);
    size_t l2 = mk("{\"w\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}", 1);
    memcpy(b2, g_buf, l2);
    k3_st st;
    k3_st_init(&st);
    CHECK(k3_st_add_buffer(&st, b1, l1, "s1") == 0 && k3_st_add_buffer(&st, b2, l2, "s2") == 0);
    CHECK(k3_st_finish(&st) == -1 && strstr(k3_errmsg(), "appears twice"), "%s", k3_errmsg());
    k3_st_clear(&st);
}

TEST(dtype_names_round_trip) {
    for (int d = 0; d < K3_DT_COUNT; d++) CHECK(k3_dtype_parse(k3_dtype_name((k3_dtype)d)) == d);
    CHECK(k3_dtype_size(K3_DT_BF16) == 2 && k3_dtype_size(K3_DT_F64) == 8 &&
          k3_dtype_parse("f32") == -1);
}

int main(void) {
    RUN(valid_file_is_read_in_place);
    RUN(truncated_and_header_length);
    RUN(bad_json_and_entries);
    RUN(offsets_and_sizes);
    RUN(duplicate_names_across_shards);
    RUN(dtype_names_round_trip);
    return t_done();
}
