/* test_gen_synth.c — synthetic checkpoints (src/gen/synth.h): presets equal
 * the fixture / bench configs, tensor names, dtypes and shapes equal the
 * oracle-made fixtures (bf16, f32 sharded, MXFP4), seeded output is
 * reproducible, the tokenizer files load with the byte-level layout. */
#include "t.h"

#include "base/err.h"
#include "base/mem.h"
#include "gen/synth.h"
#include "io/safetensors.h"
#include "text/tokenizer.h"

#include <sys/stat.h>
#include <unistd.h>

static char tmp[256];

static char *fixture(const char *name) {
    static char buf[1024];
    snprintf(buf, sizeof buf, "%s/%s", t_fixtures(), name);
    return buf;
}

static char *out_dir(const char *name) {
    static char buf[512];
    snprintf(buf, sizeof buf, "%s/%s", tmp, name);
    return buf;
}

/* Remove a synthetic checkpoint directory (only the files synth writes). */
static void remove_ckpt(const char *dir) {
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd)) printf("  could not remove %s\n", dir);
}

/* Keys of a that differ from b (both objects), ignoring `skip` keys. */
static int json_diff(json_t *a, json_t *b, const char *const *skip, int nskip) {
    int nd = 0;
    const char *k;
    json_t *v;
    json_object_foreach(a, k, v) {
        int skipped = 0;
        for (int i = 0; i < nskip; i++) skipped |= !strcmp(k, skip[i]);
        if (skipped) continue;
        if (!json_equal(v, json_object_get(b, k))) {
            printf("  key %s differs\n", k);
            nd++;
        }
    }
    json_object_foreach(b, k, v) {
        int skipped = 0;
        for (int i = 0; i < nskip; i++) skipped |= !strcmp(k, skip[i]);
        if (!skipped && !json_object_get(a, k)) {
            printf("  key %s missing\n", k);
            nd++;
        }
    }
    return nd;
}

TEST(tiny_preset_is_the_fixture_config) {
    k3_synth_opts o = {0};
    json_t *cfg = k3_synth_config("tiny", NULL, &o);
    char path[1100];
    snprintf(path, sizeof path, "%s/config.json", fixture("tiny-bf16"));
    json_t *fx = json_load_file(path, 0, NULL);
    CHECK(cfg && fx, "%s", k3_errmsg());
    if (!cfg || !fx) return;
    const char *ids[] = {"bos_token_id", "eos_token_id", "pad_token_id", "text_config"};
    CHECK(!json_diff(cfg, fx, ids, 4));
    CHECK(!json_diff(json_object_get(cfg, "text_config"), json_object_get(fx, "text_config"), ids,
                     3));
    /* ids follow the tokenizer layout: block = 1000 - 256 */
    CHECK(json_integer_value(json_object_get(cfg, "eos_token_id")) == 746);
    CHECK(json_integer_value(json_object_get(cfg, "bos_token_id")) == 744);
    json_decref(cfg);
    json_decref(fx);
}

TEST(bench_preset_is_the_bench_config) {
    char path[1100];
    snprintf(path, sizeof path, "%s/../bench/k3-bench-config.json", t_fixtures());
    json_t *fx = json_load_file(path, 0, NULL);
    if (!fx) {
        printf("  (no %s: comparing only the key sizes)\n", path);
    }
    k3_synth_opts o = {0};
    json_t *cfg = k3_synth_config("bench", NULL, &o);
    CHECK(cfg != NULL);
    json_t *tc = json_object_get(cfg, "text_config");
    CHECK(json_integer_value(json_object_get(tc, "hidden_size")) == 1024);
    CHECK(json_integer_value(json_object_get(tc, "num_experts")) == 64);
    if (fx) {
        const char *skip[] = {"_generator"};
        CHECK(!json_diff(cfg, fx, skip, 1));
        CHECK(!json_diff(tc, json_object_get(fx, "text_config"), NULL, 0));
    }
    json_decref(cfg);
    json_decref(fx);
}

/* The real-slice presets equal the shared configs merged over tiny (what
 * `--config ../shared/bench/k3-real-slice*-config.json` gives), and --vocab
 * shrinks the vocabulary with the derived ids following it. */
static void check_real_preset(const char *preset, const char *file) {
    char path[1100];
    snprintf(path, sizeof path, "%s/../bench/%s", t_fixtures(), file);
    json_t *fx = json_load_file(path, 0, NULL);
    k3_synth_opts o = {0};
    json_t *cfg = k3_synth_config(preset, NULL, &o);
    CHECK(cfg != NULL, "%s", k3_errmsg());
    if (!cfg) return;
    json_t *tc = json_object_get(cfg, "text_config");
    CHECK(json_integer_value(json_object_get(tc, "hidden_size")) == 7168);
    CHECK(json_integer_value(json_object_get(tc, "num_experts_per_token")) == 16);
    if (fx) {
        json_t *want = k3_synth_config(NULL, fx, &o);
        CHECK(want && !json_diff(cfg, want, NULL, 0), "%s differs from %s", preset, path);
        json_decref(want);
    } else {
        printf("  (no %s: comparing only the key sizes)\n", path);
    }
    json_decref(cfg);
    json_decref(fx);
}

