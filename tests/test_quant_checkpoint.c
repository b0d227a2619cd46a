/* test_quant_checkpoint.c — loader rejection on broken copies of the tiny fixtures
 * (made in a temp dir): truncated shard, missing shard, missing tensor, wrong
 * shape, wrong dtype, A_log with a non-zero padding tail (message names the key,
 * the stored length and the head count), unsupported config values; plus the
 * accepting side: a zero A_log tail, both config layouts, and MXFP4 experts read
 * in place as k3_wmat views. */
#include "base/err.h"
#include "base/mem.h"
#include "quant/checkpoint.h"
#include "k3.h"
#include "t.h"

#include <sys/stat.h>
#include <unistd.h>

static char g_tmp[256];

static char *slurp(const char *path, size_t *len) {
    char *p = k3_read_file(path, len);
    if (!p) printf("  cannot read %s: %s\n", path, k3_errmsg());
    return p;
}

static void spit(const char *path, const char *buf, size_t len) {
    FILE *f = fopen(path, "wb");
    if (f) {
        fwrite(buf, 1, len, f);
        fclose(f);
    }
}

/* Fresh copy of fixture `name` from `root` at g_tmp/<name>. */
static const char *copy_from(const char *root, const char *name, char *dir) {
    snprintf(dir, 512, "%s/%s", g_tmp, name);
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && cp -r '%s/%s' '%s' && chmod -R u+w '%s'", dir, root,
             name, dir, dir);
    if (system(cmd)) printf("  copy failed: %s\n", cmd);
    return dir;
}

static const char *copy_fixture(const char *name, char *dir) {
    return copy_from(t_fixtures(), name, dir);
}

/* Replace the first occurrence of `from` in a file with `to` (same length). */
static void patch(const char *path, const char *from, const char *to) {
    size_t len;
    char *b = slurp(path, &len);
    if (!b) return;
    char *p = memmem(b, len, from, strlen(from));
    if (p)
        memcpy(p, to, strlen(to));
    else
        printf("  patch: \"%s\" not found in %s\n", from, path);
    spit(path, b, len);
    free(b);
}

static void expect_load_error(const char *dir, const char *w1, const char *w2, const char *w3) {
    k3_model *m = k3_model_load(dir, NULL);
    CHECK(!m, "%s loaded but should not", dir);
    k3_model_free(m);
    const char *e = k3_errmsg();
    CHECK(strstr(e, w1), "\"%s\" lacks \"%s\"", e, w1);
    if (w2) CHECK(strstr(e, w2), "\"%s\" lacks \"%s\"", e, w2);
    if (w3) CHECK(strstr(e, w3), "\"%s\" lacks \"%s\"", e, w3);
}

TEST(truncated_shard) {
    char d[512], f[600];
    copy_fixture("tiny-bf16", d);
    snprintf(f, sizeof f, "%s/model.safetensors", d);
    CHECK(truncate(f, 300000) == 0);
    expect_load_error(d, "model.safetensors", "past the data section", NULL);
    CHECK(truncate(f, 7) == 0);
    expect_load_error(d, "model.safetensors", "too short", NULL);
}

TEST(missing_shard_and_files) {
    char d[512], f[600];
    copy_fixture("tiny-f32-sharded", d);
    snprintf(f, sizeof f, "%s/model-00002-of-00002.safetensors", d);
    unlink(f);
    expect_load_error(d, "model-00002-of-00002.safetensors", "cannot open", NULL);
    expect_load_error("/nonexistent/k3-model", "config.json", NULL, NULL);
    copy_fixture("tiny-f32-sharded", d);
    snprintf(f, sizeof f, "%s/model.safetensors.index.json", d);
    patch(f, "\"model.embed_tokens.weight\": \"model-00001",
          "\"model.embed_tokens.weight\": \"model-00002");
    expect_load_error(d, "model.safetensors.index.json", "model.embed_tokens.weight",
                      "listed in model-00002-of-00002.safetensors");
    patch(f, "\"weight_map\"", "\"weight_mop\"");
    expect_load_error(d, "model.safetensors.index.json", "weight_map", NULL);
}

