#!/usr/bin/env bash
# serve_fuzz.sh — builds the request fuzz target (body parser, and whole
# requests through the Host/Origin/framing guard and the JSON budget) and runs
# it briefly on a small seed corpus of valid and broken OpenAI requests.
set -u
cd "$(dirname "$0")/../.."
. tests/sh/lib/fuzz.bash
fuzz_need_clang serve_fuzz
corpus=$(mktemp -d)
trap 'rm -rf "$corpus"' EXIT
printf '%s' '{"model":"tiny","messages":[{"role":"user","content":"Hi"}],"stream":true,"stream_options":{"include_usage":true},"max_tokens":5,"stop":["a","b"]}' >"$corpus/1"
printf '%s' '{"messages":[{"role":"user","content":[{"type":"text","text":"a"}]},{"role":"assistant","content":null,"tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c","content":"x"}],"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":"required","chat_template_kwargs":{"thinking":false},"k3_test_force_tokens":[1,2]}' >"$corpus/2"
printf '%s' '{"prompt":"Once","logprobs":2,"temperature":0.5,"top_p":0.9,"top_k":5,"seed":1}' >"$corpus/3"
printf '{"messages":[{"role":"user","content":"\xff"}]}' >"$corpus/4"
# issue 12's crash class: cut characters against the fixed-size buffers
printf '{"model":"%s\xc3\xa9","messages":[]}' "$(printf 'a%.0s' $(seq 1 199))" >"$corpus/5"
printf '{"a": "x\\\xc3\xa9"}' >"$corpus/6"
printf 'G\xc3T /\xff' >"$corpus/7"
# whole requests: request line, headers (Host, Origin, framing), body
printf 'POST /v1/chat/completions\nHost: localhost:8000\nOrigin: https://ok.example\nContent-Length: 60\n\n{"messages":[{"role":"user","content":"Hi"}],"max_tokens":3}' >"$corpus/8"
printf 'POST /v1/completions\nHost: [::1]:80\nOrigin: null\n\n{"prompt":"x"}' >"$corpus/9"
printf 'GET /%%ff\nHost: evil.example\nContent-Length: 5\nTransfer-Encoding: chunked\n\n' >"$corpus/10"
printf 'POST /v1/chat/completions\nHost: k3.internal\n\n[[[[[[[[[[{},{},{},{"a":[1,2,3]}]]]]]]]]]' >"$corpus/11"
# framing: differing lengths, a space before the colon, unknown codings; U+0000 in text
printf 'POST /tokenize\nHost: localhost\nContent-Length: 5\nContent-Length: 50\n\n{"content":"a"}' >"$corpus/framing1"
printf 'POST /tokenize\nHost: localhost\nTransfer-Encoding : chunked\nTransfer-Encoding: gzip\n\n' >"$corpus/framing2"
printf '%s' '{"messages":[{"role":"user","content":"a\u0000b"},{"role":"assistant","content":"\u0000","reasoning_content":"r\u0000"},{"role":"user\u0000x","content":"c"}],"stop":["s\u0000"]}' >"$corpus/nul"
fuzz_build fuzz_http_request src/serve/request.c src/serve/error.c src/serve/request_openai.c src/serve/guard.c \
    src/serve/limits.c src/serve/framing.c src/text/chat_effort.c &&
    fuzz_run fuzz_http_request "$corpus"
