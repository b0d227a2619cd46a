#!/usr/bin/env bash
# fuzz_api.sh — builds fuzz/fuzz_api_request (Responses API and Anthropic
# Messages request translators, then the chat parser) and runs it briefly from
# seeds that reach every item and block type.
set -u
cd "$(dirname "$0")/../.."
FUZZ_PKGS="jansson"
. tests/sh/lib/fuzz.bash
fuzz_need_clang fuzz_api
corpus=$(mktemp -d)
trap 'rm -rf "$corpus"' EXIT
printf '%s' '{"model":"tiny","input":"hi","instructions":"be brief","max_output_tokens":5,"reasoning":{"effort":"none"},"text":{"format":{"type":"json_schema","name":"x","schema":{"type":"object"}}}}' >"$corpus/1"
printf '%s' '{"input":[{"role":"developer","content":"d"},{"type":"message","role":"user","content":[{"type":"input_text","text":"q"}]},{"type":"item_reference","id":"rs_0123456789abcdef0123456789abcdef_1"},{"type":"function_call","call_id":"c1","name":"f","arguments":"{\"a\":1}"},{"type":"function_call_output","call_id":"c1","output":"ok"},{"type":"item_reference","id":"nope"}],"tools":[{"type":"function","name":"f","parameters":{"type":"object"}}],"tool_choice":{"type":"function","name":"f"},"previous_response_id":"resp_0123456789abcdef0123456789abcdef"}' >"$corpus/2"
printf '%s' '{"model":"tiny","max_tokens":10,"system":[{"type":"text","text":"s"}],"messages":[{"role":"user","content":"q"},{"role":"assistant","content":[{"type":"thinking","thinking":"t","signature":""},{"type":"text","text":"a"},{"type":"tool_use","id":"t1","name":"f","input":{"x":1}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":[{"type":"text","text":"r"}],"is_error":true},{"type":"text","text":"more"}]}],"tools":[{"name":"f","input_schema":{"type":"object"}}],"tool_choice":{"type":"any"},"thinking":{"type":"enabled","budget_tokens":9000},"stop_sequences":["x"]}' >"$corpus/3"
printf '%s' '{"model":"tiny","max_tokens":10,"system":{"text":"x"},"messages":[{"role":"assistant","content":[{"type":"tool_use","id":"a","name":"f"},{"type":"tool_use","id":"a","name":"f"}]}],"thinking":{"type":"adaptive"},"output_config":{"effort":"xhigh","format":{"type":"json_schema","schema":{"type":"object","properties":{"x":{"type":"boolean"}}}}},"metadata":{"user_id":"u"},"frob":1}' >"$corpus/4"
fuzz_build fuzz_api_request src/serve/request.c src/serve/error.c src/serve/request_openai.c src/serve/responses_req.c \
    src/serve/anthropic_req.c src/serve/anthropic_check.c src/serve/rstore.c src/text/chat_effort.c &&
    fuzz_run fuzz_api_request "$corpus" -- -max_total_time=6
