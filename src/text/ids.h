/* ids.h — a growable list of token ids, the currency between the BPE merge,
 * the tokenizer and everything that feeds the model. */
#ifndef K3_TEXT_IDS_H
#define K3_TEXT_IDS_H

#include <stddef.h>
#include <stdint.h>

/* Zero-initialise; free with k3_ids_free. */
typedef struct {
    int32_t *ids;
    size_t n, cap;
} k3_ids;
void k3_ids_push(k3_ids *v, int32_t id);
void k3_ids_free(k3_ids *v);

#endif
