/* sha256.c — SHA-256 contexts over OpenSSL's EVP interface (see sha256.h). */
#include "io/sha256.h"

#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>

struct k3_sha256 {
    EVP_MD_CTX *ctx;
};

/* libcrypto failing to set up SHA-256 means the library is broken: there is
 * nothing to fall back to, and a digest that was not computed must not be
 * reported, so stop as k3_xmalloc does when memory runs out. */
static void must(int ok) {
    if (ok) return;
    fprintf(stderr, "k3: OpenSSL libcrypto failed to compute SHA-256\n");
    abort();
}

k3_sha256 *k3_sha256_new(void) {
    k3_sha256 *h = malloc(sizeof *h);
    must(h != NULL);
    h->ctx = EVP_MD_CTX_new();
    must(h->ctx && EVP_DigestInit_ex(h->ctx, EVP_sha256(), NULL));
    return h;
}

void k3_sha256_free(k3_sha256 *h) {
    if (!h) return;
    EVP_MD_CTX_free(h->ctx);
    free(h);
}

void k3_sha256_update(k3_sha256 *h, const void *p, size_t n) {
    if (n) must(EVP_DigestUpdate(h->ctx, p, n));
}

void k3_sha256_hex(k3_sha256 *h, char out[K3_SHA256_HEX]) {
    unsigned char d[EVP_MAX_MD_SIZE];
    unsigned int n = 0;
    must(EVP_DigestFinal_ex(h->ctx, d, &n) && n == 32);
    for (unsigned i = 0; i < n; i++) snprintf(out + 2 * i, 3, "%02x", d[i]);
    must(EVP_DigestInit_ex(h->ctx, EVP_sha256(), NULL));
}
