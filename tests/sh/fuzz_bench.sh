#!/usr/bin/env bash
# fuzz_bench.sh — builds the fuzz targets of k3 bench's own inputs (the replay
# corpus reader, fuzz_replay_file; the --cost NAME=c1,... parser,
# fuzz_study_cost) and runs each for a few seconds on seeds that reach the
# deep code: valid lines with escapes, unicode, NUL (\u0000) and empty
# answers, blank lines and CRLF, and every kind of bad line (not JSON, not an
# object, a field missing or of the wrong type, huge numbers, raw NUL and
# control bytes, broken UTF-8); cost lists at and past every bound.
# Longer runs: make fuzz-long, or $K3_BUILD/fuzz/fuzz_replay_file -max_total_time=600 DIR
set -u
cd "$(dirname "$0")/../.."
FUZZ_PKGS="jansson libpcre2-8"
. tests/sh/lib/fuzz.bash
fuzz_need_clang fuzz_bench
seeds=$(mktemp -d)
trap 'rm -rf "$seeds"' EXIT
mkdir -p "$seeds"/{replay,cost}
r=$seeds/replay
printf '%s\n' '{"prompt": "a\"b\\c\n\t\u00e9", "answer": "caf\u00e9 \ud83d\ude00 \u65e5\u672c"}' >"$r/escapes"
printf '%s\n' '{"prompt": "x", "answer": ""}' '{"prompt": "", "answer": "yz"}' >"$r/empty"
printf '{"prompt": "p", "answer": "a1"}\r\n\r\n   \t\n{"prompt": "q", "answer": "a2"}\r\n' >"$r/crlf_blank"
printf '%s\n' '{"prompt": "nul\u0000in", "answer": "\u0000\u0000"}' >"$r/nul_escape"
printf '{"prompt": "raw\000nul", "answer": "ab"}\n' >"$r/nul_raw"
printf '{"prompt": "\001ctl", "answer": "ab"}\n' >"$r/ctl_raw"
printf '{"prompt": "\xff\xfe bad utf8 \xc3", "answer": "ab"}\n' >"$r/bad_utf8"
printf '%s\n' '{"prompt": "a", "answer": "bc", "n": 123456789012345678901234567890}' >"$r/huge_int"
printf '%s\n' '{"prompt": "a", "answer": "bc", "x": 1e999, "y": -1e-999}' >"$r/huge_real"
printf '%s\n' '{"prompt": "a", "answer": "bc", "meta": {"k": [1, 2.5, true, null, "s"]}}' >"$r/extra_keys"
printf '%s\n' '{"prompt": "a"}' >"$r/no_answer"
printf '%s\n' '{"answer": "ab"}' >"$r/no_prompt"
printf '%s\n' '{"prompt": 7, "answer": "ab"}' '{"prompt": "a", "answer": ["b"]}' >"$r/wrong_type"
printf '%s\n' '{"prompt": "a", "answer": null}' >"$r/null_field"
printf '%s\n' '["prompt", "answer"]' '"just a string"' '42' 'null' >"$r/non_object"
printf '%s\n' '{"prompt": "a", "prompt": "b", "answer": "cd"}' >"$r/duplicate"
printf '%s\n' '{"prompt": "a", "answer": "\ud800"}' >"$r/lone_surrogate"
printf '%s\n' '{"prompt": "a", "answer": "bc"' >"$r/cut"
printf '%s\n' '{"prompt": "a", "answer": "bc"} trailing' >"$r/trailing"
printf '%s' '{"prompt": "no newline at the end", "answer": "ab"}' >"$r/no_final_newline"
printf '\n\n\r\n' >"$r/only_blank"
head -c 3000 bench/replay/tool-call.jsonl >"$r/corpus"
c=$seeds/cost
printf '%s' 'h100=1.5,2,2.5,3,3.5,4,4.5,5' >"$c/valid"
printf '%s' 'a=1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16' >"$c/max_costs"
printf '%s' 'a=1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17' >"$c/too_many"
printf '%s' 'abcdefghijklmnopqrstuvw=1' >"$c/name_23"
printf '%s' 'abcdefghijklmnopqrstuvwx=1' >"$c/name_24"
printf '%s' '=1,2' >"$c/no_name"
printf '%s' 'a b=1' >"$c/space_name"
printf '%s' 'a=' >"$c/no_costs"
printf '%s' 'a=1,,2' >"$c/empty_item"
printf '%s' 'a=1,' >"$c/trailing_comma"
printf '%s' 'a=1e-6,1e6,1.5e+2,.5' >"$c/bounds"
printf '%s' 'a=1e-7' >"$c/too_small"
printf '%s' 'a=1e999' >"$c/huge"
printf '%s' 'a=nan,inf' >"$c/nan"
printf '%s' 'a=0x10' >"$c/hex"
printf '%s' 'a= 1' >"$c/space"
printf '%s' 'a=-2' >"$c/negative"
printf 'n\xff\x01=1' >"$c/bytes_name"
printf 'a=1\xc3' >"$c/bytes_cost"
printf '%s' 'no equals' >"$c/no_equals"
fuzz_build fuzz_replay_file src/gen/replay_file.c src/text/*.c &&
    fuzz_run fuzz_replay_file "$r" -- -max_total_time=4 -max_len=4096
fuzz_build fuzz_study_cost src/gen/draft_study.c src/gen/draft.c src/gen/spec_cost.c &&
    fuzz_run fuzz_study_cost "$c" -- -max_total_time=4 -max_len=256
