/* fuzz_safetensors.c — libFuzzer target for the safetensors header validator.
 * The input is a whole file image; a valid one must also survive lookups of
 * every tensor and reads of its first and last byte (in range by validation). */
#include "io/safetensors.h"

#include <stdint.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    k3_st st;
    k3_st_init(&st);
    if (k3_st_add_buffer(&st, data, size, "fuzz.safetensors") == 0 && k3_st_finish(&st) == 0) {
        volatile uint8_t sink = 0;
        for (int i = 0; i < st.n; i++) {
            const k3_tensor *t = k3_st_find(&st, st.t[i].name);
            if (!t) abort();
            if (t->bytes) sink ^= t->data[0] ^ t->data[t->bytes - 1];
        }
        (void)sink;
    }
    k3_st_clear(&st);
    return 0;
}
