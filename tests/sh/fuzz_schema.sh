#!/usr/bin/env bash
# fuzz_schema.sh — builds fuzz/fuzz_jsonschema (JSON Schema compiler + grammar
# matcher) and runs it for a few seconds from seeds that reach objects, $defs,
# unions, formats and enums. Longer runs: $K3_BUILD/fuzz/fuzz_jsonschema DIR
set -u
cd "$(dirname "$0")/../.."
FUZZ_PKGS="jansson libpcre2-8"
. tests/sh/lib/fuzz.bash
fuzz_need_clang fuzz_schema
seeds=$(mktemp -d)
trap 'rm -rf "$seeds"' EXIT
seed() { printf '%s\0%s' "$1" "$2" >"$seeds/$3"; }
seed '{"type":"object","properties":{"name":{"type":"string","maxLength":5},"n":{"type":"integer","minimum":0},"k":{"enum":["a",1,12,null]}},"required":["name","k"],"additionalProperties":false}' '{"name": "ab\u00e9", "n": 12, "k": 1' 1
seed '{"$defs":{"P":{"type":"object","properties":{"x":{"type":["number","null"]}}}},"type":"array","items":{"$ref":"#/$defs/P"},"minItems":1,"maxItems":3}' '[{"x": -1.5e+3}, {}' 2
seed '{"anyOf":[{"type":"string","format":"date-time"},{"type":"object"},{"type":"boolean"}]}' '"2024-01-2' 3
seed '{"type":"object"}' '{"a": [1, {"b": null}, "\ud83d' 4
seed '{"type":"string","format":"uuid"}' '"123e4567-e89b' 5
seed 'true' '[[[[[' 6
seed '{"type":"object"}' '{"ab\u0' 7 # completion must not close a \u0000 key (jansson refuses NUL in keys)
fuzz_build fuzz_jsonschema src/text/grammar.c src/text/grammar_match.c src/text/jsonschema.c && fuzz_run fuzz_jsonschema "$seeds" -- -max_total_time=6 -max_len=2048
