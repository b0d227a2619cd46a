/* fuzz_gen_opts.c — libFuzzer target for the `k3 generate` / `k3 chat` flag
 * parser. Input: NUL-separated argv strings (first byte picks the command).
 * Parsing must return 0/1/2 and leave sampler parameters that pass
 * k3_sampler_check whenever it returns 0. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gen/gen_opts.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1 || size > 4096) return 0;
    char *buf = malloc(size + 1);
    memcpy(buf, data + 1, size - 1);
    buf[size - 1] = 0;
    char *argv[64];
    int argc = 0;
    argv[argc++] = (char *)"k3-cmd";
    for (size_t i = 0; i < size - 1 && argc < 63;) {
        argv[argc++] = buf + i;
        i += strlen(buf + i) + 1;
    }
    argv[argc] = NULL;
    const char *cmd = data[0] & 1 ? "chat" : "generate";
    FILE *devnull = fopen("/dev/null", "w");
    FILE *out = stdout, *err = stderr;
    stdout = stderr = devnull; /* usage text is not interesting here */
    k3_gen_opts o;
    int rc = k3_gen_opts_parse(argc, argv, cmd, &o);
    stdout = out;
    stderr = err;
    fclose(devnull);
    if (rc < 0 || rc > 2) abort();
    if (rc == 0 && (k3_sampler_check(&o.sp) || o.max_tokens < 0 || o.n_stops > K3_GEN_MAX_STOPS))
        abort();
    free(buf);
    return 0;
}
