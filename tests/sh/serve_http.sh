#!/usr/bin/env bash
# serve_http.sh — `k3 serve` HTTP behaviour with curl against a real server on
# a synthetic model: /health, /v1/models, bad requests (each a 4xx OpenAI JSON
# error, the server still serving afterwards), 413, API-key auth, unknown
# endpoints, /v1/completions, and a clean exit on SIGTERM.
cd "$(dirname "$0")/../.."
. tests/serve/lib.sh

# jsq EXPR: print the value of d<EXPR> for the JSON document on stdin.
jsq() { node -e 'let s="";process.stdin.on("data",c=>s+=c).on("end",()=>{let d;try{d=JSON.parse(s)}catch(e){console.log("<not json>");return}const v=eval("d"+process.argv[1]);console.log(typeof v==="object"?JSON.stringify(v):String(v))})' "$1"; }

# post PATH BODY: body of the response in $T/out, status printed.
T=$SERVE_TMP
post() { curl -s -o "$T/out" -w '%{http_code}' -H 'Content-Type: application/json' --data-binary "$2" "$SERVE_URL$1"; }

# A 4xx whose body is {"error":{"message":...,"type":...}}, naming param if given
# (one node start per check: they are slow on a loaded machine).
is_json_error() { # status body-file [param]
    local st=$1 f=$2 param=${3:-}
    [[ $st == 4?? ]] || { echo "  status $st: $(head -c 300 "$f")"; return 1; }
    node -e 'const [f, p] = process.argv.slice(1); let e;
        try { e = JSON.parse(require("fs").readFileSync(f, "utf8")).error } catch (x) {}
        const ok = e && e.type === "invalid_request_error" && typeof e.message === "string" &&
            e.message.length > 0 && (p === "" || e.param === p);
        if (!ok) console.log("  body: " + require("fs").readFileSync(f, "utf8").slice(0, 300));
        process.exit(ok ? 0 : 1)' "$f" "$param"
}

serve_start --test-mode --max-body 65536 --max-tokens 32 || { echo "FAIL serve_http_start"; exit 1; }

st=$(curl -s -o "$T/out" -w '%{http_code}' "$SERVE_URL/health")
check serve_http_health test "$st" = 200 -a "$(jsq .status <"$T/out")" = ok
st=$(curl -s -o "$T/out" -w '%{http_code}' "$SERVE_URL/v1/models")
check serve_http_models test "$st" = 200 -a "$(jsq '.data[0].id' <"$T/out")" = tiny
st=$(curl -s -o "$T/out" -w '%{http_code}' "$SERVE_URL/v1/models/tiny")
check serve_http_model_retrieve test "$st" = 200 -a "$(jsq '.id' <"$T/out")" = tiny
st=$(curl -s -o "$T/out" -w '%{http_code}' "$SERVE_URL/v1/models/gpt-4o")
check serve_http_model_retrieve_404 test "$st" = 404

U='{"role":"user","content":"Hi"}'
bad_case() { # name body [param]
    local st
    st=$(post /v1/chat/completions "$2")
    local ok=1
    is_json_error "$st" "$T/out" "${3:-}" || ok=0
    # the server keeps serving: /health answers right after every bad request
    [ "$(curl -s -o /dev/null -w '%{http_code}' "$SERVE_URL/health")" = 200 ] || ok=0
    check "serve_http_bad_$1" test $ok = 1
}
bad_case malformed_json '{"messages":[' ''
bad_case not_object '[1,2]' ''
bad_case wrong_type_messages '{"messages":"hello"}' messages
bad_case wrong_type_temperature "{\"messages\":[$U],\"temperature\":\"hot\"}" temperature
bad_case wrong_type_stream "{\"messages\":[$U],\"stream\":\"yes\"}" stream
bad_case wrong_type_content '{"messages":[{"role":"user","content":42}]}' 'messages[0].content'
bad_case unknown_model "{\"model\":\"gpt-4o\",\"messages\":[$U]}" model
bad_case empty_messages '{"messages":[]}' messages
bad_case max_tokens_zero "{\"messages\":[$U],\"max_tokens\":0}" max_tokens
bad_case max_tokens_negative "{\"messages\":[$U],\"max_tokens\":-3}" max_tokens
bad_case n_nine "{\"messages\":[$U],\"n\":9}" n
bad_case invalid_utf8 "$(printf '{"messages":[{"role":"user","content":"\xc3\x28"}]}')" ''
bad_case bad_role '{"messages":[{"role":"robot","content":"x"}]}' 'messages[0].role'
st=$(post /v1/chat/completions "{\"model\":\"gpt-4o\",\"messages\":[$U]}")
check serve_http_unknown_model_404 test "$st" = 404

