#!/usr/bin/env bash
# serve_operators.sh — `k3 serve` as llama-server and vLLM operators start and
# watch it: their flag spellings (-c, -t, -np, --alias / -a, -m,
# --max-model-len, --max-num-seqs) and a positional model directory give the
# same settings as k3's own flags; --help lists every endpoint; /metrics has
# the queue/prefill/decode/inter-token histograms, finish reasons, memory
# against budgets and process_* series, as well-formed Prometheus text; a
# stream the client abandons stops generating (finish reason "cancelled").
cd "$(dirname "$0")/../.."
. tests/serve/lib.sh
T=$SERVE_TMP
MODEL=$(serve_model) || { echo "FAIL serve_operators_model"; exit 1; }
jsq() { node -e 'let s="";process.stdin.on("data",c=>s+=c).on("end",()=>{const d=JSON.parse(s);const v=eval("d"+process.argv[1]);console.log(typeof v==="object"?JSON.stringify(v):String(v))})' "$1"; }

# start_raw ARGS...: `k3 serve ARGS --port 0` without lib.sh's --model/--name
start_raw() {
    SERVE_LOG="$T/raw.$RANDOM.log"
    "$K3" serve "$@" --port 0 >"$SERVE_LOG" 2>&1 &
    SERVE_PID=$!
    SERVE_PIDS+=("$SERVE_PID")
    for _ in $(seq 1 600); do
        SERVE_PORT=$(sed -n 's/.*listening on http:\/\/[^:]*:\([0-9]*\).*/\1/p' "$SERVE_LOG")
        [ -n "$SERVE_PORT" ] && SERVE_URL="http://127.0.0.1:$SERVE_PORT" && return 0
        kill -0 "$SERVE_PID" 2>/dev/null || break
        sleep 0.1
    done
    cat "$SERVE_LOG"
    return 1
}

# --- --help names every endpoint ---
"$K3" serve --help >"$T/help"
for ep in / /v1/chat/completions /v1/completions /v1/responses /v1/messages \
    /v1/messages/count_tokens /v1/models /tokenize /detokenize /props /health /metrics; do
    grep -qE "^  (GET|POST) +(.*, )?${ep}(,| |$)" "$T/help" || { echo "FAIL serve_operators_help_lists $ep"; HELPBAD=1; }
done
[ -z "${HELPBAD:-}" ] && echo "PASS serve_operators_help_lists_endpoints"

# --- llama-server spellings + positional directory ---
start_raw "$MODEL" -c 300 -t 1 -np 3 --alias ops-a --alias ops-b || { echo "FAIL serve_operators_llama_start"; exit 1; }
curl -s "$SERVE_URL/props" >"$T/props"
curl -s "$SERVE_URL/health" >"$T/health"
curl -s "$SERVE_URL/v1/models" >"$T/models"
check serve_operators_c_is_ctx_size test "$(jsq .n_ctx <"$T/props")" = 300
check serve_operators_np_is_parallel test "$(jsq .total_slots <"$T/props")" = 3
check serve_operators_t_is_threads test "$(jsq .batch.threads <"$T/health")" = 1
check serve_operators_alias_is_name test "$(jsq '.data.map(m=>m.id).join()' <"$T/models")" = "ops-a,ops-b"
check serve_operators_positional_model grep -q "model ops-a, listening" "$SERVE_LOG"
serve_stop || echo "FAIL serve_operators_llama_exit"

# --- vLLM spellings ---
start_raw -m "$MODEL" --max-model-len 260 --max-num-seqs 2 -a vl || { echo "FAIL serve_operators_vllm_start"; exit 1; }
curl -s "$SERVE_URL/props" >"$T/props"
check serve_operators_max_model_len test "$(jsq .n_ctx <"$T/props")" = 260
check serve_operators_max_num_seqs test "$(jsq .total_slots <"$T/props")" = 2
check serve_operators_a_is_name test "$(jsq .model_alias <"$T/props")" = vl
serve_stop || echo "FAIL serve_operators_vllm_exit"

# --- errors: a second positional, an unknown flag, a missing value ---
"$K3" serve "$MODEL" "$MODEL" --port 0 >"$T/e1" 2>&1
check serve_operators_two_dirs_refused test $? = 2 -a "$(grep -c 'unexpected argument' "$T/e1")" = 1
"$K3" serve -np >"$T/e2" 2>&1
check serve_operators_missing_value test $? = 2 -a "$(grep -c 'needs a value' "$T/e2")" = 1
"$K3" serve -x 3 >"$T/e3" 2>&1
check serve_operators_unknown_flag test $? = 2 -a "$(grep -c "unknown option '-x'" "$T/e3")" = 1

# --- /metrics after requests ---
serve_start --test-mode --ctx-size 131072 --max-tokens 131072 || { echo "FAIL serve_operators_metrics_start"; exit 1; }
chat() { curl -s -H 'Content-Type: application/json' --data-binary "$1" "$SERVE_URL/v1/chat/completions"; }
chat '{"model":"tiny","messages":[{"role":"user","content":"Hi"}],"max_tokens":6}' >/dev/null
chat '{"model":"tiny","messages":[{"role":"user","content":"Hi"}],"max_tokens":50,"k3_test_force_text":"ok"}' >/dev/null

