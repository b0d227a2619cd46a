/* sha256.h — SHA-256 (FIPS 180-4) through OpenSSL's libcrypto (EVP), streamed:
 * what the quantizer's manifest records for every shard and every tensor.
 * A digest says whether bytes are the ones it was computed from; it does not
 * say who computed it (see docs/performance.md, "What --check guarantees"). */
#ifndef K3_IO_SHA256_H
#define K3_IO_SHA256_H

#include <stddef.h>

#define K3_SHA256_HEX 65 /* 64 hex digits and a NUL */

typedef struct k3_sha256 k3_sha256;

/* A fresh context (aborts when out of memory, like k3_xmalloc). */
k3_sha256 *k3_sha256_new(void);
void k3_sha256_free(k3_sha256 *h);
void k3_sha256_update(k3_sha256 *h, const void *p, size_t n);
/* The digest so far as lowercase hex into out; the context restarts empty. */
void k3_sha256_hex(k3_sha256 *h, char out[K3_SHA256_HEX]);

#endif
