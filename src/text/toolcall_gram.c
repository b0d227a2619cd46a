/* toolcall_gram.c — the grammar of one XTML tool call (text/toolcall.h),
 * for constrained decoding of tool calls (serve/structured.c builds the
 * tools section from one per declared tool). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/mem.h"
#include "text/toolcall.h"

/* An attribute value as XTML writes it ('&' and '"' escaped). */
static char *xtml_esc(const char *s) {
    size_t n = strlen(s), k = 0;
    char *o = k3_xmalloc(n * 6 + 1);
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '&')
            memcpy(o + k, "&amp;", 5), k += 5;
        else if (s[i] == '"')
            memcpy(o + k, "&quot;", 6), k += 6;
        else
            o[k++] = s[i];
    }
    o[k] = 0;
    return o;
}

/* One call of one tool, keyed by `<|open|>call tool="NAME"`; its index
 * attribute (1-based, as chat rendering writes it) is at most max_index. */
void k3_toolcall_gram(k3_gram *g, const char *name, k3_gnode *args, int max_index, k3_gsyms *key,
                      k3_gnode **rest) {
    char *esc = xtml_esc(name);
    size_t n = strlen(esc) + 32;
    char *spec = k3_xmalloc(n);
    snprintf(spec, n, "{O}call tool=\"%s\"", esc);
    k3_gnode *lit = k3_g_lit_ctl(g, spec);
    *key = lit->lit;
    k3_numrange range = {1, max_index, 0};
    k3_gnode *idx = k3_g_number_range(g, 1, &range);
    idx->integer |= 2; /* index="1": no sign */
    k3_gnode *kids[5] = {k3_g_lit_str(g, " index=\""), idx,
                         k3_g_lit_ctl(g, "\"{S}{O}json type=\"object\"{S}"), args,
                         k3_g_lit_ctl(g, "{C}json{S}{C}call{S}")};
    *rest = k3_g_seq(g, kids, 5);
    free(spec);
    free(esc);
}
