/* fuzz_jsonschema.c — libFuzzer target for the JSON Schema compiler and the
 * grammar matcher (text/jsonschema.h, text/grammar.h). Input: a schema (JSON)
 * and, after a NUL byte, text to feed. The compiler must either refuse the
 * schema with a message or give a grammar; the matcher takes the longest
 * accepted prefix of the text, and from there the cheapest completion (the
 * symbol with the least k3_gstate_rem at each step) must finish within
 * k3_gstate_rem symbols and make the whole text parse as JSON. The grammar
 * stays within its node budget (grammar.h), whatever the schema. */
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "text/grammar.h"
#include "text/jsonschema.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const uint8_t *nul = memchr(data, 0, size);
    size_t slen = nul ? (size_t)(nul - data) : size;
    json_t *schema = json_loadb((const char *)data, slen, JSON_DECODE_ANY, NULL);
    if (!schema) return 0;
    k3_gram *g = k3_gram_new();
    char err[512];
    k3_gnode *v = k3_schema_compile(g, schema, err, sizeof err, NULL);
    json_decref(schema);
    if (k3_gram_nodes(g) > K3_G_MAX_NODES + 64) abort(); /* the budget was not checked */
    if (!v) {
        if (!err[0]) abort(); /* a refusal always says why */
        k3_gram_free(g);
        return 0;
    }
    k3_gnode *kids[2] = {v, k3_g_lit_ctl(g, "{E}")};
    k3_gnode *root = k3_g_seq(g, kids, 2);
    k3_gstate st, tmp;
    k3_gstate_init(&st, root);
    char *text = malloc(size + 4096);
    size_t n = 0;
    const uint8_t *t = nul ? nul + 1 : data + size;
    for (; t < data + size; t++) {
        int before = k3_gstate_rem(&st);
        k3_gstate_copy(&tmp, &st);
        if (!k3_gstate_step(&tmp, *t) || k3_gstate_done(&tmp)) break;
        int after = k3_gstate_rem(&tmp);
        if (after < before - 1) abort(); /* one symbol completes at most one */
        k3_gstate_copy(&st, &tmp);
        text[n++] = (char)*t;
    }
    int need = k3_gstate_rem(&st);
    if (need > 3000) { /* shared $refs: the smallest completion can be huge */
        free(text);
        k3_gram_free(g);
        return 0;
    }
    for (int steps = 0; !k3_gstate_done(&st); steps++) {
        if (steps > need || n >= size + 4000) abort(); /* the remainder was a lie */
        int best = -1, best_rem = 1 << 30;
        for (int s = 1; s < K3_SYM_COUNT; s++) {
            k3_gstate_copy(&tmp, &st);
            if (!k3_gstate_step(&tmp, s)) continue;
            int r = k3_gstate_rem(&tmp);
            if (r < best_rem) best_rem = r, best = s;
        }
        if (best < 0 || !k3_gstate_step(&st, best)) abort();
        if (best < 256) text[n++] = (char)best;
    }
    json_t *doc = json_loadb(text, n, JSON_DECODE_ANY | JSON_ALLOW_NUL, NULL);
    if (!doc) abort(); /* the grammar let invalid JSON through */
    json_decref(doc);
    free(text);
    k3_gram_free(g);
    return 0;
}
