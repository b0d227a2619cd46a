/* test_gen_st_write.c — the safetensors writer (src/io/st_write.h): round trip
 * through a small independent reader, alignment, sharding + index, errors. */
#include "t.h"

#include "base/err.h"
#include "base/mem.h"
#include "io/st_write.h"

#include <jansson.h>
#include <stdint.h>
#include <sys/stat.h>
#include <unistd.h>

static char tmpdir[256];

static void make_tmpdir(void) {
    snprintf(tmpdir, sizeof tmpdir, "/tmp/k3-test-stw-XXXXXX");
    if (!mkdtemp(tmpdir)) exit(1);
}

static char *path_in(const char *file) {
    static char buf[512];
    snprintf(buf, sizeof buf, "%s/%s", tmpdir, file);
    return buf;
}

/* Minimal reader: header JSON + data pointer; validates the contiguity rule. */
typedef struct {
    char *buf;
    size_t len;
    json_t *hdr;
    const uint8_t *data;
    uint64_t data_len;
} st_file;

static int st_read(const char *path, st_file *f) {
    memset(f, 0, sizeof *f);
    f->buf = k3_read_file(path, &f->len);
    if (!f->buf || f->len < 8) return -1;
    uint64_t n = 0;
    for (int i = 0; i < 8; i++) n |= (uint64_t)(uint8_t)f->buf[i] << (8 * i);
    if (n % 8 || 8 + n > f->len) return -1;
    f->hdr = json_loadb(f->buf + 8, n, 0, NULL);
    f->data = (const uint8_t *)f->buf + 8 + n;
    f->data_len = f->len - 8 - n;
    return f->hdr ? 0 : -1;
}

static void st_free(st_file *f) {
    json_decref(f->hdr);
    free(f->buf);
}

/* Data of one tensor, checking dtype and shape; NULL if absent/mismatched. */
static const uint8_t *st_get(const st_file *f, const char *name, const char *dtype, int ndim,
                             const int64_t *shape, uint64_t *bytes) {
    json_t *e = json_object_get(f->hdr, name);
    if (!e || strcmp(json_string_value(json_object_get(e, "dtype")), dtype)) return NULL;
    json_t *sh = json_object_get(e, "shape");
    if ((int)json_array_size(sh) != ndim) return NULL;
    for (int i = 0; i < ndim; i++)
        if (json_integer_value(json_array_get(sh, i)) != shape[i]) return NULL;
    json_t *off = json_object_get(e, "data_offsets");
    uint64_t a = json_integer_value(json_array_get(off, 0)),
             b = json_integer_value(json_array_get(off, 1));
    if (a > b || b > f->data_len) return NULL;
    *bytes = b - a;
    return f->data + a;
}

/* The safetensors library's rule: offsets sorted are contiguous and end at EOF. */
static int st_contiguous(const st_file *f) {
    uint64_t end = 0;
    const char *k;
    json_t *v;
    json_object_foreach(f->hdr, k, v) {
        if (!strcmp(k, "__metadata__")) continue;
        json_t *off = json_object_get(v, "data_offsets");
        if ((uint64_t)json_integer_value(json_array_get(off, 0)) != end) return 0;
        end = json_integer_value(json_array_get(off, 1));
    }
    return end == f->data_len;
}

TEST(round_trip_mixed_dtypes) {
    char *p = path_in("a.safetensors");
    k3_stw *w = k3_stw_open(p);
    uint16_t bf[3] = {1, 2, 3};
    float f32[6] = {1.5f, -2, 3, 4, 5, 6};
    uint8_t u8[5] = {9, 8, 7, 6, 5};
    double f64[1] = {3.25};
    CHECK(!k3_stw_add(w, "odd.bf16", "BF16", (int64_t[]){3}, 1, bf, sizeof bf), "%s", k3_errmsg());
    CHECK(!k3_stw_add(w, "m.f32", "F32", (int64_t[]){2, 3}, 2, f32, sizeof f32));
    CHECK(!k3_stw_add(w, "bytes", "U8", (int64_t[]){5, 1, 1}, 3, u8, sizeof u8));
    CHECK(!k3_stw_add(w, "scalar", "F64", NULL, 0, f64, sizeof f64));
    CHECK(!k3_stw_add(w, "empty", "F32", (int64_t[]){0, 4}, 2, NULL, 0));
    CHECK(k3_stw_count(w) == 5);
    CHECK(!k3_stw_close(w), "%s", k3_errmsg());

    st_file f;
    CHECK(!st_read(p, &f), "cannot read back %s", p);
    if (!f.hdr) return;
    CHECK(st_contiguous(&f), "data offsets not contiguous / not covering the file");
    CHECK(!strcmp(
        json_string_value(json_object_get(json_object_get(f.hdr, "__metadata__"), "format")),
        "pt"));
    uint64_t n = 0;
    const uint8_t *d = st_get(&f, "odd.bf16", "BF16", 1, (int64_t[]){3}, &n);
    CHECK(d && n == 6 && !memcmp(d, bf, 6));
    d = st_get(&f, "m.f32", "F32", 2, (int64_t[]){2, 3}, &n);
    CHECK(d && n == 24 && !memcmp(d, f32, 24));
    CHECK(d && ((uintptr_t)(d - f.data) + 8) % 4 == 0, "f32 tensor not 4-aligned in the file");
    d = st_get(&f, "bytes", "U8", 3, (int64_t[]){5, 1, 1}, &n);
    CHECK(d && n == 5 && !memcmp(d, u8, 5));
    d = st_get(&f, "scalar", "F64", 0, NULL, &n);
    CHECK(d && n == 8 && !memcmp(d, f64, 8));
    d = st_get(&f, "empty", "F32", 2, (int64_t[]){0, 4}, &n);
    CHECK(d && n == 0);
    CHECK((8 + (f.data - (const uint8_t *)f.buf - 8)) % 8 == 0, "header not padded to 8");
    st_free(&f);
    unlink(p);
}

