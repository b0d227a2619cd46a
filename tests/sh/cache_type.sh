#!/usr/bin/env bash
# cache_type.sh — `--cache-type f32|bf16` on every command that runs a model:
# a bad value is a one-line error naming the option and its values (exit 2 or
# 1, never a run); bf16 runs in generate, chat and bench (bench reports it),
# and in serve, where a chat resumes from a bf16 prompt-cache snapshot; and
# `k3 generate` / `k3 chat --ctx-size N` plan one sequence's memory at start:
# on a synthesized model whose latents at 1M tokens need far more
# than any RAM (30 MLA layers of rank 8192), the error names RAM and
# --ctx-size, and suggests --cache-type bf16 only while the cache is f32.
set -u
cd "$(dirname "$0")/../.."
K3=${K3:-build/k3}
FIX=${K3_FIXTURES:-$(cd .. && pwd)/shared/fixtures}
FX=$FIX/tiny-bf16
T=$(mktemp -d /tmp/k3-cachetype-XXXXXX)
trap 'rm -rf "$T"' EXIT

. tests/sh/lib/check.bash

bad_value() { # command args...: refused, with the message
    local out
    out=$("$K3" "$@" --cache-type f16 </dev/null 2>&1)
    local rc=$?
    [ $rc -ne 0 ] && grep -q -- "--cache-type" <<<"$out" && grep -q "f32 or bf16" <<<"$out" ||
        { echo "exit $rc: $out"; return 1; }
}
check cache_type_bad_logits bad_value logits --model "$FX" --tokens 1,2 --out "$T/x"
check cache_type_bad_generate bad_value generate --model "$FX" --byte-tokenizer -p hi
check cache_type_bad_chat bad_value chat --model "$FX" --byte-tokenizer
check cache_type_bad_serve bad_value serve --model "$FX" --port 0
check cache_type_bad_bench bad_value bench --model "$FX" -p 4 -n 2 --runs 1

check cache_type_bf16_generate "$K3" generate --model "$FX" --byte-tokenizer -p hi -n 4 --cache-type bf16
check cache_type_bf16_chat bash -c "echo hi | '$K3' chat --model '$FX' --byte-tokenizer -n 4 --cache-type bf16"
bench_reports() {
    "$K3" bench --model "$FX" -p 4 -n 2 --runs 1 --json --cache-type bf16 | grep -q '"cache_type":"bf16"'
}
check cache_type_bf16_bench bench_reports

cat >"$T/cfg.json" <<'JSON'
{"text_config": {"vocab_size": 512, "hidden_size": 64, "num_hidden_layers": 31,
  "num_attention_heads": 2, "num_key_value_heads": 2,
  "linear_attn_config": {"kda_layers": [1], "num_heads": 2, "head_dim": 16,
    "full_attn_layers": [2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31]},
  "kv_lora_rank": 8192, "q_lora_rank": 48, "qk_nope_head_dim": 16, "qk_rope_head_dim": 8,
  "v_head_dim": 16, "num_experts": 4, "moe_intermediate_size": 32, "intermediate_size": 96,
  "first_k_dense_replace": 1, "num_experts_per_token": 2}}
JSON
check cache_type_synth "$K3" synth --out "$T/m" --config "$T/cfg.json" --seed 1
too_big() { # want-bf16-hint (1/0), command args...
    local hint=$1
    shift
    local out
    out=$("$K3" "$@" --model "$T/m" --byte-tokenizer --ctx-size 1048576 </dev/null 2>&1)
    local rc=$?
    [ $rc -ne 0 ] && grep -q "needs .* MiB .* RAM available; lower --ctx-size" <<<"$out" ||
        { echo "exit $rc: $out"; return 1; }
    if [ "$hint" = 1 ]; then grep -q -- "--cache-type bf16" <<<"$out"; else ! grep -q -- "--cache-type bf16" <<<"$out"; fi ||
        { echo "bf16 hint (want $hint): $out"; return 1; }
}
check cache_type_generate_ctx_too_big too_big 1 generate -p hi
check cache_type_generate_ctx_too_big_bf16 too_big 0 generate -p hi --cache-type bf16
check cache_type_chat_ctx_too_big too_big 1 chat
check cache_type_generate_ctx_fits "$K3" generate --model "$T/m" --byte-tokenizer -p hi -n 2 --ctx-size 4096

# serve with a bf16 cache (the built-in model): two chats sharing a system
# prompt; the second resumes from the first's prompt-cache snapshot
serve_bf16() {
    local log="$T/serve.log" port="" i out
    "$K3" serve --port 0 --cache-type bf16 >"$log" 2>&1 &
    local pid=$!
    for i in $(seq 1 150); do
        port=$(grep -o 'listening on http://127.0.0.1:[0-9]*' "$log" | grep -o '[0-9]*$')
        [ -n "$port" ] && break
        sleep 0.2
    done
    local chat='{"max_tokens":4,"temperature":0,"chat_template_kwargs":{"thinking":false},"messages":[{"role":"system","content":"You answer in few words, always."},{"role":"user","content":"%s"}]}'
    for q in Hi Bye; do
        # shellcheck disable=SC2059
        out=$(curl -s -m 30 "http://127.0.0.1:$port/v1/chat/completions" -H 'Content-Type: application/json' -d "$(printf "$chat" "$q")")
        echo "$out"
    done
    kill -TERM $pid 2>/dev/null
    wait $pid 2>/dev/null
    [ -n "$port" ] && grep -q '"content"' <<<"$out" && grep -q '"cached_tokens":[1-9]' <<<"$out"
}
check cache_type_bf16_serve_prompt_cache serve_bf16
