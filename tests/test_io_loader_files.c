/* test_io_loader_files.c — the loader against hostile files and configs:
 * FIFOs and devices instead of files (no hang, no endless read), the JSON size
 * cap, model paths with glob characters, eos_token_id as a list, layer lists
 * that contradict each other, rms_norm_eps, quantization_config, and a shard
 * truncated while mapped (a message naming the file, not a bare SIGBUS). */
#include "helpers.h"
#include "t.h"

#include "base/err.h"
#include "base/mem.h"
#include "io/config.h"
#include "io/safetensors.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static char tmpdir[256];

static void path_in(char *out, size_t cap, const char *name) {
    snprintf(out, cap, "%s/%s", tmpdir, name);
}

/* A valid one-tensor shard: F32 [n]. */
static void write_shard(const char *path, int n) {
    char hdr[256];
    int hl =
        snprintf(hdr, sizeof hdr,
                 "{\"w\":{\"dtype\":\"F32\",\"shape\":[%d],\"data_offsets\":[0,%d]}}", n, 4 * n);
    while (hl % 8) hdr[hl++] = ' ';
    size_t total = 8 + (size_t)hl + 4 * (size_t)n;
    unsigned char *buf = calloc(1, total);
    for (int i = 0; i < 8; i++) buf[i] = (unsigned char)((uint64_t)hl >> (8 * i));
    memcpy(buf + 8, hdr, (size_t)hl);
    t_write_file(path, buf, total);
    free(buf);
}

TEST(fifo_and_device_refused) {
    char p[512];
    path_in(p, sizeof p, "fifo.json");
    CHECK(mkfifo(p, 0600) == 0);
    size_t len;
    char *t = k3_read_regular_file(p, K3_SMALL_FILE_MAX, &len); /* would block on open before */
    CHECK(!t && strstr(k3_errmsg(), "not a regular file"), "%s", k3_errmsg());
    t = k3_read_regular_file("/dev/zero", K3_SMALL_FILE_MAX, &len);
    CHECK(!t && strstr(k3_errmsg(), "/dev/zero: not a regular file"), "%s", k3_errmsg());
    k3_config c;
    CHECK(k3_config_load(p, &c) == -1 && strstr(k3_errmsg(), "not a regular file"));
    unlink(p);
}

TEST(json_size_capped) {
    char p[512];
    path_in(p, sizeof p, "big.json");
    t_write_file(p, "{}      ", 8);
    CHECK(truncate(p, 5 << 20) == 0);
    size_t len;
    char *t = k3_read_regular_file(p, 4 << 20, &len);
    CHECK(!t && strstr(k3_errmsg(), "more than the 4 MiB"), "%s", k3_errmsg());
    t = k3_read_regular_file(p, 8 << 20, &len);
    CHECK(t && len == (5u << 20));
    free(t);
    unlink(p);
}

/* A directory whose name has glob characters, and shards that are not files. */
TEST(shard_dir_with_glob_chars) {
    char d[512], p[600];
    path_in(d, sizeof d, "x[1]*?");
    CHECK(mkdir(d, 0700) == 0);
    snprintf(p, sizeof p, "%s/model.safetensors", d);
    write_shard(p, 8);
    k3_st *st = k3_st_open_dir(d);
    CHECK(st && st->n == 1 && k3_st_find(st, "w"), "%s", k3_errmsg());
    k3_st_free(st);
    snprintf(p, sizeof p, "%s/zz.safetensors", d);
    CHECK(mkfifo(p, 0600) == 0);
    st = k3_st_open_dir(d); /* a FIFO shard: refused, not a hang */
    CHECK(!st && strstr(k3_errmsg(), "zz.safetensors: not a regular file"), "%s", k3_errmsg());
    unlink(p);
    /* an index that is /dev/zero: refused, not read until memory runs out */
    snprintf(p, sizeof p, "%s/model.safetensors.index.json", d);
    CHECK(symlink("/dev/zero", p) == 0);
    st = k3_st_open_dir(d);
    CHECK(!st && strstr(k3_errmsg(), "index.json: not a regular file"), "%s", k3_errmsg());
    unlink(p);
}

/* config.json text with extra top-level fields and extra linear_attn_config fields. */
static int parse_cfg(const char *top, const char *lac, k3_config *c) {
    char text[2048];
    snprintf(text, sizeof text,
             "{\"vocab_size\": 300, \"hidden_size\": 8, \"num_hidden_layers\": 3, "
             "\"num_attention_heads\": 1, \"intermediate_size\": 8, \"kv_lora_rank\": 4, "
             "\"qk_nope_head_dim\": 4, \"v_head_dim\": 4 %s%s, \"linear_attn_config\": "
             "{\"num_heads\": 1, \"head_dim\": 4, \"kda_layers\": [1, 2] %s%s}}",
             *top ? "," : "", top, *lac ? "," : "", lac);
    int rc = k3_config_parse(text, strlen(text), "cfg", c);
    if (!rc) k3_config_free(c);
    return rc;
}

