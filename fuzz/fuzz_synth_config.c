/* fuzz_synth_config.c — libFuzzer target for the synthetic-checkpoint config
 * builder (`k3 synth --config FILE`). Input: one byte choosing the preset,
 * then the user JSON. The merged config must either be refused with a
 * message or be a JSON object that the engine's config reader then accepts
 * or refuses with a message — never crash or read out of bounds. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "gen/synth.h"
#include "io/config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    static const char *presets[] = {NULL, "tiny", "bench", "other"};
    const char *preset = presets[data[0] & 3];
    k3_synth_opts o = {.mxfp4 = (data[0] >> 2) & 1, .f32 = (data[0] >> 3) & 1};
    json_t *user = json_loadb((const char *)data + 1, size - 1, 0, NULL);
    json_t *cfg = k3_synth_config(preset, user, &o);
    if (cfg) {
        if (!json_is_object(cfg) || !json_is_object(json_object_get(cfg, "text_config"))) abort();
        char *text = json_dumps(cfg, JSON_COMPACT);
        k3_config c;
        memset(&c, 0, sizeof c);
        if (text && k3_config_parse(text, strlen(text), "fuzz", &c) == 0)
            k3_config_free(&c);
        else if (!*k3_errmsg())
            abort(); /* a refusal must say why */
        free(text);
        json_decref(cfg);
    } else if (!*k3_errmsg()) {
        abort();
    }
    k3_clearerr();
    json_decref(user);
    return 0;
}
