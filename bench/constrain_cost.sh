#!/usr/bin/env bash
# constrain_cost.sh — what structured output costs per decoded token, end to
# end through `k3 serve`: the same requests (temperature 1, fixed seeds,
# thinking off, max_tokens tokens) unconstrained and with a JSON Schema /
# json_object, on a model directory (default: a fresh `k3 synth --preset
# bench`). Reports the median per-token decode time of each from the
# server's per-request log line (tok/s after the first token).
#   bench/constrain_cost.sh [MODEL_DIR] [REQUESTS] [MAX_TOKENS]
set -eu
cd "$(dirname "$0")/.."
K3=${K3:-build/k3}
MODEL=${1:-}
N=${2:-8}
MAXT=${3:-96}
TMP=$(mktemp -d)
trap 'kill "$PID" 2>/dev/null; rm -rf "$TMP"' EXIT
if [ -z "$MODEL" ]; then
    MODEL=$TMP/bench
    "$K3" synth --preset bench --out "$MODEL" --seed 1 >/dev/null
fi
OMP_WAIT_POLICY=passive "$K3" serve --model "$MODEL" --name m --port 0 --parallel 1 >"$TMP/log" 2>&1 &
PID=$!
for _ in $(seq 1 600); do PORT=$(sed -n 's/.*listening on http:\/\/[^:]*:\([0-9]*\).*/\1/p' "$TMP/log"); [ -n "$PORT" ] && break; sleep 0.2; done
URL=http://127.0.0.1:$PORT/v1/chat/completions
SCHEMA='{"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer"},"tags":{"type":"array","items":{"type":"string"}},"kind":{"enum":["cat","dog"]}},"required":["name","age","tags","kind"]}'
run() { # label, extra JSON fields
    : >"$TMP/$1"
    for s in $(seq 1 "$N"); do
        curl -s "$URL" -d "{\"messages\":[{\"role\":\"user\",\"content\":\"Describe a pet.\"}],\"max_tokens\":$MAXT,\"temperature\":1,\"seed\":$s,\"thinking\":false,\"ignore_eos\":true$2}" >/dev/null
        tail -1 "$TMP/log" | sed -n 's/.*completion=\([0-9]*\).*tok\/s=\([0-9.]*\).*/\1 \2/p' >>"$TMP/$1"
        tail -1 "$TMP/log" | sed -n 's/.*constrain=\([0-9.]*\)us.*/\1/p' >>"$TMP/$1.c"
    done
    [ -s "$TMP/$1.c" ] && sort -n "$TMP/$1.c" | awk '{a[NR]=$1} END {printf "%s: grammar (mask + advance) median %.1f us/token\n", "'"$1"'", a[int((NR+1)/2)]}'
    # median per-token time in ms
    awk '$2 > 0 {print 1000 / $2}' "$TMP/$1" | sort -n | awk '{a[NR]=$1} END {printf "%s: median %.3f ms/token over %d requests (%s)\n", "'"$1"'", a[int((NR+1)/2)], NR, "'"$1"'"}'
}
run plain ''
run json_object ',"response_format":{"type":"json_object"}'
run json_schema ",\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"pet\",\"schema\":$SCHEMA}}"
grep -o '"vocab_size": [0-9]*' "$MODEL/config.json" | head -1
