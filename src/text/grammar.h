/* grammar.h — a small pushdown grammar over symbols, matched one symbol at a
 * time, for constrained decoding (gen/constrain.h compiles JSON Schema and
 * the XTML envelope into it, text/jsonschema.h).
 *
 * Symbols are bytes 0..255 plus four control symbols for the XTML control
 * tokens (K3_SYM_OPEN <|open|>, CLOSE, SEP, EOM <|end_of_msg|>), which are
 * distinct from the bytes that spell them: structure is only ever a control
 * token, never text that looks like one.
 *
 * A grammar is a graph of immutable nodes owned by a k3_gram (freed at
 * once). A k3_gstate is a bounded stack of frames (one per open node); it is
 * a plain value (copy it with k3_gstate_copy) so a vocabulary trie can be
 * walked depth first from any state. Every node kind is deterministic given
 * the next symbol (alternatives must start with different symbols, or be
 * literals none of which is a prefix of another), so matching never
 * backtracks.
 *
 * k3_gstate_rem gives the fewest symbols that complete the grammar from a
 * state; the constraint engine uses it to close the output before the token
 * budget runs out (one symbol is at most one token: every byte and control
 * symbol has its own token).
 *
 * $ref cycles are not representable (the schema compiler refuses them).
 * Nodes may be shared: the schema compiler builds each $ref'd definition
 * once and points every use at it, so a grammar is a DAG whose size is
 * linear in its schema. Its size is budgeted (K3_G_MAX_NODES nodes,
 * K3_G_MAX_BYTES bytes, k3_gram_over): compilers check it as they go and
 * give up, so no request can make one grow without bound.
 *
 * Nodes:
 *   LIT    a fixed symbol string
 *   SEQ    children in order
 *   KEYED  one of n (literal, node) pairs: the literal picks the pair (the
 *          literals form a prefix-free set), then the node follows
 *   REPEAT child min..max times; another repetition starts when the next
 *          symbol can start the child, else the repeat ends
 *   TEXT   any byte symbols, ended by (not consuming) a control symbol
 *   STRING a JSON string: escapes, well-formed UTF-8, min/max length in
 *          code points, optionally a fixed format template (date, uuid...)
 *   NUMBER a JSON number (integer: no fraction or exponent), bounded digits;
 *          with a range (k3_g_number_range) every prefix is checked to have
 *          a completion inside it (grammar_num.c)
 *   ENUM   a set of literal JSON texts (enum, const, true/false, null)
 *   OBJECT properties in declaration order (optional ones may be skipped,
 *          required ones may not), no other keys
 *   FREEOBJ an object with any keys and values of one node
 *   ARRAY  items of one node, min..max items
 *   ANY    any JSON value (depth bounded)
 *   UNION  alternatives told apart by their first symbol */
#ifndef K3_TEXT_GRAMMAR_H
#define K3_TEXT_GRAMMAR_H

#include <stddef.h>
#include <stdint.h>

enum { K3_SYM_OPEN = 256, K3_SYM_CLOSE, K3_SYM_SEP, K3_SYM_EOM, K3_SYM_COUNT };

typedef enum {
    K3_G_LIT,
    K3_G_SEQ,
    K3_G_KEYED,
    K3_G_REPEAT,
    K3_G_TEXT,
    K3_G_STRING,
    K3_G_NUMBER,
    K3_G_ENUM,
    K3_G_OBJECT,
    K3_G_FREEOBJ,
    K3_G_ARRAY,
    K3_G_ANY,
    K3_G_UNION
} k3_gkind;

#define K3_G_MAX_PROPS 64          /* properties per object */
#define K3_G_MAX_DEPTH 48          /* frames per state */
#define K3_G_MAX_NODES 20000       /* nodes per grammar (k3_gram_over) */
#define K3_G_MAX_BYTES (16u << 20) /* bytes per grammar (k3_gram_over) */

typedef struct k3_gnode k3_gnode;
typedef struct k3_redfa k3_redfa; /* text/regex.h */

/* A numeric range: integers as themselves; numbers scaled by 10^K3_G_FRAC
 * (at most K3_G_FRAC fraction and K3_G_NUM_INT integer digits, no
 * exponent). Bounds inclusive; mult (integers only, 0 = none): the value
 * must be a multiple of it. */
#define K3_G_FRAC 6
#define K3_G_NUM_INT 12
typedef struct {
    long long lo, hi;
    unsigned long long mult;
} k3_numrange;

typedef struct {
    uint16_t *s; /* symbols */
    int len;
} k3_gsyms;

struct k3_gnode {
    k3_gkind kind;
    int minlen;              /* fewest symbols of a complete match */
    uint64_t first[5];       /* symbols that can start it (bitset over K3_SYM_COUNT) */
    k3_gsyms lit;            /* LIT */
    k3_gnode **kids;         /* SEQ, UNION, KEYED (per literal), OBJECT (per property) */
    int n_kids;              /* ... also ENUM: number of literals */
    k3_gsyms *lits;          /* KEYED literals, ENUM literals (sorted), OBJECT keys ("\"k\"") */
    unsigned char *required; /* OBJECT */
    k3_gnode *item;          /* REPEAT child, FREEOBJ value, ARRAY items */
    int min, max;            /* REPEAT/ARRAY counts, STRING lengths (max -1: none) */
    int integer;             /* NUMBER: 1 integer, 2 no minus sign (flags) */
    const char *format;      /* STRING template or NULL */
    const k3_redfa *re;      /* STRING: contents follow this DFA (text/regex.h), or NULL */
    int *req_after;          /* OBJECT [n+1]: symbols for the required props from i on
                              * (each with its comma) and the '}' */
    int *opt_min;            /* OBJECT [n+1]: cheapest property from i on (INT_MAX/4: none) */
    int *n_req;              /* OBJECT [n+1]: required props from i on */
    int lead;                /* OBJECT: 0, or property 0 was begun by an enclosing KEYED
                              * literal: 1 its key and ':' (its value comes next),
                              * 2 all of it (',' or '}' comes next) */
    int ranged;              /* NUMBER: range applies */
    k3_numrange range;       /* NUMBER */
};

