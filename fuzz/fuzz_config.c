/* fuzz_config.c — libFuzzer target for config.json parsing (k3_config_parse),
 * including the per-module MLX quantization lookup. */
#include "io/config.h"

#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    k3_config c;
    if (k3_config_parse((const char *)data, size, "fuzz/config.json", &c) == 0) {
        int bits, group;
        const char *mode;
        for (int i = 0; i < c.num_hidden_layers; i++) (void)k3_config_is_moe_layer(&c, i);
        (void)k3_config_quant_for(&c, "model.layers.1.mlp.gate", &bits, &group, &mode);
        k3_config_free(&c);
    }
    return 0;
}
