/* test_serve_engine_eos.c — the server stops on every id of a config
 * eos_token_id list (as `k3 generate` does; loader_reject.sh checks that one):
 * a copy of the tiny fixture with eos_token_id [999, 637, 5], marked
 * byte-level so it needs no tokenizer files. */
#include "t.h"

#include "serve/engine.h"

#include <unistd.h>

static char dir[256];

static int make_model(void) {
    snprintf(dir, sizeof dir, "/tmp/k3-engine-eos-XXXXXX");
    if (!mkdtemp(dir)) return -1;
    char cmd[2048];
    snprintf(cmd, sizeof cmd,
             "cp '%s/tiny-bf16/model.safetensors' '%s/' && python3 -c \"import json, sys; "
             "c = json.load(open(sys.argv[1])); c['eos_token_id'] = c['text_config']"
             "['eos_token_id'] = [999, 637, 5]; c['k3_tokenizer'] = 'byte-level'; "
             "json.dump(c, open(sys.argv[2], 'w'))\" '%s/tiny-bf16/config.json' "
             "'%s/config.json'",
             t_fixtures(), dir, t_fixtures(), dir);
    return system(cmd) ? -1 : 0;
}

TEST(engine_stops_on_every_eos_id) {
    serve_engine e;
    CHECK(serve_engine_open(&e, dir, "tiny", 1, K3_CACHE_F32) == 0, "%s", k3_errmsg());
    if (!e.model) return;
    CHECK(serve_engine_is_stop(&e, 999));
    CHECK(serve_engine_is_stop(&e, 637));
    CHECK(serve_engine_is_stop(&e, 5));
    CHECK(!serve_engine_is_stop(&e, 6));
    CHECK(!serve_engine_is_stop(&e, 870));
    serve_engine_close(&e);
}

int main(void) {
    if (make_model()) {
        printf("FAIL engine_eos_setup (could not copy the fixture to %s)\n", dir);
        return 1;
    }
    RUN(engine_stops_on_every_eos_id);
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd)) return 1;
    return t_done();
}
