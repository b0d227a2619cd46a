/* tokbench.c — tokenizer encode throughput by thread CPU time (robust on a
 * shared machine): each input file is encoded with k3_tok_encode_append
 * (control tokens off) best of 5, single thread (inputs < 1 MiB stay on the
 * serial path), and the KB/s per file plus the ratio first/other are
 * printed. Used for the English-vs-random-bytes figure in docs/tokenizer.md.
 * Not built by the Makefile:
 *
 *     cc -O2 -fopenmp -Iinclude -Isrc bench/tokbench.c build/libk3.a \
 *        -ljansson -lpcre2-8 -lm -lpthread -o build/tokbench
 *     build/tokbench MODEL_DIR english.txt random.bin
 */
#include "base/err.h"
#include "text/pretok.h"
#include "text/tokenizer.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double cpu(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static char *slurp(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long sz = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)sz + 1);
    *n = fread(b, 1, (size_t)sz, f);
    fclose(f);
    return b;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: tokbench MODEL_DIR FILE...\n");
        return 2;
    }
    k3_tokenizer *tok = k3_tok_load(argv[1]);
    if (!tok) {
        fprintf(stderr, "tokbench: %s\n", k3_errmsg());
        return 1;
    }
    double first = 0;
    for (int a = 2; a < argc; a++) {
        size_t n;
        char *text = slurp(argv[a], &n);
        if (!text) {
            perror(argv[a]);
            return 1;
        }
        double best = 1e30;
        size_t ntok = 0;
        for (int rep = 0; rep < 5; rep++) {
            k3_ids v = {0};
            double t0 = cpu();
            if (k3_tok_encode_append(tok, text, n, 0, &v)) {
                fprintf(stderr, "tokbench: %s\n", k3_errmsg());
                return 1;
            }
            double dt = cpu() - t0;
            if (dt < best) best = dt;
            ntok = v.n;
            k3_ids_free(&v);
        }
        double kbs = (double)n / 1e3 / best;
        if (a == 2) first = kbs;
        printf("%-28s %8zu bytes %8zu tokens %9.0f KB/s", argv[a], n, ntok, kbs);
        if (a > 2) printf("  (first/this %.2fx)", first / kbs);
        printf("\n");
        free(text);
    }
#ifndef TOKBENCH_NO_COUNTER /* for timing an older tree, which has no counter */
    printf("PCRE2 JIT stacks created: %zu\n", k3_pretok_jit_stacks_created());
#endif
    k3_tok_free(tok);
    return 0;
}
