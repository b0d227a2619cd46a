/* tok_internal.h — the tokenizer object shared by tok_load.c (building it
 * from files or a vocab size) and tokenizer.c (encode/decode). Not part of
 * the public API; include text/tokenizer.h instead. */
#ifndef K3_TEXT_TOK_INTERNAL_H
#define K3_TEXT_TOK_INTERNAL_H

#include "text/bpe.h"
#include "text/pretok.h"
#include "text/tokenizer.h"

#include <pthread.h>

/* A direct-mapped cache of BPE results for pieces that are not a rank. */
typedef struct {
    uint64_t hash;
    uint8_t *key;
    uint32_t key_len;
    int32_t *ids;
    uint32_t n;
} piece_cache_ent;

#define PIECE_CACHE_SLOTS 4096
#define PIECE_CACHE_MAX_KEY 256

struct k3_tokenizer {
    k3_ranks ranks;
    int loaded;    /* from files (1) or byte-level (0) */
    int num_base;  /* ranks.n */
    int block;     /* first control id */
    int block_len; /* control ids */
    k3_special_token *specials;
    /* Special matching: which bytes start a spelling, and spellings sorted
     * by (first byte, length descending). */
    uint8_t starts_special[256];
    int32_t *by_first; /* indices into specials */
    k3_pretok *pre;
    pthread_mutex_t cache_lock;
    piece_cache_ent *cache;
};

/* Finish a tokenizer whose ranks are set: create the block (names[i] may be
 * NULL = reserved), the special index, the pattern and the cache. Takes
 * ownership of nothing; copies the names. Returns 0 / -1 + k3_errmsg. */
int k3_tok_finish(k3_tokenizer *t, char *const *names, const int *flags);

#endif
