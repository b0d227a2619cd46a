#!/usr/bin/env bash
# serve_extras.sh — the endpoints and options around the chat API, with curl
# against a real `k3 serve` on a synthetic model: routes without /v1, HEAD,
# the developer role, --served-model-name aliases, --host localhost,
# x-api-key auth, /tokenize, /detokenize, /props, /metrics (Prometheus text),
# --ctx-size (400 and the clamp), --cors-origin preflights, `--model .`.
cd "$(dirname "$0")/../.."
. tests/serve/lib.sh
T=$SERVE_TMP
jsq() { node -e 'let s="";process.stdin.on("data",c=>s+=c).on("end",()=>{let d;try{d=JSON.parse(s)}catch(e){console.log("<not json>");return}const v=eval("d"+process.argv[1]);console.log(typeof v==="object"?JSON.stringify(v):String(v))})' "$1"; }
K='x-api-key: sekrit'
post() { curl -s -o "$T/out" -w '%{http_code}' -H "$K" -H 'Content-Type: application/json' --data-binary "$2" "$SERVE_URL$1"; }
U='{"role":"user","content":"Hi"}'
NOTHINK='"chat_template_kwargs":{"thinking":false}'

serve_start --test-mode --host localhost --served-model-name tiny --served-model-name k3-alias \
    --api-key sekrit --ctx-size 200 --cors-origin http://ui.example,http://other.example ||
    { echo "FAIL serve_extras_start"; exit 1; }
check serve_extras_host_localhost grep -q 'listening on http://localhost:' "$SERVE_LOG"

# HEAD where GET works; OPTIONS without CORS headers is a plain Allow answer
st=$(curl -s -o "$T/head" -w '%{http_code}' -I "$SERVE_URL/health")
check serve_extras_head_health test "$st" = 200
st=$(curl -s -o /dev/null -w '%{http_code}' -I -H "$K" "$SERVE_URL/v1/models")
check serve_extras_head_models test "$st" = 200

# auth: x-api-key and Bearer both work, neither → 401; /health stays open
st=$(curl -s -o /dev/null -w '%{http_code}' "$SERVE_URL/v1/models")
check serve_extras_auth_missing test "$st" = 401
st=$(curl -s -o /dev/null -w '%{http_code}' -H 'Authorization: Bearer sekrit' "$SERVE_URL/v1/models")
check serve_extras_auth_bearer test "$st" = 200
st=$(curl -s -o /dev/null -w '%{http_code}' -H 'x-api-key: wrong' "$SERVE_URL/models")
check serve_extras_auth_wrong_xkey test "$st" = 401

# routes without the /v1 prefix; aliases listed with the context length
st=$(curl -s -o "$T/out" -w '%{http_code}' -H "$K" "$SERVE_URL/models")
check serve_extras_models_unversioned test "$st" = 200 -a "$(jsq '.data.map(m=>m.id).join()' <"$T/out")" = tiny,k3-alias
check serve_extras_models_ctx test "$(jsq '.data[1].context_length' <"$T/out")" = 200 -a "$(jsq '.data[0].max_model_len' <"$T/out")" = 200
st=$(curl -s -o "$T/out" -w '%{http_code}' -H "$K" "$SERVE_URL/models/k3-alias")
check serve_extras_model_alias_retrieve test "$st" = 200 -a "$(jsq '.id' <"$T/out")" = k3-alias
st=$(post /chat/completions "{\"model\":\"k3-alias\",\"messages\":[{\"role\":\"developer\",\"content\":\"Be brief\"},$U],$NOTHINK,\"k3_test_force_text\":\"ok\"}")
check serve_extras_developer_alias_unversioned test "$st" = 200 -a "$(jsq '.choices[0].message.content' <"$T/out")" = ok
st=$(post /v1/chat/completions "{\"model\":\"nope\",\"messages\":[$U]}")
check serve_extras_unknown_model test "$st" = 404
st=$(post /completions '{"prompt":"Once","max_tokens":3,"k3_test_force_text":"abc"}')
check serve_extras_completions_unversioned test "$st" = 200 -a "$(jsq '.choices[0].text' <"$T/out")" = abc

