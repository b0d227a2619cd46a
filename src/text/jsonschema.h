/* jsonschema.h — JSON Schema → grammar (text/grammar.h) for structured output.
 *
 * Enforced exactly (the generated JSON always validates):
 *   type (one, or a list = a union), enum, const, properties + required
 *   (keys in declaration order, optional ones may be left out, no other
 *   keys — valid for additionalProperties true, false or a schema), an
 *   object without properties (additionalProperties: a schema, true/absent =
 *   any values; false = "{}"), items, minItems, maxItems, minLength,
 *   maxLength, format (date, time, date-time, uuid, email, uri, hostname,
 *   ipv4, ipv6: regular subsets, text/regex.h) and pattern (the safe regex
 *   dialect of text/regex.h; with a format, both hold), minimum, maximum,
 *   exclusiveMinimum, exclusiveMaximum, multipleOf (text/grammar_num.c),
 *   anyOf / oneOf / a type list whose alternatives start with different
 *   characters (different JSON types) or are objects told apart by a
 *   discriminator or a property each alone has (jsonschema_union.c),
 *   records (propertyNames: a string schema for the keys, or an enum of
 *   them), allOf of one schema, $ref to
 *   #/$defs/... or #/definitions/... (not recursive), nullable: true,
 *   uniqueItems: false; annotations (title, description, default, examples,
 *   $schema, $id, $comment, deprecated, readOnly, writeOnly, strict,
 *   discriminator) are ignored. The schema `true` or {} is any JSON value.
 * Everything else (other formats, fractional multipleOf, recursive $ref,
 * alternatives that cannot be told apart, not, if/then,
 * patternProperties, ...) is refused with a message naming the keyword and
 * where it is, so a server can answer 400 instead of ignoring it. */
#ifndef K3_TEXT_JSONSCHEMA_H
#define K3_TEXT_JSONSCHEMA_H

#include <jansson.h>
#include <stddef.h>

#include "text/grammar.h"

/* The grammar of one JSON value valid under schema. NULL and a message in
 * err[0..cap) when the schema uses something that is not enforced; then
 * *too_complex (may be NULL) is 1 when the refusal is a size limit (the
 * grammar's node/byte budget, grammar.h) rather than a keyword.
 *
 * Each $ref'd definition is compiled once and shared by all its uses, so
 * the grammar's size and the work are linear in the schema's size. */
k3_gnode *k3_schema_compile(k3_gram *g, const json_t *schema, char *err, size_t cap,
                            int *too_complex);

/* A schema whose smallest valid document is longer than this (in symbols)
 * is refused as too complex: no output budget could hold it. */
#define K3_SCHEMA_MAX_MINLEN (1 << 20)

#endif
