#!/usr/bin/env bash
# fuzz_text.sh — builds the chat-layer fuzz targets (chat request renderer,
# XTML tool-call round trip, channel parser, tool-call parser) and runs each
# for a few seconds on small seeds. Longer runs by hand:
#   $K3_BUILD/fuzz/fuzz_channels -max_total_time=600 DIR
set -u
cd "$(dirname "$0")/../.."
FUZZ_PKGS="jansson libpcre2-8"
. tests/sh/lib/fuzz.bash
fuzz_need_clang fuzz_text
seeds=$(mktemp -d)
trap 'rm -rf "$seeds"' EXIT
mkdir -p "$seeds"/{req,xtml,chan,tool}
# Channel / tool-call inputs are in token form (src/text/xtml.h): the control
# tokens <|open|> <|close|> <|sep|> are the bytes 0xF9 0xFA 0xFB. Seeds also
# hold the spellings as text, which must stay text.
O=$'\xf9' C=$'\xfa' S=$'\xfb'
CALL="${O}call tool=\"get_weather\" index=\"1\"${S}${O}argument key=\"city\" type=\"string\"${S}Tokyo${C}argument${S}${C}call${S}"
JCALL="${O}call tool=\"f&amp;g\"${S}${O}json type=\"object\"${S}{\"a\": [1, 2.5]}${C}json${S}${C}call${S}"
printf '%s' '{"messages":[{"role":"user","content":"Hi"}]}' >"$seeds/req/1"
printf '%s' '{"tools":[{"type":"function","function":{"name":"f","parameters":{"x":1.5}}}],"tool_choice":"required","response_format":{"type":"json_schema","json_schema":{"schema":{"b":1,"a":[true,null]}}},"messages":[{"role":"system","content":"s","name":"n"},{"role":"assistant","reasoning_content":"r","content":[{"type":"text","text":"t"},{"type":"image_url"}],"tool_calls":[{"id":"a","function":{"name":"f","arguments":"{\"x\": [1,2], \"y\": \"z\"}"}},{"id":"b","function":{"name":"g","arguments":{"k":{"u":1e-7}}}}]},{"role":"tool","tool_call_id":"b","content":"B"},{"role":"tool","tool_call_id":"a","content":"A"}]}' >"$seeds/req/2"
printf 'get_weather\n{"city": "Paris", "n": 1e2, "o": {"u":"c"}}' >"$seeds/xtml/1"
printf 'a&b"c\n{"a": 1' >"$seeds/xtml/2"
printf '%s' "1reason${C}think${S}${O}response${S}answer <| x${C}response${S}${O}tools${S}${CALL}${JCALL}${C}tools${S}${C}message${S}" >"$seeds/chan/1"
printf '%s' "0said <|open|>tools<|sep|><|open|>call tool=\"x\"<|sep|><|close|>call<|sep|>${O}think${S}r${C}think${S}${O}x${S}" >"$seeds/chan/2"
printf '%s' "2${O}tools${S}${CALL}${C}tools${S}after" >"$seeds/chan/3"
printf '%s' "${CALL}${O}call index=\"2\"${S}${C}call${S}${JCALL}${O}call tool=\"t\"${S}${O}argument key=\"x\" type=\"num" >"$seeds/tool/1"
printf '%s' '{"messages":[{"role":"user","content":"a\u0000b","name":"n\u0000"},{"role":"assistant","reasoning_content":"r\u0000","content":"\u0000","tool_calls":[{"id":"i\u0000","function":{"name":"f","arguments":"{\"x\": \"\\u0000\"}"}}]},{"role":"tool","tool_call_id":"i\u0000","content":[{"type":"text","text":"bin\u0000"}]}]}' >"$seeds/req/nul"
for t in chat_request:req xtml:xtml channels:chan toolcall:tool; do
    fuzz_build "fuzz_${t%%:*}" src/text/*.c && fuzz_run "fuzz_${t%%:*}" "$seeds/${t#*:}" -- -max_total_time=4 -max_len=4096
done