TEST(real_slice_presets_are_the_shared_configs) {
    check_real_preset("real-slice", "k3-real-slice-config.json");
    check_real_preset("real-slice-v32k", "k3-real-slice-v32k-config.json");
    k3_synth_opts o = {.vocab = 4096};
    json_t *cfg = k3_synth_config("real-slice", NULL, &o);
    CHECK(json_integer_value(json_object_get(cfg, "vocab_size")) == 4096);
    CHECK(json_integer_value(json_object_get(cfg, "bos_token_id")) == 4096 - 256);
    CHECK(json_integer_value(json_object_get(cfg, "pad_token_id")) == 4095);
    json_t *tc = json_object_get(cfg, "text_config");
    CHECK(json_integer_value(json_object_get(tc, "vocab_size")) == 4096);
    CHECK(json_integer_value(json_object_get(tc, "kv_lora_rank")) == 512);
    json_decref(cfg);
    CHECK(k3_synth_preset_known("real-slice-v32k") && !k3_synth_preset_known("real"));
}

TEST(user_config_overlays) {
    k3_synth_opts o = {.mxfp4 = 1};
    json_t *flat = json_pack("{sis{si}}", "hidden_size", 128, "linear_attn_config", "num_heads", 4);
    json_t *cfg = k3_synth_config(NULL, flat, &o);
    json_t *tc = json_object_get(cfg, "text_config");
    CHECK(json_integer_value(json_object_get(tc, "hidden_size")) == 128);
    json_t *lac = json_object_get(tc, "linear_attn_config");
    CHECK(json_integer_value(json_object_get(lac, "num_heads")) == 4);
    CHECK(json_integer_value(json_object_get(lac, "head_dim")) == 32, "deep merge kept head_dim");
    CHECK(json_object_get(cfg, "quantization_config") != NULL);
    json_decref(cfg);
    json_t *nested = json_pack("{si s{si}}", "eos_token_id", 5, "text_config", "vocab_size", 600);
    cfg = k3_synth_config("tiny", nested, &o);
    CHECK(json_integer_value(json_object_get(cfg, "vocab_size")) == 600);
    CHECK(json_integer_value(json_object_get(cfg, "eos_token_id")) == 5);
    CHECK(json_integer_value(json_object_get(cfg, "bos_token_id")) == 600 - 256);
    json_decref(cfg);
    json_decref(nested);
    json_decref(flat);
    CHECK(!k3_synth_config("huge", NULL, &o) && strstr(k3_errmsg(), "huge"));
    json_t *bad = json_pack("{si}", "vocab_size", 100);
    CHECK(!k3_synth_config(NULL, bad, &o) && strstr(k3_errmsg(), "vocab_size"));
    json_decref(bad);
}

/* Same names, dtypes and shapes in both checkpoint directories. */
static int same_layout(const char *a_dir, const char *b_dir) {
    k3_st *a = k3_st_open_dir(a_dir);
    if (!a) return printf("  %s\n", k3_errmsg()), 0;
    k3_st *b = k3_st_open_dir(b_dir);
    if (!b) return k3_st_free(a), printf("  %s\n", k3_errmsg()), 0;
    int ok = a->n == b->n;
    if (!ok) printf("  %d vs %d tensors\n", a->n, b->n);
    for (int i = 0; i < a->n && ok; i++) {
        const k3_tensor *x = &a->t[i], *y = k3_st_find(b, x->name);
        if (!y && !strncmp(x->name, "language_model.", 15)) /* fixture made with --no-prefix */
            y = k3_st_find(b, x->name + 15);
        ok = y && x->dtype == y->dtype && x->ndim == y->ndim &&
             !memcmp(x->shape, y->shape, sizeof(int64_t) * (size_t)x->ndim);
        if (!ok) printf("  tensor %s differs\n", x->name);
    }
    k3_st_free(a);
    k3_st_free(b);
    return ok;
}

static int synth_to(const char *dir, int f32, int mxfp4, uint64_t seed, uint64_t shard) {
    k3_synth_opts o = {.f32 = f32, .mxfp4 = mxfp4, .seed = seed, .shard_bytes = shard};
    json_t *cfg = k3_synth_config("tiny", NULL, &o);
    int rc = cfg ? k3_synth_write(dir, cfg, &o) : -1;
    json_decref(cfg);
    if (rc) printf("  %s\n", k3_errmsg());
    return rc;
}

TEST(layouts_match_the_fixtures) {
    CHECK(!synth_to(out_dir("bf16"), 0, 0, 1, 0));
    CHECK(same_layout(out_dir("bf16"), fixture("tiny-bf16")));
    CHECK(!synth_to(out_dir("mx"), 0, 1, 1, 0));
    CHECK(same_layout(out_dir("mx"), fixture("tiny-mxfp4")));
    CHECK(!synth_to(out_dir("f32"), 1, 0, 1, 700000)); /* ~1.4 MB: two shards */
    CHECK(same_layout(out_dir("f32"), fixture("tiny-f32-sharded")));
    char p[1024];
    snprintf(p, sizeof p, "%s/model.safetensors.index.json", out_dir("f32"));
    CHECK(access(p, F_OK) == 0, "no index for a sharded checkpoint");
    snprintf(p, sizeof p, "%s/model-00002-of-00002.safetensors", out_dir("f32"));
    CHECK(access(p, F_OK) == 0, "expected two shards");
    remove_ckpt(out_dir("mx"));
    remove_ckpt(out_dir("f32"));
}