# A body over --max-body: 413 with a JSON error, then the server still serves.
head -c 70000 /dev/zero | tr '\0' 'a' >"$T/big"
printf '{"messages":[{"role":"user","content":"%s"}]}' "$(cat "$T/big")" >"$T/bigbody"
st=$(curl -s -o "$T/out" -w '%{http_code}' -H 'Content-Type: application/json' --data-binary @"$T/bigbody" "$SERVE_URL/v1/chat/completions")
check serve_http_413 test "$st" = 413 -a "$(jsq .error.code <"$T/out")" = request_too_large
# chunked upload (no Content-Length) over the limit is refused too
st=$(curl -s -o "$T/out" -w '%{http_code}' -H 'Transfer-Encoding: chunked' -H 'Content-Type: application/json' --data-binary @"$T/bigbody" "$SERVE_URL/v1/chat/completions")
check serve_http_413_chunked test "$st" = 413

st=$(curl -s -o "$T/out" -w '%{http_code}' "$SERVE_URL/v1/nope")
check serve_http_unknown_path test "$st" = 404 -a -n "$(jsq .error.message <"$T/out")"
st=$(curl -s -o "$T/out" -w '%{http_code}' "$SERVE_URL/v1/chat/completions")
check serve_http_wrong_method test "$st" = 405

# After all that, a valid request works; max_tokens is capped at --max-tokens 32.
st=$(post /v1/chat/completions "{\"messages\":[$U],\"max_tokens\":1000,\"chat_template_kwargs\":{\"thinking\":false}}")
check serve_http_valid_after_errors test "$st" = 200 -a "$(jsq .usage.completion_tokens <"$T/out")" -le 32

# /v1/completions: forced text comes back raw, with usage.
st=$(post /v1/completions '{"prompt":"Once upon a time","max_tokens":20,"k3_test_force_text":"there was a cat."}')
check serve_http_completions test "$st" = 200 -a "$(jsq '.choices[0].text' <"$T/out")" = "there was a cat." -a "$(jsq .object <"$T/out")" = text_completion

# Forced output is refused without --test-mode (checked on a second server below).
serve_stop
rc=$?
check serve_http_sigterm_exit0 test "$rc" = 0
check serve_http_log_line grep -q 'POST /v1/chat/completions 200 prompt=[0-9]* cached=[0-9]* prefill=[0-9]* completion=[0-9]* ttft=[0-9.]*ms tok/s=' "$SERVE_LOG"
check serve_http_shutdown_logged grep -q 'SIGTERM received, shutting down' "$SERVE_LOG"

# API key: 401 without or with a wrong key, 200 with it; /health stays open.
serve_start --api-key sekrit || { echo "FAIL serve_http_start_auth"; exit 1; }
st=$(curl -s -o "$T/out" -w '%{http_code}' "$SERVE_URL/v1/models")
check serve_http_auth_missing test "$st" = 401 -a "$(jsq .error.code <"$T/out")" = invalid_api_key
st=$(curl -s -o "$T/out" -w '%{http_code}' -H 'Authorization: Bearer wrong' "$SERVE_URL/v1/models")
check serve_http_auth_wrong test "$st" = 401
st=$(curl -s -o "$T/out" -w '%{http_code}' -H 'Authorization: Bearer sekrit' "$SERVE_URL/v1/models")
check serve_http_auth_ok test "$st" = 200
st=$(curl -s -o "$T/out" -w '%{http_code}' "$SERVE_URL/health")
check serve_http_auth_health_open test "$st" = 200
st=$(curl -s -o "$T/out" -w '%{http_code}' -d @"$T/bigbody" "$SERVE_URL/v1/chat/completions")
check serve_http_auth_post_401 test "$st" = 401 -a "$(jsq .error.code <"$T/out")" = invalid_api_key
st=$(curl -s -o "$T/out" -w '%{http_code}' -H 'Authorization: Bearer sekrit' -d "{\"messages\":[$U],\"k3_test_force_text\":\"x\"}" "$SERVE_URL/v1/chat/completions")
check serve_http_force_needs_test_mode test "$st" = 400 -a "$(jsq .error.code <"$T/out")" = test_mode_only
serve_stop

