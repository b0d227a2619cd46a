/* err.h — error reporting for every layer of k3.
 *
 * A failing function records a human-readable message with k3_seterr() and
 * returns an error value (NULL or -1). The caller either adds context with
 * k3_preferr() ("loading DIR: ...") or prints k3_errmsg() and exits non-zero.
 * The message is thread-local, so OpenMP workers and server threads do not
 * overwrite each other. */
#ifndef K3_BASE_ERR_H
#define K3_BASE_ERR_H

#include <stddef.h>

#if defined(__GNUC__)
#define K3_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define K3_PRINTF(a, b)
#endif

/* Replace the current message. Always returns -1, so `return k3_seterr(...)` works. */
int k3_seterr(const char *fmt, ...) K3_PRINTF(1, 2);
/* Prefix the current message with more context: "<prefix>: <old message>". Returns -1. */
int k3_preferr(const char *fmt, ...) K3_PRINTF(1, 2);
/* The current message ("" if none). */
const char *k3_errmsg(void);
void k3_clearerr(void);

/* Print "k3: <fmt>" to stderr and exit(1). For the CLI only. */
void k3_die(const char *fmt, ...) K3_PRINTF(1, 2) __attribute__((noreturn));

#endif