TEST(missing_tensor) {
    char d[512], f[600];
    copy_fixture("tiny-bf16", d);
    snprintf(f, sizeof f, "%s/model.safetensors", d);
    patch(f, "layers.2.self_attn.o_norm.weight", "layers.2.self_attn.o_nxrm.weight");
    expect_load_error(d, "model.layers.2.self_attn.o_norm.weight", "missing", NULL);
}

TEST(wrong_shape_and_dtype) {
    char d[512], f[600];
    copy_fixture("tiny-bf16", d);
    snprintf(f, sizeof f, "%s/config.json", d);
    patch(f, "\"intermediate_size\": 96", "\"intermediate_size\": 95");
    expect_load_error(d, "model.layers.0.mlp.gate_proj.weight", "[96, 64]", "expected [95, 64]");
    copy_fixture("tiny-bf16", d);
    snprintf(f, sizeof f, "%s/model.safetensors", d);
    /* the first tensor entry after embed_tokens' dtype: make A_log I32 (same size) */
    size_t len;
    char *b = slurp(f, &len);
    char *p = b ? memmem(b, len, "layers.0.self_attn.A_log\":{\"dtype\":\"F32\"", 40) : NULL;
    CHECK(p != NULL, "A_log entry not found");
    if (p) memcpy(p + strlen("layers.0.self_attn.A_log\":{\"dtype\":\""), "I32", 3);
    if (b) spit(f, b, len);
    free(b);
    expect_load_error(d, "self_attn.A_log", "I32", "expected F32");
}

/* Set A_log[idx] of layer 0 in the copy to value. */
static void poke_alog(const char *f, int idx, float value) {
    k3_st st;
    k3_st_init(&st);
    CHECK(k3_st_add_file(&st, f) == 0 && k3_st_finish(&st) == 0, "%s", k3_errmsg());
    const k3_tensor *t = k3_st_find(&st, "language_model.model.layers.0.self_attn.A_log");
    size_t off = t ? (size_t)(t->data - (const uint8_t *)st.files[0].map) : 0;
    k3_st_clear(&st);
    CHECK(t != NULL);
    FILE *fp = fopen(f, "r+b");
    if (!fp || !off) return;
    fseek(fp, (long)(off + 4 * (size_t)idx), SEEK_SET);
    fwrite(&value, 4, 1, fp);
    fclose(fp);
}

TEST(alog_tail) {
    char d[512], f[600];
    copy_fixture("tiny-bf16", d);
    snprintf(f, sizeof f, "%s/model.safetensors", d);
    poke_alog(f, 5, 0.25f);
    expect_load_error(d, "language_model.model.layers.0.self_attn.A_log", "32 values",
                      "num_heads = 2");
    CHECK(strstr(k3_errmsg(), "not zero"), "%s", k3_errmsg());
    poke_alog(f, 5, -0.0f); /* negative zero is a zero tail */
    k3_model *m = k3_model_load(d, NULL);
    CHECK(m, "%s", k3_errmsg());
    k3_model_free(m);
}

