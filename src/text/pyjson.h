/* pyjson.h — JSON exactly as the Python reference writes and reads it.
 *
 * The chat format embeds JSON produced by Python's json.dumps (tool
 * declarations, typed tool arguments, API tool-call arguments), and the
 * renderer parses string tool arguments with Python's JSONDecoder(strict=
 * False) one level deep, keeping source slices. Jansson's own dumper differs
 * (float precision, separators), so this file provides:
 *   - k3_pyjson_dump: json.dumps(v, ensure_ascii=False) with either the
 *     compact-sorted style (separators (",", ":"), keys sorted recursively)
 *     or the default style (", " / ": ", keys in insertion order),
 *   - k3_pyfloat_repr: Python repr() of a float,
 *   - k3_pystr / k3_pytruthy: Python str() and truthiness of a JSON value,
 *   - k3_pyjson_scan: scan one JSON value at a position (Python rules). */
#ifndef K3_TEXT_PYJSON_H
#define K3_TEXT_PYJSON_H

#include <jansson.h>

#include "base/buf.h"
#include <stddef.h>

typedef enum {
    K3_PYJSON_DEFAULT,       /* json.dumps(v, ensure_ascii=False) */
    K3_PYJSON_COMPACT_SORTED /* ... separators=(",", ":") on deep-sorted keys */
} k3_pyjson_style;

/* Append the dump of v to *b. */
void k3_pyjson_dump(k3_buf *b, const json_t *v, k3_pyjson_style style);
/* The dump as a malloc'd NUL-terminated string. */
char *k3_pyjson_dumps(const json_t *v, k3_pyjson_style style, size_t *len);
/* Python repr(float) ("1.0", "1e-05", "1e+16", "nan" -> "NaN" as json.dumps). */
void k3_pyfloat_repr(double d, char out[40]);

/* Python str(v) for a scalar (string itself, 3, 1.5, True, False, None).
 * Appends to *b; returns -1 for an object or array (caller reports). */
int k3_pystr(k3_buf *b, const json_t *v);
/* Python truthiness: null/false/0/0.0/""/[]/{} are false. NULL is false. */
int k3_pytruthy(const json_t *v);

/* One value scanned from text by k3_pyjson_scan. */
typedef enum {
    K3_PV_STRING,
    K3_PV_NUMBER,
    K3_PV_BOOLEAN,
    K3_PV_NULL,
    K3_PV_OBJECT,
    K3_PV_ARRAY
} k3_pyvalue_type;
typedef struct {
    k3_pyvalue_type type;
    size_t start, end; /* source slice [start, end) */
    k3_buf str;        /* decoded text for K3_PV_STRING (free with k3_buf_free) */
} k3_pyvalue;

/* Scan one JSON value starting exactly at s[*pos] (no leading whitespace)
 * with Python's JSONDecoder(strict=False) grammar: raw control characters
 * allowed in strings, NaN / Infinity / -Infinity accepted, lone surrogate
 * escapes decoded as U+FFFD. On success *pos is past the value and 0 is
 * returned; -1 on any syntax error (no message set: callers fall back). */
int k3_pyjson_scan(const char *s, size_t n, size_t *pos, k3_pyvalue *out);

/* Parse JSON text like Python's json.loads would accept it for a request:
 * escapes of lone UTF-16 surrogates ("\ud800" without its pair), which
 * jansson rejects, become U+FFFD (what the reference tokenizer does with
 * them, chat.md §1.5), and \u0000 is allowed. Otherwise json_loadb. */
json_t *k3_pyjson_loads(const char *s, size_t n, json_error_t *err);

/* Skip JSON whitespace (exactly SP, TAB, LF, CR). */
size_t k3_pyjson_skip_ws(const char *s, size_t n, size_t pos);

#endif