# the developer message renders exactly like a system message
post /tokenize "{\"messages\":[{\"role\":\"developer\",\"content\":\"Be brief\"},$U]}" >/dev/null; cp "$T/out" "$T/dev"
post /tokenize "{\"messages\":[{\"role\":\"system\",\"content\":\"Be brief\"},$U]}" >/dev/null
check serve_extras_developer_is_system test "$(jsq .tokens <"$T/dev")" = "$(jsq .tokens <"$T/out")" -a "$(jsq .count <"$T/out")" -gt 10

# tokenize / detokenize round trip, pieces, errors
st=$(post /tokenize '{"content":"hello world, 四五"}')
check serve_extras_tokenize test "$st" = 200 -a "$(jsq '.count' <"$T/out")" -gt 1 -a "$(jsq '.max_model_len' <"$T/out")" = 200
ids=$(jsq .tokens <"$T/out")
st=$(post /detokenize "{\"tokens\":$ids}")
check serve_extras_detokenize test "$st" = 200 -a "$(jsq '.content' <"$T/out")" = "hello world, 四五" -a "$(jsq '.prompt' <"$T/out")" = "hello world, 四五"
st=$(post /tokenize '{"prompt":"ab","with_pieces":true}')
check serve_extras_tokenize_pieces test "$st" = 200 -a "$(jsq '.tokens.map(t=>t.piece).join("")' <"$T/out")" = ab
st=$(post /detokenize '{"tokens":[1,99999999]}')
check serve_extras_detokenize_range test "$st" = 400 -a "$(jsq '.error.param' <"$T/out")" = tokens
st=$(post /tokenize '{"content":5}')
check serve_extras_tokenize_bad test "$st" = 400
st=$(post /tokenize '{"content":')
check serve_extras_tokenize_badjson test "$st" = 400

# props
st=$(curl -s -o "$T/out" -w '%{http_code}' -H "$K" "$SERVE_URL/props")
check serve_extras_props test "$st" = 200 -a "$(jsq '.n_ctx' <"$T/out")" = 200 -a "$(jsq '.total_slots' <"$T/out")" -ge 1

# --ctx-size: a prompt that fills the context is a 400; max_tokens is clamped to the room left
LONG=$(printf 'word %.0s' $(seq 1 400))
st=$(post /v1/chat/completions "{\"messages\":[{\"role\":\"user\",\"content\":\"$LONG\"}]}")
check serve_extras_ctx_400 test "$st" = 400 -a "$(jsq '.error.code' <"$T/out")" = context_length_exceeded
FORCE=$(printf 'a%.0s' $(seq 1 300))
st=$(post /v1/chat/completions "{\"messages\":[$U],$NOTHINK,\"max_tokens\":1000,\"k3_test_force_text\":\"$FORCE\"}")
pt=$(jsq '.usage.prompt_tokens' <"$T/out")
ct=$(jsq '.usage.completion_tokens' <"$T/out")
check serve_extras_ctx_clamp test "$st" = 200 -a "$(jsq '.choices[0].finish_reason' <"$T/out")" = length -a $((pt + ct)) = 200

# CORS: preflight from an allowed origin, refused from another; the real
# request carries Access-Control-Allow-Origin only for an allowed origin
curl -s -D "$T/hdr" -o /dev/null -X OPTIONS -H 'Origin: http://ui.example' \
    -H 'Access-Control-Request-Method: POST' -H 'Access-Control-Request-Headers: authorization, content-type' \
    "$SERVE_URL/v1/chat/completions"