TEST(unsupported_config_values) {
    static const char *const cases[][3] = {
        {"\"hidden_act\": \"situ\"", "\"hidden_act\": \"silu\"", "hidden_act"},
        {"\"moe_router_activation_func\": \"sigmoid\"",
         "\"moe_router_activation_func\": \"softmax\"", "moe_router_activation_func"},
        {"\"mla_use_nope\": true", "\"mla_use_nope\": 0   ", "mla_use_nope"},
        {"\"num_expert_group\": 1", "\"num_expert_group\": 3", "num_expert_group"},
        {"\"num_experts_per_token\": 2", "\"num_experts_per_token\": 9", "num_experts_per_token"},
        {"\"hidden_size\": 64", "\"hidden_size\": \"\"", "hidden_size"},
        {"\"kda_layers\"", "\"kda_lay_rs\"", "kda_layers"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char d[512], f[600];
        copy_fixture("tiny-bf16", d);
        snprintf(f, sizeof f, "%s/config.json", d);
        patch(f, cases[i][0], cases[i][1]);
        expect_load_error(d, "config.json", cases[i][2], NULL);
    }
}

TEST(config_defaults_and_layouts) {
    const char *flat =
        "{\"model_type\":\"kimi_k3\",\"linear_attn_config\":{\"kda_layers\":[1,2],"
        "\"num_heads\":96,\"head_dim\":128},\"num_hidden_layers\":3,\"kv_lora_rank\":512,"
        "\"qk_nope_head_dim\":128,\"v_head_dim\":128,\"eos_token_id\":[7,8]}";
    k3_config c;
    CHECK(k3_config_parse(flat, strlen(flat), "flat", &c) == 0, "%s", k3_errmsg());
    CHECK(c.hidden_size == 7168 && c.vocab_size == 163840 && c.num_experts_per_token == 16);
    CHECK(c.is_kda[0] && c.is_kda[1] && !c.is_kda[2] && c.eos_token_id == 7 &&
          c.bos_token_id == -1);
    CHECK(c.situ_beta == 1.0 && c.situ_linear_beta == 0 && !c.kda_has_lower_bound &&
          c.kda_conv_kernel == 4);
    k3_config_free(&c);
    const char *nested =
        "{\"text_config\":{\"linear_attn_config\":{\"kda_layers\":[1],\"num_heads\":2,"
        "\"head_dim\":4,\"gate_lower_bound\":-5},\"num_hidden_layers\":1,"
        "\"activation_situ_beta\":4}}";
    CHECK(k3_config_parse(nested, strlen(nested), "nested", &c) == 0, "%s", k3_errmsg());
    CHECK(c.kda_has_lower_bound && c.kda_gate_lower_bound == -5 && c.situ_beta == 4);
    k3_config_free(&c);
}

TEST(mxfp4_experts_are_views) {
    char path[1024];
    snprintf(path, sizeof path, "%s/tiny-mxfp4", t_fixtures());
    k3_ckpt ck;
    CHECK(k3_ckpt_open(path, &ck) == 0, "%s", k3_errmsg());
    k3_wmat w;
    CHECK(k3_ckpt_linear(&ck, "model.layers.1.block_sparse_moe.experts.3.w2", 32, 32, &w) == 0,
          "%s", k3_errmsg());
    const k3_tensor *pk =
        k3_ckpt_find(&ck, "model.layers.1.block_sparse_moe.experts.3.w2.weight_packed");
    CHECK(w.fmt == K3_W_MXFP4 && pk && w.data == pk->data && w.row_stride == 16 &&
          w.scale_stride == 1);
    CHECK(k3_ckpt_linear(&ck, "model.layers.1.block_sparse_moe.experts.3.w2", 32, 64, &w) == -1);
    CHECK(strstr(k3_errmsg(), "weight_packed") && strstr(k3_errmsg(), "expected [32, 32]"), "%s",
          k3_errmsg());
    k3_ckpt_close(&ck);
}

TEST(mlx_quantization_is_cross_checked) {
    char d[512], f[600];
    copy_from("tests/fixtures", "mlx-mixed", d);
    k3_model *m = k3_model_load(d, NULL);
    CHECK(m, "%s", k3_errmsg());
    k3_model_free(m);
    snprintf(f, sizeof f, "%s/config.json", d);
    /* config says 5 bits for qkv_proj, the tensor shapes say 4 */
    patch(f, "\"group_size\": 32,\n   \"bits\": 4,\n   \"mode\": \"affine\"",
          "\"group_size\": 32,\n   \"bits\": 5,\n   \"mode\": \"affine\"");
    expect_load_error(d, "qkv_proj", "4 bits / group 32", "says 5 bits");
    copy_from("tests/fixtures", "mlx-mixed", d);
    snprintf(f, sizeof f, "%s/model.safetensors", d);
    patch(f, "layers.0.mlp.down_proj.biases", "layers.0.mlp.down_proj.biasez");
    expect_load_error(d, "down_proj", "needs", "biases");
}

int main(void) {
    snprintf(g_tmp, sizeof g_tmp, "/tmp/k3_test_ckpt_%d", (int)getpid());
    mkdir(g_tmp, 0700);
    RUN(truncated_shard);
    RUN(missing_shard_and_files);
    RUN(missing_tensor);
    RUN(wrong_shape_and_dtype);
    RUN(alog_tail);
    RUN(unsupported_config_values);
    RUN(config_defaults_and_layouts);
    RUN(mxfp4_experts_are_views);
    RUN(mlx_quantization_is_cross_checked);
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_tmp);
    if (system(cmd)) printf("  cleanup failed\n");
    return t_done();
}