static int refused(const char *top, const char *lac, const char *want) {
    k3_config c;
    if (parse_cfg(top, lac, &c) == 0) {
        printf("  accepted: %s %s\n", top, lac);
        return 0;
    }
    if (!strstr(k3_errmsg(), want)) {
        printf("  message: %s (wanted %s)\n", k3_errmsg(), want);
        return 0;
    }
    return 1;
}

TEST(eos_token_id_list) {
    char text[1024];
    snprintf(text, sizeof text,
             "{\"vocab_size\": 300, \"hidden_size\": 8, \"num_hidden_layers\": 1, "
             "\"num_attention_heads\": 1, \"intermediate_size\": 8, \"kv_lora_rank\": 4, "
             "\"qk_nope_head_dim\": 4, \"v_head_dim\": 4, \"eos_token_id\": [299, 7, 12], "
             "\"linear_attn_config\": {\"kda_layers\": []}}");
    k3_config c;
    CHECK(k3_config_parse(text, strlen(text), "cfg", &c) == 0, "%s", k3_errmsg());
    CHECK(c.n_eos == 3 && c.eos_ids[0] == 299 && c.eos_ids[1] == 7 && c.eos_ids[2] == 12);
    CHECK(c.eos_token_id == 299);
    k3_config_free(&c);
    CHECK(parse_cfg("\"eos_token_id\": 5", "", &c) == 0);
    CHECK(refused("\"eos_token_id\": \"</s>\"", "", "\"eos_token_id\" must be a token id"));
    CHECK(refused("\"eos_token_id\": [1, \"x\"]", "", "\"eos_token_id\" must be a token id"));
    CHECK(refused("\"eos_token_id\": {}", "", "\"eos_token_id\" must be a token id"));
    CHECK(refused("\"eos_token_id\": 300", "", "not a token id of the vocabulary"));
    CHECK(refused("\"eos_token_id\": -2", "", "not a token id of the vocabulary"));
    CHECK(refused("\"bos_token_id\": \"<s>\"", "", "\"bos_token_id\" must be a token id"));
}

TEST(full_attn_layers_must_agree) {
    k3_config c;
    CHECK(parse_cfg("", "\"full_attn_layers\": [3]", &c) == 0, "%s", k3_errmsg());
    /* a number past the model names an MTP layer only when the config declares one */
    CHECK(parse_cfg("\"num_nextn_predict_layers\": 1", "\"full_attn_layers\": [3, 4]", &c) == 0,
          "%s", k3_errmsg());
    CHECK(refused("", "\"full_attn_layers\": [3, 4]",
                  "full_attn_layers[1] = 4 names no layer of the model (num_hidden_layers 3"));
    CHECK(refused("", "\"kda_layers\": [1, 2, 99], \"full_attn_layers\": [3]",
                  "kda_layers[2] = 99 names no layer"));
    CHECK(refused("", "\"full_attn_layers\": [2, 3]", "layer 2 is in both"));
    CHECK(refused("", "\"full_attn_layers\": []", "layer 3 is in neither"));
    CHECK(refused("", "\"full_attn_layers\": \"3\"", "full_attn_layers\" must be a list"));
    CHECK(refused("", "\"full_attn_layers\": [0]", "full_attn_layers[0] is not a 1-based"));
}

TEST(max_position_embeddings_and_groups) {
    k3_config c;
    char text[512];
    snprintf(text, sizeof text,
             "{\"vocab_size\": 300, \"hidden_size\": 8, \"num_hidden_layers\": 1, "
             "\"num_attention_heads\": 1, \"intermediate_size\": 8, \"kv_lora_rank\": 4, "
             "\"qk_nope_head_dim\": 4, \"v_head_dim\": 4, \"max_position_embeddings\": 8192, "
             "\"linear_attn_config\": {\"kda_layers\": []}}");
    CHECK(k3_config_parse(text, strlen(text), "cfg", &c) == 0, "%s", k3_errmsg());
    CHECK(c.max_position_embeddings == 8192);
    k3_config_free(&c);
    CHECK(refused("\"max_position_embeddings\": 0", "", "\"max_position_embeddings\" = 0"));
    CHECK(refused("\"max_position_embeddings\": -1", "", "\"max_position_embeddings\" = -1"));
    CHECK(refused("\"max_position_embeddings\": 1.5", "", "\"max_position_embeddings\" must"));
    CHECK(refused("\"max_position_embeddings\": \"4k\"", "", "\"max_position_embeddings\""));
    const char *moe = "\"num_experts\": 8, \"moe_intermediate_size\": 4, "
                      "\"num_experts_per_token\": 2, \"first_k_dense_replace\": 0, ";
    char top[256];
    snprintf(top, sizeof top, "%s\"num_expert_group\": 1, \"topk_group\": 2", moe);
    CHECK(refused(top, "", "\"topk_group\" = 2, expected 1..num_expert_group (1)"));
    snprintf(top, sizeof top, "%s\"num_expert_group\": 4, \"topk_group\": 5", moe);
    CHECK(refused(top, "", "\"topk_group\" = 5"));
    snprintf(top, sizeof top, "%s\"num_expert_group\": 4, \"topk_group\": 2", moe);
    CHECK(parse_cfg(top, "", &c) == 0, "%s", k3_errmsg());
}

