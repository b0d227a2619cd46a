/* auth.c — API keys and the per-client scope (guard.h): which credential a
 * request presents, whether it is one of the configured keys (constant
 * time), the scope key that prompt cache and Responses store share, and the
 * --api-key-file reader. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/mem.h"
#include "serve/guard.h"

/* 1 if p equals key; the time depends on the key's length only. */
static int key_equal(const char *key, const char *p) {
    size_t n = strlen(key), m = strlen(p);
    unsigned diff = (unsigned)(n != m);
    for (size_t i = 0; i < n; i++) diff |= (unsigned char)key[i] ^ (unsigned char)p[i < m ? i : 0];
    return diff == 0;
}

/* The key among keys that p equals, or NULL; all keys are compared. */
static const char *match_key(const char *const *keys, int n_keys, const char *p) {
    const char *hit = NULL;
    for (int i = 0; i < n_keys; i++)
        if (key_equal(keys[i], p) && !hit) hit = keys[i];
    return hit;
}

static const char *bearer_token(const char *authz) {
    if (!authz) return NULL;
    return strncasecmp(authz, "Bearer ", 7) ? authz : authz + 7;
}

int serve_auth_check(const char *const *keys, int n_keys, const char *authz, const char *xkey,
                     serve_cred *cred) {
    const char *tok = bearer_token(authz);
    if (n_keys <= 0) {
        const char *c = tok ? tok : xkey ? xkey : "";
        *cred = (serve_cred){c, strlen(c)};
        return 1;
    }
    const char *hit = tok && tok != authz ? match_key(keys, n_keys, tok) : NULL;
    if (!hit && xkey) hit = match_key(keys, n_keys, xkey);
    *cred = (serve_cred){hit ? hit : "", hit ? strlen(hit) : 0};
    return hit != NULL;
}

char *serve_scope_key(serve_cred cred, const char *salt, size_t salt_len, size_t *len) {
    if (!salt) salt_len = 0;
    char *s = k3_xmalloc(cred.n + salt_len + 24);
    int p = snprintf(s, 24, "%zu:", cred.n);
    memcpy(s + p, cred.s, cred.n);
    if (salt_len) memcpy(s + p + cred.n, salt, salt_len);
    *len = (size_t)p + cred.n + salt_len;
    return s;
}

/* Trim blanks (and a CR) around line, in place. */
static char *trim(char *line) {
    while (*line == ' ' || *line == '\t') line++;
    size_t n = strlen(line);
    while (n && (line[n - 1] == ' ' || line[n - 1] == '\t' || line[n - 1] == '\r' ||
                 line[n - 1] == '\n'))
        line[--n] = 0;
    return line;
}

static int add_key(const char *path, int lineno, const char *k, char ***keys, int *n, char *msg,
                   size_t cap) {
    for (const char *p = k; *p; p++)
        if ((unsigned char)*p < 0x21 || (unsigned char)*p > 0x7e) {
            snprintf(msg, cap,
                     "%s:%d: an API key may hold visible ASCII characters only (no spaces or "
                     "control characters)",
                     path, lineno);
            return -1;
        }
    for (int i = 0; i < *n; i++)
        if (!strcmp((*keys)[i], k)) {
            snprintf(msg, cap, "%s:%d: this key is already given", path, lineno);
            return -1;
        }
    *keys = k3_xrealloc(*keys, (size_t)(*n + 1) * sizeof **keys);
    (*keys)[(*n)++] = k3_xstrdup(k);
    return 0;
}

int serve_keys_load(const char *path, char ***keys, int *n, char *msg, size_t cap) {
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(msg, cap, "%s: cannot read the API key file: %s", path, strerror(errno));
        return -1;
    }
    char *line = NULL;
    size_t lcap = 0;
    int lineno = 0, found = 0, rc = 0;
    ssize_t got;
    while ((got = getline(&line, &lcap, f)) >= 0) {
        lineno++;
        if (strlen(line) != (size_t)got) {
            snprintf(msg, cap, "%s:%d: a NUL byte in an API key", path, lineno);
            rc = -1;
            break;
        }
        if (got > 4096) {
            snprintf(msg, cap, "%s:%d: line too long for an API key (at most 4096 bytes)", path,
                     lineno);
            rc = -1;
            break;
        }
        char *k = trim(line);
        if (!*k || *k == '#') continue;
        if ((rc = add_key(path, lineno, k, keys, n, msg, cap))) break;
        found++;
    }
    if (!rc && ferror(f)) {
        snprintf(msg, cap, "%s: read error: %s", path, strerror(errno));
        rc = -1;
    }
    if (!rc && !found) {
        snprintf(msg, cap, "%s: the API key file holds no key (one key per line; '#' comments)",
                 path);
        rc = -1;
    }
    free(line);
    fclose(f);
    return rc;
}