# a stream the client leaves after its first chunk: the server stops it
done0=$(curl -s "$SERVE_URL/health" | jsq .requests_done)
dec0=$(curl -s "$SERVE_URL/health" | jsq .decode_tokens)
# (forced text longer than max_tokens, which at this model's 2000-3000
# tokens/s takes far longer than the client's first read)
long=$(head -c 200000 /dev/zero | tr '\0' 'a')
printf '{"model":"tiny","messages":[{"role":"user","content":"Hi"}],"max_tokens":100000,"stream":true,"k3_test_force_text":"%s"}' "$long" >"$T/long.json"
curl -sN -H 'Content-Type: application/json' --data-binary @"$T/long.json" \
    "$SERVE_URL/v1/chat/completions" 2>/dev/null | head -c 200 >/dev/null
for _ in $(seq 1 600); do
    [ "$(curl -s "$SERVE_URL/health" | jsq .requests_done)" -gt "$done0" ] && break
    sleep 0.1
done
dec1=$(curl -s "$SERVE_URL/health" | jsq .decode_tokens)
check serve_operators_disconnect_stops test $((dec1 - dec0)) -lt 99000

# a request is counted when its connection completes, which the server may
# reach after the client has read the last byte: wait (bounded) for the three
# finish reasons before reading the rest
finish_lines() { grep -cE '^k3_request_finish_total\{model="tiny",finished_reason="(length|stop|cancelled)"\} 1$' "$T/m"; }
for _ in $(seq 1 300); do
    curl -s "$SERVE_URL/metrics" >"$T/m"
    [ "$(finish_lines)" -ge 3 ] && break
    sleep 0.1
done
has() { grep -qE "^$1" "$T/m" || { echo "  missing: $1"; grep "^k3_request_finish_total" "$T/m" | sed "s/^/  have: /"; return 1; }; }
check serve_operators_metrics_queue has 'k3_request_queue_time_seconds_count\{model="tiny"\} [3-9]'
check serve_operators_metrics_prefill has 'k3_request_prefill_time_seconds_count\{model="tiny"\} [3-9]'
check serve_operators_metrics_decode has 'k3_request_decode_time_seconds_count\{model="tiny"\} [3-9]'
check serve_operators_metrics_itl has 'k3_inter_token_latency_seconds_count\{model="tiny"\} [1-9]'
check serve_operators_metrics_finish_length has 'k3_request_finish_total\{model="tiny",finished_reason="length"\} 1$'
check serve_operators_metrics_finish_stop has 'k3_request_finish_total\{model="tiny",finished_reason="stop"\} 1$'
check serve_operators_metrics_finish_cancelled has 'k3_request_finish_total\{model="tiny",finished_reason="cancelled"\} 1$'
check serve_operators_metrics_cache_budget has 'k3_prefix_cache_budget_bytes\{model="tiny"\} 1073741824$'
check serve_operators_metrics_cache_usage has 'k3_prefix_cache_usage_ratio\{model="tiny"\} 0\.[0-9]'
check serve_operators_metrics_state has 'k3_state_block_bytes\{model="tiny"\} [1-9]'
check serve_operators_metrics_state_in_use has 'k3_state_bytes_in_use\{model="tiny"\} 0$'
check serve_operators_metrics_rss has 'process_resident_memory_bytes [1-9][0-9]*$'
check serve_operators_metrics_cpu has 'process_cpu_seconds_total [0-9.]+$'

# well-formed exposition text: every sample is NAME{labels} VALUE with a
# non-negative value, its family has one HELP and one TYPE line before it,
# histogram buckets are cumulative and end in +Inf = _count
awk '
/^# HELP / { if (help[$3]++) bad("two HELP lines for " $3); next }
/^# TYPE / { if (type[$3]) bad("two TYPE lines for " $3); type[$3] = $4; next }
/^#/ { bad("stray comment: " $0); next }
!/^[a-zA-Z_:][a-zA-Z0-9_:]*(\{[a-z_]+="[^"]*"(,[a-z_]+="[^"]*")*\})? [0-9.e+]+$/ { bad("bad sample: " $0); next }
{
    name = $1; sub(/\{.*/, "", name); fam = name
    if (type[fam] == "") { fam = name; sub(/_(bucket|sum|count)$/, "", fam) }
    if (type[fam] == "") bad("no TYPE before " name)
    if ($2 < 0) bad("negative: " $0)
    if (name ~ /_bucket$/) {
        key = $1; sub(/,?le="[^"]*"/, "", key)
        if (key in last && $2 < last[key]) bad("bucket not cumulative: " $0)
        last[key] = $2
        if ($1 ~ /le="\+Inf"/) inf[fam] = $2
    }
    if (name ~ /_count$/ && type[fam] == "histogram" && inf[fam] != $2) bad("+Inf != count: " $0)
}
function bad(m) { print "  " m; err = 1 }
END { exit err }' "$T/m" >"$T/awk.out"
rc=$?
cat "$T/awk.out"
check serve_operators_metrics_wellformed test $rc = 0
serve_stop || echo "FAIL serve_operators_metrics_exit"