/* Can symbol `sym` start node `n`? (its first set; sym < K3_SYM_COUNT) */
static inline int k3_gnode_has_first(const k3_gnode *n, int sym) {
    return (int)((n->first[sym >> 6] >> (sym & 63)) & 1);
}

/* A grammar: owns its nodes. */
typedef struct k3_gram k3_gram;
k3_gram *k3_gram_new(void);
void k3_gram_free(k3_gram *g);
/* Nodes and bytes built so far. */
size_t k3_gram_nodes(const k3_gram *g);
size_t k3_gram_bytes(const k3_gram *g);
/* NULL while within budget, else which budget was passed ("grammar nodes",
 * "grammar bytes"). The builders still work past it (callers check). */
const char *k3_gram_over(const k3_gram *g);
/* Zeroed memory owned by the grammar (counted in its bytes). */
void *k3_gram_alloc(k3_gram *g, size_t n);

/* Builders (the grammar owns everything they return; inputs are copied). */
k3_gnode *k3_g_lit(k3_gram *g, const uint16_t *s, int len);
k3_gnode *k3_g_lit_str(k3_gram *g,
                       const char *text); /* bytes; "\x01".."\x04" in text are not special */
/* A literal from a spec where "{O}" "{C}" "{S}" "{E}" stand for the control symbols. */
k3_gnode *k3_g_lit_ctl(k3_gram *g, const char *spec);
k3_gnode *k3_g_seq(k3_gram *g, k3_gnode *const *kids, int n);
k3_gnode *k3_g_keyed(k3_gram *g, const k3_gsyms *lits, k3_gnode *const *kids, int n);
k3_gnode *k3_g_repeat(k3_gram *g, k3_gnode *child, int min, int max);
k3_gnode *k3_g_text(k3_gram *g);
k3_gnode *k3_g_string(k3_gram *g, int min_len, int max_len, const char *format);
/* A JSON string whose contents the DFA accepts (text/regex.h). */
k3_gnode *k3_g_string_re(k3_gram *g, const k3_redfa *re);
k3_gnode *k3_g_number(k3_gram *g, int integer);
/* A number inside r (see k3_numrange); NULL + k3_errmsg when r holds no
 * value the grammar can write. */
k3_gnode *k3_g_number_range(k3_gram *g, int integer, const k3_numrange *r);
/* JSON texts (compact); sorted and deduplicated. */
k3_gnode *k3_g_enum(k3_gram *g, const char *const *texts, int n);
k3_gnode *k3_g_object(k3_gram *g, const char *const *keys, k3_gnode *const *vals,
                      const unsigned char *required, int n);
/* The rest of an object whose '{' and the start of property 0 are the
 * literal of an enclosing KEYED node (lead 1: '{' + key + ':'; lead 2: also
 * the value): how a union of objects is told apart by one leading property
 * (text/jsonschema_union.c). */
k3_gnode *k3_g_object_tail(k3_gram *g, const char *const *keys, k3_gnode *const *vals,
                           const unsigned char *required, int n, int lead);
k3_gnode *k3_g_freeobj(k3_gram *g, k3_gnode *value);
/* A free object whose keys follow key (a node that starts with '"'). */
k3_gnode *k3_g_freeobj_keys(k3_gram *g, k3_gnode *value, k3_gnode *key);
k3_gnode *k3_g_array(k3_gram *g, k3_gnode *item, int min, int max);
k3_gnode *k3_g_any(k3_gram *g);
/* NULL + k3_errmsg when two alternatives can start with the same symbol. */
k3_gnode *k3_g_union(k3_gram *g, k3_gnode *const *alts, int n);
/* Format templates k3_g_string accepts: "date", "time", "date-time", "uuid". */
const char *k3_g_format_template(const char *format);

typedef struct {
    const k3_gnode *node;
    int32_t a, b, c, d; /* per-kind phase and counters */
    uint64_t mask;      /* OBJECT: live key candidates; ENUM/KEYED: [lo, hi) packed */
} k3_gframe;

typedef struct {
    int depth; /* frames in use; 0 = complete */
    int failed;
    k3_gframe f[K3_G_MAX_DEPTH];
} k3_gstate;

void k3_gstate_init(k3_gstate *st, const k3_gnode *root);
static inline void k3_gstate_copy(k3_gstate *dst, const k3_gstate *src) {
    dst->depth = src->depth;
    dst->failed = src->failed;
    for (int i = 0; i < src->depth; i++) dst->f[i] = src->f[i];
}
/* Consume one symbol. 1 if accepted; 0 (state unspecified) if not. */
int k3_gstate_step(k3_gstate *st, int sym);
/* 1 if the whole grammar has been matched (nothing more may follow). */
int k3_gstate_done(const k3_gstate *st);
/* Fewest symbols that complete the match from here. */
int k3_gstate_rem(const k3_gstate *st);
/* 1 when the top frame accepts every byte symbol without changing
 * anything k3_gstate_rem sees: free text, or the inside of an unbounded
 * JSON string (then only printable ASCII other than '"' and '\\'). */
int k3_gstate_free_bytes(const k3_gstate *st, int *ascii_only);

#endif
