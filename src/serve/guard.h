/* guard.h — checks on a request's headers before anything else is done with
 * it: the Host header (DNS rebinding), the Origin of a POST
 * (cross-site "simple" requests such as text/plain, which a browser sends
 * without a CORS preflight), and Content-Length together with
 * Transfer-Encoding (request smuggling).
 *
 *   serve_guard g;
 *   serve_guard_init(&g, "127.0.0.1", hosts, n_hosts, origins, n_origins);
 *   serve_err e;
 *   if (serve_guard_check(&g, &hdrs, &e)) -> reply e (403/400), close
 *
 * Pure functions of their arguments (no I/O): fuzzed by fuzz_http_request.
 *
 * Host: with a loopback bind (127.0.0.0/8, ::1, "localhost") only loopback
 * names are accepted (localhost, *.localhost, 127.x.y.z, [::1], with any
 * port), plus each --allowed-host; "*" accepts any. With another bind the
 * Host is only checked when --allowed-host is given. A request without Host
 * (HTTP/1.0) passes: browsers always send one.
 *
 * Origin: serve_guard_origin_allowed() is the one place that decides whether a
 * browser origin may use the API. A POST that carries an Origin is refused
 * unless the origin is the server itself (same host and port as Host) or is
 * in the allowed-origins list (empty by default; `--cors-origin`
 * fills it; "*" allows any). */
#ifndef K3_SERVE_GUARD_H
#define K3_SERVE_GUARD_H

#include "serve/request.h"

typedef struct {
    int loopback_bind;
    const char *const *hosts; /* --allowed-host values (borrowed) */
    int n_hosts;
    const char *const *origins; /* allowed CORS origins (borrowed) */
    int n_origins;
} serve_guard;

/* The request headers the guard looks at (NULL when absent). */
typedef struct {
    const char *method;
    const char *host;
    const char *origin;
    const char *content_length;
    const char *transfer_encoding;
} serve_guard_hdrs;

void serve_guard_init(serve_guard *g, const char *bind_host, const char *const *hosts, int n_hosts,
                      const char *const *origins, int n_origins);

/* 1 if bind_host is a loopback address or name. */
int serve_is_loopback_bind(const char *bind_host);
/* 1 if the Host header value is acceptable (see above). */
int serve_host_allowed(const serve_guard *g, const char *host);
/* 1 if a browser at `origin` may use the API: same origin as `host`, or an
 * allowed origin. NULL origin (not a browser) is allowed. */
int serve_guard_origin_allowed(const serve_guard *g, const char *origin, const char *host);

/* All pre-body checks. 0, or -1 + e (403 host_not_allowed /
 * origin_not_allowed, 400 conflicting_length). */
int serve_guard_check(const serve_guard *g, const serve_guard_hdrs *h, serve_err *e);

/* ---- authentication and scopes (auth.c) ----
 *
 * A request presents a credential: the token of "Authorization: Bearer T",
 * else the whole Authorization value, else the x-api-key header; "" when it
 * sends none. With API keys configured (--api-key, repeatable, and
 * --api-key-file) the credential must equal one of them; every key is
 * compared in full, in time that does not depend on where they differ. Each
 * key is its own scope; without keys each credential is. */
typedef struct {
    const char *s; /* borrowed: the matched key, or the header's bytes */
    size_t n;
} serve_cred;

/* 1 if the request may pass (*cred filled), 0 if not (401). authz / xkey:
 * the header values or NULL. */
int serve_auth_check(const char *const *keys, int n_keys, const char *authz, const char *xkey,
                     serve_cred *cred);

/* The scope of what the server keeps for a client (prompt-cache snapshots,
 * stored responses): credential and cache_salt, length-prefixed so that no
 * two (credential, salt) pairs collide. malloc'd, *len its bytes. */
char *serve_scope_key(serve_cred cred, const char *salt, size_t salt_len, size_t *len);

/* Read an API key file: one key per line, surrounding blanks trimmed,
 * blank lines and lines starting with '#' skipped. Appends malloc'd keys to
 * *keys (realloc'd, *n counted). 0, or -1 + msg naming the file (and line)
 * when it cannot be read, a key holds a character outside visible ASCII, a
 * key repeats, or it holds no key. */
int serve_keys_load(const char *path, char ***keys, int *n, char *msg, size_t cap);

#endif