static int files_equal(const char *a, const char *b) {
    size_t na, nb;
    char *x = k3_read_file(a, &na), *y = k3_read_file(b, &nb);
    int eq = x && y && na == nb && !memcmp(x, y, na);
    free(x);
    free(y);
    return eq;
}

TEST(seeded_output_reproduces) {
    CHECK(!synth_to(out_dir("bf16b"), 0, 0, 1, 0));
    CHECK(!synth_to(out_dir("bf16c"), 0, 0, 2, 0));
    char a[1024], b[1024], c[1024];
    snprintf(a, sizeof a, "%s/model.safetensors", out_dir("bf16"));
    snprintf(b, sizeof b, "%s/model.safetensors", out_dir("bf16b"));
    snprintf(c, sizeof c, "%s/model.safetensors", out_dir("bf16c"));
    CHECK(files_equal(a, b), "same seed, different files");
    CHECK(!files_equal(a, c), "different seeds, same file");
    remove_ckpt(out_dir("bf16b"));
    remove_ckpt(out_dir("bf16c"));
}

TEST(tokenizer_files_load_with_byte_level_layout) {
    k3_tokenizer *t = k3_tok_load(out_dir("bf16"));
    CHECK(t != NULL, "%s", k3_errmsg());
    if (!t) return;
    k3_tokenizer *b = k3_tok_byte_level(1000);
    CHECK(k3_tok_vocab_size(t) == 1000 && k3_tok_block_start(t) == 744);
    const char *names[] = {"[BOS]", "<|end_of_msg|>", "<|open|>", "<|close|>", "<|sep|>", "[PAD]"};
    for (int i = 0; i < 6; i++)
        CHECK(k3_tok_special_id(t, names[i]) == k3_tok_special_id(b, names[i]) &&
                  k3_tok_special_id(t, names[i]) >= 744,
              "%s", names[i]);
    CHECK(k3_tok_special_flag(t, 747) == 0 && k3_tok_special_flag(t, 746) == 1);
    const char *text = "Hello, Kimi! \xe4\xbd\xa0\xe5\xa5\xbd the cat <|open|>";
    int32_t *ids = NULL;
    size_t n = 0, len = 0;
    CHECK(!k3_tok_encode(t, text, strlen(text), 0, &ids, &n));
    char *back = k3_tok_decode(t, ids, n, 0, &len);
    CHECK(back && len == strlen(text) && !memcmp(back, text, len), "round trip");
    CHECK(n < strlen(text), "letter pairs should merge (%zu ids for %zu bytes)", n, strlen(text));
    for (size_t i = 0; i < n; i++) CHECK(ids[i] >= 0 && ids[i] < 744);
    free(ids);
    free(back);
    k3_tok_free(t);
    k3_tok_free(b);
    remove_ckpt(out_dir("bf16"));
}

TEST(errors_name_the_problem) {
    k3_synth_opts o = {.mxfp4 = 1};
    json_t *over = json_pack("{si}", "routed_expert_hidden_size", 40);
    json_t *cfg = k3_synth_config("tiny", over, &o);
    CHECK(k3_synth_write(out_dir("badmx"), cfg, &o) == -1);
    CHECK(strstr(k3_errmsg(), "% 32") != NULL, "%s", k3_errmsg());
    char p[1024];
    snprintf(p, sizeof p, "%s/model.safetensors", out_dir("badmx"));
    CHECK(access(p, F_OK) != 0, "a failed write left weights behind");
    json_decref(cfg);
    json_decref(over);
    remove_ckpt(out_dir("badmx"));
    over = json_pack("{ss}", "hidden_act", "gelu");
    cfg = k3_synth_config("tiny", over, &o);
    CHECK(k3_synth_write(out_dir("badact"), cfg, &o) == -1);
    CHECK(strstr(k3_errmsg(), "hidden_act") != NULL, "%s", k3_errmsg());
    json_decref(cfg);
    json_decref(over);
    remove_ckpt(out_dir("badact"));
}

int main(void) {
    snprintf(tmp, sizeof tmp, "/tmp/k3-test-synth-XXXXXX");
    if (!mkdtemp(tmp)) return 1;
    RUN(tiny_preset_is_the_fixture_config);
    RUN(bench_preset_is_the_bench_config);
    RUN(real_slice_presets_are_the_shared_configs);
    RUN(user_config_overlays);
    RUN(layouts_match_the_fixtures);
    RUN(seeded_output_reproduces);
    RUN(tokenizer_files_load_with_byte_level_layout);
    RUN(errors_name_the_problem);
    rmdir(tmp);
    return t_done();
}
