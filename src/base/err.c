/* err.c — thread-local error messages (see err.h). */
#include "base/err.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ERR_CAP 2048
static _Thread_local char err_buf[ERR_CAP];

int k3_seterr(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err_buf, sizeof err_buf, fmt, ap);
    va_end(ap);
    return -1;
}

int k3_preferr(const char *fmt, ...) {
    char old[ERR_CAP], pre[ERR_CAP];
    memcpy(old, err_buf, sizeof old);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(pre, sizeof pre, fmt, ap);
    va_end(ap);
    snprintf(err_buf, sizeof err_buf, "%.1000s: %.1000s", pre, old);
    return -1;
}

const char *k3_errmsg(void) {
    return err_buf;
}

void k3_clearerr(void) {
    err_buf[0] = 0;
}

void k3_die(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("k3: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(1);
}