check serve_extras_cors_preflight grep -qi '^HTTP/1.1 204' "$T/hdr"
check serve_extras_cors_preflight_origin grep -qi '^Access-Control-Allow-Origin: http://ui.example' "$T/hdr"
check serve_extras_cors_preflight_methods grep -qi '^Access-Control-Allow-Methods: .*POST' "$T/hdr"
check serve_extras_cors_preflight_headers grep -qi '^Access-Control-Allow-Headers: .*authorization' "$T/hdr"
curl -s -D "$T/hdr" -o /dev/null -X OPTIONS -H 'Origin: http://evil.example' \
    -H 'Access-Control-Request-Method: POST' "$SERVE_URL/v1/chat/completions"
check serve_extras_cors_preflight_refused grep -q '^HTTP/1.1 403' "$T/hdr"
check serve_extras_cors_preflight_refused_no_acao bash -c "! grep -qi '^Access-Control-Allow-Origin' '$T/hdr'"
curl -s -D "$T/hdr" -o /dev/null -H "$K" -H 'Origin: http://other.example' "$SERVE_URL/v1/models"
check serve_extras_cors_get grep -qi '^Access-Control-Allow-Origin: http://other.example' "$T/hdr"
curl -s -D "$T/hdr" -o /dev/null -H "$K" -H 'Origin: http://evil.example' "$SERVE_URL/v1/models"
check serve_extras_cors_get_other bash -c "! grep -qi '^Access-Control-Allow-Origin' '$T/hdr'"
curl -s -D "$T/hdr" -o /dev/null -H "$K" -H 'Origin: http://ui.example' \
    -d "{\"messages\":[$U],\"stream\":true,\"max_tokens\":2}" "$SERVE_URL/v1/chat/completions"
check serve_extras_cors_stream grep -qi '^Access-Control-Allow-Origin: http://ui.example' "$T/hdr"

# /metrics: Prometheus text with the request counters and histograms
curl -s -o "$T/metrics" -D "$T/hdr" -H "$K" "$SERVE_URL/metrics"
check serve_extras_metrics_type grep -qi '^Content-Type: text/plain; version=0.0.4' "$T/hdr"
check serve_extras_metrics_requests grep -q '^k3_requests_total{model="tiny",endpoint="/v1/chat/completions",code="200"} [1-9]' "$T/metrics"
check serve_extras_metrics_tokens grep -q '^k3_generation_tokens_total{model="tiny"} [1-9]' "$T/metrics"
check serve_extras_metrics_ttft grep -q '^k3_time_to_first_token_seconds_bucket{model="tiny",le="+Inf"} [1-9]' "$T/metrics"
check serve_extras_metrics_tps grep -q '^k3_decode_tokens_per_second_count{model="tiny"} [1-9]' "$T/metrics"
check serve_extras_metrics_queue grep -q '^k3_requests_waiting{model="tiny"} 0' "$T/metrics"
check serve_extras_metrics_cache grep -q '^k3_prefix_cache_queries_total{model="tiny"} [1-9]' "$T/metrics"
# every sample line is NAME{labels} VALUE, every family has HELP and TYPE
check serve_extras_metrics_format awk '/^#/ {next} !/^[a-z][a-z0-9_]*(\{[^}]*\})? [-+0-9.eInf]+$/ {bad=1; print "  bad line: " $0} END {exit bad}' "$T/metrics"
serve_stop || echo "FAIL serve_extras_clean_exit"

# `--model .` serves the directory's own name, never "."
model=$(cd "$(serve_model)" && pwd)
( cd "$model" && OMP_WAIT_POLICY=passive exec "$OLDPWD/$K3" serve --model . --port 0 >"$T/dot.log" 2>&1 ) &
DOT_PID=$!
SERVE_PIDS+=("$DOT_PID")
for i in $(seq 1 300); do grep -q 'listening on' "$T/dot.log" && break; sleep 0.1; done
check serve_extras_model_dot grep -q "model $(basename "$model"), listening" "$T/dot.log"
kill -TERM "$DOT_PID"
wait "$DOT_PID"
check serve_extras_model_dot_exit test $? = 0