TEST(rejects_bad_tensors) {
    char *p = path_in("bad.safetensors");
    k3_stw *w = k3_stw_open(p);
    float x[4] = {0};
    CHECK(k3_stw_add(w, "x", "F31", (int64_t[]){4}, 1, x, 16) == -1);
    CHECK(strstr(k3_errmsg(), "F31") && strstr(k3_errmsg(), "x"), "%s", k3_errmsg());
    CHECK(k3_stw_add(w, "x", "F32", (int64_t[]){5}, 1, x, 16) == -1);
    CHECK(strstr(k3_errmsg(), "needs 20"), "%s", k3_errmsg());
    CHECK(k3_stw_add(w, "x", "F32", (int64_t[]){-4}, 1, x, 16) == -1);
    CHECK(k3_stw_add(w, "x", "F32", (int64_t[]){4}, 9, x, 16) == -1);
    CHECK(k3_stw_add(w, "__metadata__", "F32", (int64_t[]){4}, 1, x, 16) == -1);
    CHECK(!k3_stw_add(w, "x", "F32", (int64_t[]){4}, 1, x, 16));
    CHECK(k3_stw_add(w, "x", "F32", (int64_t[]){4}, 1, x, 16) == -1);
    CHECK(strstr(k3_errmsg(), "twice"), "%s", k3_errmsg());
    k3_stw_abort(w);
    CHECK(access(p, F_OK) != 0, "abort left a file behind");
    w = k3_stw_open("/nonexistent-dir/x.safetensors");
    CHECK(k3_stw_add(w, "x", "F32", (int64_t[]){4}, 1, x, 16) == -1);
    CHECK(strstr(k3_errmsg(), "/nonexistent-dir/"), "%s", k3_errmsg());
    CHECK(k3_stw_close(w) == -1);
}

static int exists(const char *file) {
    return access(path_in(file), F_OK) == 0;
}

TEST(sharded_directory_and_index) {
    k3_stw_dir *d = k3_stwd_open(tmpdir, 100);
    uint8_t buf[80];
    for (int i = 0; i < 80; i++) buf[i] = (uint8_t)i;
    /* 60 + 60 > 100 -> new shard; 150 alone > 100 -> its own shard */
    CHECK(!k3_stwd_add(d, "a", "U8", (int64_t[]){60}, 1, buf, 60));
    CHECK(!k3_stwd_add(d, "b", "U8", (int64_t[]){60}, 1, buf + 1, 60));
    CHECK(!k3_stwd_add(d, "c", "U8", (int64_t[]){20}, 1, buf + 2, 20));
    CHECK(!k3_stwd_add(d, "d", "F32", (int64_t[]){20}, 1, buf, 80));
    CHECK(k3_stwd_add(d, "a", "U8", (int64_t[]){1}, 1, buf, 1) == -1);
    CHECK(k3_stwd_shards(d) == 3, "%d shards", k3_stwd_shards(d));
    CHECK(!k3_stwd_close(d), "%s", k3_errmsg());
    CHECK(exists("model-00001-of-00003.safetensors") && exists("model-00003-of-00003.safetensors"));
    CHECK(!exists("model.safetensors") && !exists("model-part-00001.safetensors"));
    json_t *idx = json_load_file(path_in("model.safetensors.index.json"), 0, NULL);
    CHECK(idx != NULL);
    json_t *wm = json_object_get(idx, "weight_map");
    CHECK(!strcmp(json_string_value(json_object_get(wm, "a")), "model-00001-of-00003.safetensors"));
    CHECK(!strcmp(json_string_value(json_object_get(wm, "c")), "model-00002-of-00003.safetensors"));
    CHECK(!strcmp(json_string_value(json_object_get(wm, "d")), "model-00003-of-00003.safetensors"));
    CHECK(json_integer_value(json_object_get(json_object_get(idx, "metadata"), "total_size")) ==
          220);
    json_decref(idx);
    st_file f;
    CHECK(!st_read(path_in("model-00002-of-00003.safetensors"), &f));
    uint64_t n = 0;
    const uint8_t *p = st_get(&f, "c", "U8", 1, (int64_t[]){20}, &n);
    CHECK(p && n == 20 && p[0] == 2 && p[19] == 21);
    CHECK(st_contiguous(&f));
    st_free(&f);
    const char *files[] = {"model-00001-of-00003.safetensors", "model-00002-of-00003.safetensors",
                           "model-00003-of-00003.safetensors", "model.safetensors.index.json"};
    for (int i = 0; i < 4; i++) unlink(path_in(files[i]));
}

TEST(single_shard_is_model_safetensors) {
    k3_stw_dir *d = k3_stwd_open(tmpdir, 0);
    uint16_t x[2] = {7, 8};
    CHECK(!k3_stwd_add(d, "x", "BF16", (int64_t[]){2}, 1, x, 4));
    CHECK(!k3_stwd_close(d), "%s", k3_errmsg());
    CHECK(exists("model.safetensors") && !exists("model.safetensors.index.json"));
    unlink(path_in("model.safetensors"));
}

int main(void) {
    make_tmpdir();
    RUN(round_trip_mixed_dtypes);
    RUN(rejects_bad_tensors);
    RUN(sharded_directory_and_index);
    RUN(single_shard_is_model_safetensors);
    rmdir(tmpdir);
    return t_done();
}
