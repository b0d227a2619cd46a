/* guard.c — Host / Origin / framing checks before a request is routed (guard.h). */
#include "serve/guard.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <netinet/in.h>
#include <string.h>
#include <strings.h>

#define FORBIDDEN "forbidden"

void serve_guard_init(serve_guard *g, const char *bind_host, const char *const *hosts, int n_hosts,
                      const char *const *origins, int n_origins) {
    memset(g, 0, sizeof *g);
    g->loopback_bind = serve_is_loopback_bind(bind_host);
    g->hosts = hosts;
    g->n_hosts = hosts ? n_hosts : 0;
    g->origins = origins;
    g->n_origins = origins ? n_origins : 0;
}

/* 1 if s (no brackets, no port) is a loopback address or a localhost name. */
static int loopback_name(const char *s) {
    size_t n = strlen(s);
    if (!strcasecmp(s, "localhost")) return 1;
    if (n > 10 && !strcasecmp(s + n - 10, ".localhost")) return 1; /* RFC 6761 */
    struct in_addr a4;
    if (inet_pton(AF_INET, s, &a4) == 1) return (ntohl(a4.s_addr) >> 24) == 127;
    struct in6_addr a6;
    if (inet_pton(AF_INET6, s, &a6) == 1) {
        if (IN6_IS_ADDR_LOOPBACK(&a6)) return 1;
        return IN6_IS_ADDR_V4MAPPED(&a6) && a6.s6_addr[12] == 127;
    }
    return 0;
}

int serve_is_loopback_bind(const char *bind_host) {
    return bind_host && loopback_name(bind_host);
}

/* The host of a Host header value: lower-case, without port, brackets or a
 * trailing dot. 0 if it is not a plausible host. */
static int host_part(const char *h, char *out, size_t cap) {
    const char *end = h + strlen(h), *port = NULL;
    if (h[0] == '[') {
        const char *rb = strchr(h, ']');
        if (!rb) return 0;
        if (rb[1] == ':')
            port = rb + 2;
        else if (rb[1])
            return 0;
        h++;
        end = rb;
    } else {
        const char *colon = strrchr(h, ':');
        if (colon) {
            if (strchr(h, ':') != colon) return 0; /* bare IPv6 needs brackets */
            end = colon;
            port = colon + 1;
        }
    }
    if (port) {
        if (!*port || strlen(port) > 5) return 0;
        for (const char *p = port; *p; p++)
            if (!isdigit((unsigned char)*p)) return 0;
    }
    size_t len = (size_t)(end - h);
    if (len > 0 && h[len - 1] == '.') len--;
    if (len == 0 || len >= cap) return 0;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)h[i];
        if (c <= 0x20 || c >= 0x7f || c == '/' || c == '@') return 0;
        out[i] = (char)tolower(c);
    }
    out[len] = 0;
    return 1;
}

static int in_list(const char *const *list, int n, const char *a, const char *b) {
    for (int i = 0; i < n; i++) {
        if (!list[i]) continue;
        if (!strcmp(list[i], "*")) return 1;
        size_t l = strlen(list[i]);
        while (l > 1 && (list[i][l - 1] == '.' || list[i][l - 1] == '/')) l--;
        if (a && strlen(a) == l && !strncasecmp(list[i], a, l)) return 1;
        if (b && strlen(b) == l && !strncasecmp(list[i], b, l)) return 1;
    }
    return 0;
}

int serve_host_allowed(const serve_guard *g, const char *host) {
    if (!g->loopback_bind && g->n_hosts == 0) return 1; /* not asked to check */
    if (!host) return 1;                                /* HTTP/1.0: no browser */
    if (in_list(g->hosts, g->n_hosts, host, NULL)) return 1;
    char h[256];
    if (!host_part(host, h, sizeof h)) return 0;
    return loopback_name(h) || in_list(g->hosts, g->n_hosts, h, NULL);
}

int serve_guard_origin_allowed(const serve_guard *g, const char *origin, const char *host) {
    if (!origin) return 1;
    char o[512];
    size_t n = strlen(origin);
    if (n == 0 || n >= sizeof o) return 0;
    memcpy(o, origin, n + 1);
    while (n > 0 && o[n - 1] == '/') o[--n] = 0;
    if (in_list(g->origins, g->n_origins, o, NULL)) return 1;
    const char *rest = strstr(o, "://");
    if (!rest || !host || !*host) return 0; /* "null" and the like */
    return !strcasecmp(rest + 3, host);     /* same origin: scheme://HOST[:PORT] */
}

int serve_guard_check(const serve_guard *g, const serve_guard_hdrs *h, serve_err *e) {
    if (h->content_length && h->transfer_encoding)
        return serve_err_set(e, 400, NULL, NULL, "conflicting_length",
                             "A request may not carry both Content-Length and "
                             "Transfer-Encoding.");
    if (!serve_host_allowed(g, h->host))
        return serve_err_set(e, 403, FORBIDDEN, NULL, "host_not_allowed",
                             "Host '%s' is not allowed: this server answers to loopback names "
                             "only (start it with --allowed-host NAME to accept another).",
                             h->host);
    if (h->method && !strcmp(h->method, "POST") &&
        !serve_guard_origin_allowed(g, h->origin, h->host))
        return serve_err_set(e, 403, FORBIDDEN, NULL, "origin_not_allowed",
                             "Origin '%s' is not allowed to use this server (cross-origin "
                             "requests need an allowed origin).",
                             h->origin);
    return 0;
}
