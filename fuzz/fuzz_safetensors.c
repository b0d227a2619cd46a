/* fuzz_safetensors.c — libFuzzer target for the safetensors header validator
 * and the shard index parser. The input is a whole file image (a valid one must
 * also survive lookups of every tensor and reads of its first and last byte,
 * in range by validation); inputs starting with '{' are also parsed as a
 * model.safetensors.index.json. */
#include "io/safetensors.h"

#include <stdint.h>
#include <stdlib.h>

static void fuzz_index(const uint8_t *data, size_t size) {
    char **files;
    int n;
    if (k3_st_parse_index((const char *)data, size, "fuzz.index.json", &files, &n) == 0) {
        for (int i = 0; i < n; i++) free(files[i]);
        free(files);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size && data[0] == '{') fuzz_index(data, size);
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