TEST(rms_norm_eps_sane) {
    k3_config c;
    CHECK(parse_cfg("\"rms_norm_eps\": 1e-6", "", &c) == 0);
    CHECK(refused("\"rms_norm_eps\": 0", "", "\"rms_norm_eps\" = 0"));
    CHECK(refused("\"rms_norm_eps\": -1e-5", "", "\"rms_norm_eps\""));
    CHECK(refused("\"rms_norm_eps\": 5", "", "\"rms_norm_eps\" = 5"));
    CHECK(refused("\"rms_norm_eps\": 1e308", "", "\"rms_norm_eps\""));
}

TEST(quantization_config_understood) {
    k3_config c;
    const char *ok[] = {
        "\"quantization_config\": {\"quant_method\": \"compressed-tensors\", \"format\": "
        "\"mxfp4-pack-quantized\", \"config_groups\": {\"group_0\": {\"format\": "
        "\"mxfp4-pack-quantized\", \"weights\": {\"num_bits\": 4, \"group_size\": 32}}}}",
        "\"quantization\": {\"bits\": 4, \"group_size\": 64}, \"quantization_config\": "
        "{\"bits\": 4, \"group_size\": 64}",
        "\"quantization\": {\"bits\": 4, \"group_size\": 32, \"mode\": \"mxfp4\"}",
        "\"quantization_config\": null",
    };
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++)
        CHECK(parse_cfg(ok[i], "", &c) == 0, "%s: %s", ok[i], k3_errmsg());
    CHECK(refused("\"quantization_config\": {\"quant_method\": \"gptq\", \"bits\": 4}", "",
                  "quant_method is \"gptq\""));
    CHECK(refused("\"quantization_config\": {\"quant_method\": \"awq\"}", "",
                  "quant_method is \"awq\", which k3 does not load"));
    CHECK(refused("\"quantization_config\": {\"quant_method\": \"fp8\", \"fmt\": \"e4m3\"}", "",
                  "\"fp8\""));
    CHECK(refused("\"quantization_config\": {}", "", "quant_method is missing"));
    CHECK(refused("\"quantization_config\": 4", "", "quantization_config is not an object"));
    CHECK(refused("\"quantization_config\": {\"quant_method\": \"compressed-tensors\", "
                  "\"format\": \"int-quantized\"}",
                  "", "\"int-quantized\""));
    CHECK(refused("\"quantization_config\": {\"quant_method\": \"compressed-tensors\", "
                  "\"config_groups\": {\"g\": {\"weights\": {\"num_bits\": 8}}}}",
                  "", "config_groups.g is not 4-bit"));
    CHECK(refused("\"quantization\": {\"bits\": 4, \"mode\": \"nvfp4\"}", "",
                  "quantization.mode is \"nvfp4\""));
    CHECK(refused("\"quantization\": {\"bits\": 40}", "", "quantization.bits"));
}

/* Truncate a mapped shard, then touch its data in a child: the child must die
 * with a message naming the file and exit status 1, not a bare SIGBUS. */
TEST(truncated_shard_names_the_file) {
    char p[512];
    path_in(p, sizeof p, "trunc.safetensors");
    write_shard(p, 1 << 16); /* 256 KiB of data: pages past the cut */
    k3_st st;
    k3_st_init(&st);
    CHECK(k3_st_add_file(&st, p) == 0, "%s", k3_errmsg());
    CHECK(k3_st_finish(&st) == 0);
    const k3_tensor *t = k3_st_find(&st, "w");
    CHECK(t != NULL);
    if (!t) return;
    CHECK(truncate(p, 4096) == 0);
    int fds[2];
    CHECK(pipe(fds) == 0);
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fds[1], 2);
        close(fds[0]);
        volatile unsigned char sum = 0;
        for (size_t i = 0; i < t->bytes; i += 4096) sum += t->data[i];
        _exit(sum == 255 ? 3 : 2); /* not reached if the pages are gone */
    }
    close(fds[1]);
    char msg[2048] = {0};
    size_t n = 0;
    ssize_t r;
    while (n < sizeof msg - 1 && (r = read(fds[0], msg + n, sizeof msg - 1 - n)) > 0)
        n += (size_t)r;
    close(fds[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 1, "status 0x%x, stderr: %s", status, msg);
    CHECK(strstr(msg, p) && strstr(msg, "truncated or changed while k3 was using it"), "%s", msg);
    k3_st_clear(&st);
    unlink(p);
}

int main(void) {
    snprintf(tmpdir, sizeof tmpdir, "/tmp/k3-loaderfiles-XXXXXX");
    if (!mkdtemp(tmpdir)) return 1;
    RUN(fifo_and_device_refused);
    RUN(json_size_capped);
    RUN(shard_dir_with_glob_chars);
    RUN(eos_token_id_list);
    RUN(full_attn_layers_must_agree);
    RUN(max_position_embeddings_and_groups);
    RUN(rms_norm_eps_sane);
    RUN(quantization_config_understood);
    RUN(truncated_shard_names_the_file);
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd)) return 1;
    return t_done();
}
