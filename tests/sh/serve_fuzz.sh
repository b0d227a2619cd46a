#!/usr/bin/env bash
# serve_fuzz.sh — builds the request-body fuzz target and runs it briefly on a
# small seed corpus of valid and broken OpenAI requests.
set -u
cd "$(dirname "$0")/../.."
B=${K3_BUILD:-build}
if ! command -v clang >/dev/null; then
    echo "serve_fuzz: clang not installed, skipped"
    exit 0
fi
# Built from just the sources it exercises (the request parser and the base
# layer) with the Makefile's fuzz flags, so an unrelated
# library file that clang cannot compile does not block this target.
mkdir -p "$B/fuzz"
if ! clang -std=c11 -D_GNU_SOURCE -g -O1 -Iinclude -Isrc $(pkg-config --cflags jansson) \
    -fsanitize=fuzzer,address,undefined fuzz/fuzz_http_request.c src/serve/request.c \
    src/base/*.c $(pkg-config --libs jansson) -lm \
    -o "$B/fuzz/fuzz_http_request" >"$B/fuzz_http_request.build.log" 2>&1; then
    tail -20 "$B/fuzz_http_request.build.log"
    echo "FAIL serve_fuzz_build"
    exit 1
fi
echo "PASS serve_fuzz_build"
corpus=$(mktemp -d)
trap 'rm -rf "$corpus"' EXIT
printf '%s' '{"model":"tiny","messages":[{"role":"user","content":"Hi"}],"stream":true,"stream_options":{"include_usage":true},"max_tokens":5,"stop":["a","b"]}' >"$corpus/1"
printf '%s' '{"messages":[{"role":"user","content":[{"type":"text","text":"a"}]},{"role":"assistant","content":null,"tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c","content":"x"}],"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":"required","chat_template_kwargs":{"thinking":false},"k3_test_force_tokens":[1,2]}' >"$corpus/2"
printf '%s' '{"prompt":"Once","logprobs":2,"temperature":0.5,"top_p":0.9,"top_k":5,"seed":1}' >"$corpus/3"
printf '{"messages":[{"role":"user","content":"\xff"}]}' >"$corpus/4"
if "$B/fuzz/fuzz_http_request" -max_total_time=5 -rss_limit_mb=1024 "$corpus" \
    >"$B/fuzz_http_request.log" 2>&1; then
    echo "PASS serve_fuzz_run"
else
    tail -30 "$B/fuzz_http_request.log"
    echo "FAIL serve_fuzz_run"
fi