# Graceful shutdown: a request in flight when SIGTERM arrives still completes
# (within --shutdown-grace); with no grace left, an open stream is ended.
# Forced output keeps the random model from ending early on its own.
LONG=$(printf 'abc %.0s' $(seq 1 20000))
# --timeout cuts a generation that runs too long: finish_reason "length".
serve_start --test-mode --max-tokens 1000000 --timeout 1 || { echo "FAIL serve_http_start_timeout"; exit 1; }
st=$(post /v1/chat/completions "{\"messages\":[$U],\"max_tokens\":1000000,\"chat_template_kwargs\":{\"thinking\":false},\"k3_test_force_text\":\"$LONG\"}")
check serve_http_timeout_cuts test "$st" = 200 -a "$(jsq '.choices[0].finish_reason' <"$T/out")" = length -a "$(jsq '.usage.completion_tokens' <"$T/out")" -lt 20000
serve_stop
serve_start --test-mode --max-tokens 100000 --shutdown-grace 60 || { echo "FAIL serve_http_start_grace"; exit 1; }
curl -s -o "$T/inflight" -w '%{http_code}' -d "{\"messages\":[$U],\"max_tokens\":2000,\"chat_template_kwargs\":{\"thinking\":false},\"k3_test_force_text\":\"$LONG\"}" "$SERVE_URL/v1/chat/completions" >"$T/inflight.st" &
cpid=$!
for i in $(seq 1 100); do grep -q '"active":1' <(curl -s "$SERVE_URL/health") && break; sleep 0.05; done
serve_stop
rc=$?
wait $cpid
check serve_http_graceful_inflight_completes test "$(cat "$T/inflight.st")" = 200 -a "$(jsq '.usage.completion_tokens' <"$T/inflight")" = 2000
check serve_http_graceful_after_signal awk '/SIGTERM received/{s=1} s && /completion=2000 .*finish=length/{f=1} END{exit !f}' "$SERVE_LOG"
check serve_http_graceful_exit0 test "$rc" = 0
serve_start --test-mode --max-tokens 1000000 --shutdown-grace 0 || { echo "FAIL serve_http_start_nograce"; exit 1; }
curl -s -N -o "$T/cut" -d "{\"messages\":[$U],\"max_tokens\":1000000,\"stream\":true,\"chat_template_kwargs\":{\"thinking\":false},\"k3_test_force_text\":\"$LONG\"}" "$SERVE_URL/v1/chat/completions" &
cpid=$!
curl -s -o "$T/cut2" -w '%{http_code}' -d "{\"messages\":[$U],\"max_tokens\":1000000,\"chat_template_kwargs\":{\"thinking\":false},\"k3_test_force_text\":\"$LONG\"}" "$SERVE_URL/v1/chat/completions" >"$T/cut2.st" &
cpid2=$!
for i in $(seq 1 100); do [ -s "$T/cut" ] && grep -q '"active":2' <(curl -s "$SERVE_URL/health") && break; sleep 0.05; done
serve_stop
rc=$?
wait $cpid $cpid2
check serve_http_shutdown_cancels_stream test "$rc" = 0 -a -s "$T/cut"
check serve_http_shutdown_nonstream_503 test "$(cat "$T/cut2.st")" = 503 -a "$(jsq .error.code <"$T/cut2")" = cancelled
check serve_http_cancel_logged grep -q 'finish=cancelled stream' "$SERVE_LOG"

# Command-line errors: a clear message and a non-zero exit, no server left behind.
"$K3" serve --port notaport >"$T/cli" 2>&1
check serve_cli_bad_port test $? = 2 -a -n "$(grep -- '--port expects an integer' "$T/cli")"
"$K3" serve --bogus >"$T/cli" 2>&1
check serve_cli_unknown_option test $? = 2 -a -n "$(grep -- "unknown option '--bogus'" "$T/cli")"
"$K3" serve --model "$T/no-such-model" --port 0 >"$T/cli" 2>&1
check serve_cli_missing_model test $? = 1 -a -n "$(grep -- "no-such-model" "$T/cli")"
"$K3" serve --host 999.1.2.3 --port 0 --model "$(serve_model)" >"$T/cli" 2>&1
check serve_cli_bad_host test $? = 1 -a -n "$(grep -- "--host '999.1.2.3' is neither" "$T/cli")"
"$K3" serve --help >"$T/cli" 2>&1
check serve_cli_help test $? = 0 -a -n "$(grep -- "--api-key" "$T/cli")"
