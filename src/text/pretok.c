/* pretok.c — K3 pre-tokenization with PCRE2 (see pretok.h). */
#include "text/pretok.h"

#include "base/err.h"
#include "base/mem.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

/* White_Space as Rust's regex \s sees it; PCRE2's UCP \s would add U+180E. */
#define WS                                                                                         \
    "\\t\\n\\x0B\\f\\r\\x20\\x85\\xA0\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{"  \
    "205F}\\x{3000}"
/* [X&&[^\p{Han}]] rewritten as (?:(?!\p{sc=Han})[X]): PCRE2 has no class
 * intersection, and sc= keeps Script (not Script_Extensions) semantics. */
#define UPPERISH "(?:(?!\\p{sc=Han})[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}])"
#define LOWERISH "(?:(?!\\p{sc=Han})[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}])"
#define CONTRACTION "(?i:'s|'t|'re|'ve|'m|'ll|'d)?"

const char k3_pretok_pattern[] =
    "\\p{sc=Han}+"
    "|[^\\r\\n\\p{L}\\p{N}]?" UPPERISH "*" LOWERISH "+" CONTRACTION
    "|[^\\r\\n\\p{L}\\p{N}]?" UPPERISH "+" LOWERISH "*" CONTRACTION "|\\p{N}{1,3}"
    "| ?[^" WS "\\p{L}\\p{N}]+[\\r\\n]*"
    "|[" WS "]*[\\r\\n]+"
    "|[" WS "]+(?![^" WS "])"
    "|[" WS "]+";

struct k3_pretok {
    pcre2_code *code;
    int jit; /* 1 if JIT compiled */
};

k3_pretok *k3_pretok_new(void) {
    int errcode;
    PCRE2_SIZE erroff;
    pcre2_code *code = pcre2_compile((PCRE2_SPTR)k3_pretok_pattern, PCRE2_ZERO_TERMINATED,
                                     PCRE2_UTF | PCRE2_UCP, &errcode, &erroff, NULL);
    if (!code) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(errcode, msg, sizeof msg);
        k3_seterr("pre-tokenizer pattern: PCRE2 error at offset %zu: %s", (size_t)erroff,
                  (const char *)msg);
        return NULL;
    }
    k3_pretok *p = k3_xcalloc(1, sizeof *p);
    p->code = code;
    p->jit = pcre2_jit_compile(code, PCRE2_JIT_COMPLETE) == 0;
    return p;
}

void k3_pretok_free(k3_pretok *p) {
    if (!p) return;
    pcre2_code_free(p->code);
    free(p);
}

/* Match resources, one set per thread, created on the thread's first split
 * and reused for every later one (of any k3_pretok: they do not depend on
 * the pattern); freed when the thread exits. The JIT stack must hold long
 * runs (a 25 000 letter word backtracks through the lookahead group per
 * character), so it may grow to 64 MiB; creating one per call cost a 64 MiB
 * mapping for every text segment. */
typedef struct {
    pcre2_match_data *md;
    pcre2_match_context *mc;
    pcre2_jit_stack *js;
} match_res;

static pthread_key_t res_key;
static pthread_once_t res_once = PTHREAD_ONCE_INIT;
static int res_key_ok;
static atomic_size_t jit_stacks_created, match_sets_created;

static void match_res_free(void *v) {
    match_res *m = v;
    if (!m) return;
    pcre2_match_data_free(m->md);
    pcre2_match_context_free(m->mc);
    if (m->js) pcre2_jit_stack_free(m->js);
    free(m);
}

static void make_key(void) {
    res_key_ok = pthread_key_create(&res_key, match_res_free) == 0;
}

/* This thread's resources (with a JIT stack when jit), or NULL. */
static match_res *thread_res(int jit) {
    pthread_once(&res_once, make_key);
    if (!res_key_ok) return NULL;
    match_res *m = pthread_getspecific(res_key);
    if (!m) {
        m = k3_xcalloc(1, sizeof *m);
        m->md = pcre2_match_data_create(1, NULL);
        m->mc = pcre2_match_context_create(NULL);
        if (!m->md || !m->mc || pthread_setspecific(res_key, m)) {
            match_res_free(m);
            return NULL;
        }
        atomic_fetch_add(&match_sets_created, 1);
    }
    if (jit && !m->js) {
        m->js = pcre2_jit_stack_create(32 * 1024, 64 * 1024 * 1024, NULL);
        if (m->js) {
            pcre2_jit_stack_assign(m->mc, NULL, m->js);
            atomic_fetch_add(&jit_stacks_created, 1);
        }
    }
    return m;
}

size_t k3_pretok_jit_stacks_created(void) {
    return atomic_load(&jit_stacks_created);
}

size_t k3_pretok_match_sets_created(void) {
    return atomic_load(&match_sets_created);
}

int k3_pretok_split(const k3_pretok *p, const char *s, size_t n, k3_piece_fn fn, void *ctx) {
    if (n == 0) return 0;
    match_res *mr = thread_res(p->jit);
    if (!mr) return k3_seterr("pre-tokenizer: out of memory");
    match_res m = *mr;
    int rc = 0;
    size_t pos = 0;
    while (pos < n) {
        /* The JIT entry point skips pcre2_match's option checks (a piece is
         * only a few bytes, so per-call overhead matters); ANCHORED since
         * the pieces tile the text. */
        int got = p->jit ? pcre2_jit_match(p->code, (PCRE2_SPTR)s, n, pos, 0, m.md, m.mc)
                         : pcre2_match(p->code, (PCRE2_SPTR)s, n, pos,
                                       PCRE2_NO_UTF_CHECK | PCRE2_ANCHORED, m.md, m.mc);
        if (got < 0) {
            PCRE2_UCHAR msg[256];
            pcre2_get_error_message(got, msg, sizeof msg);
            rc = k3_seterr("pre-tokenizer: no piece at byte %zu of %zu (%s)", pos, n,
                           (const char *)msg);
            break;
        }
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(m.md);
        /* The pieces must tile the input (chat.md §1.4): a gap or an empty
         * match would drop or loop on text. */
        if (ov[0] != pos || ov[1] <= pos) {
            rc = k3_seterr("pre-tokenizer: pieces do not tile the input at byte %zu", pos);
            break;
        }
        size_t end = ov[1]; /* read before the callback: it may split text itself */
        rc = fn(ctx, s + pos, end - pos);
        if (rc) break;
        pos = end;
    }
    return rc;
}
