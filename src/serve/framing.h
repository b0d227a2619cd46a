/* framing.h — how a request's body is delimited, checked before any of it is
 * read (RFC 9112 §5.1, §6). libmicrohttpd takes the first Content-Length of
 * several, keeps a header name that ends in whitespace as a different name
 * ("Transfer-Encoding " is not Transfer-Encoding, so the chunked body is read
 * as the next request) and waits forever for the end of a body whose transfer
 * coding it does not know. Each of these is a way to smuggle a request past a
 * proxy that reads the message differently, so the server refuses them all
 * and closes the connection:
 *
 *   - a header name that is not an RFC 9110 token (whitespace before the
 *     colon, control bytes): 400 invalid_header;
 *   - a Content-Length that is not digits, or several that differ:
 *     400 conflicting_length;
 *   - a Transfer-Encoding other than exactly one "chunked": 501
 *     unsupported_transfer_encoding.
 *
 * Pure functions of their arguments (no I/O), fuzzed by fuzz_http_request. */
#ifndef K3_SERVE_FRAMING_H
#define K3_SERVE_FRAMING_H

#include <stddef.h>

#include "serve/request.h"

typedef struct {
    int bad_name;       /* a header name that is not a token */
    char name[64];      /* its first bytes (escaped later for the message) */
    int n_length;       /* Content-Length fields seen */
    int length_bad;     /* one is not 1*DIGIT */
    int length_differs; /* two differ */
    char length[32];    /* the first value */
    int n_te;           /* Transfer-Encoding fields seen */
    int te_other;       /* one is not "chunked" */
} serve_framing;

/* Feed every request header (name and value as received, in order). */
void serve_framing_add(serve_framing *f, const char *name, size_t name_len, const char *value,
                       size_t value_len);
/* 0, or -1 + e (400 or 501, see above) once all headers were added. */
int serve_framing_check(const serve_framing *f, serve_err *e);

#endif
