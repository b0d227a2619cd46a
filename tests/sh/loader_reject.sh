#!/usr/bin/env bash
# loader_reject.sh — `k3 logits` on broken inputs exits non-zero with a message
# naming the file / tensor / field, and never crashes (under the ASan build too):
# truncated shard, header length past the end, A_log with a non-zero tail,
# missing model dir, bad --tokens / --mode / --threads, token id out of range.
set -u
cd "$(dirname "$0")/../.."
K3=${K3:-build/k3}
F=${K3_FIXTURES:-../shared/fixtures}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

check() { # name, expected message fragment, command...
    local name=$1 want=$2
    shift 2
    local err rc
    err=$("$@" 2>&1 >/dev/null)
    rc=$?
    if [ "$rc" -ne 0 ] && [ "$rc" -lt 128 ] && grep -qF -- "$want" <<<"$err" && ! grep -q 'Sanitizer' <<<"$err"; then
        echo "PASS $name"
    else
        echo "FAIL $name (exit $rc)"
        echo "  wanted: $want"
        echo "$err" | head -5 | sed 's/^/  got: /'
    fi
}

fresh() { rm -rf "$tmp/m" && cp -r "$F/tiny-bf16" "$tmp/m" && chmod -R u+w "$tmp/m"; }
L() { "$K3" logits --model "$tmp/m" --tokens 1,2,3 --out "$tmp/out.f32" "$@"; }

fresh
truncate -s 400000 "$tmp/m/model.safetensors"
check loader_truncated_shard "model.safetensors" L

fresh
printf '\xff\xff\xff\x00\x00\x00\x00\x00' | dd of="$tmp/m/model.safetensors" bs=1 conv=notrunc status=none
check loader_header_length_past_end "header length" L

fresh
poke_alog_tail() { # writes 1.0f into A_log[10] of layer 0 (head count is 2: padding)
    # the entry's data_offsets begin, from the JSON header
    local hdr off
    hdr=$(head -c 20000 "$tmp/m/model.safetensors" | tr -c '[:print:]' ' ')
    off=$(grep -o '"language_model.model.layers.0.self_attn.A_log":{[^}]*}' <<<"$hdr" | grep -o 'data_offsets":\[[0-9]*' | grep -o '[0-9]*$')
    local hlen=$(( $(od -An -tu8 -N8 "$tmp/m/model.safetensors") ))
    printf '\x00\x00\x80\x3f' | dd of="$tmp/m/model.safetensors" bs=1 seek=$((8 + hlen + off + 4 * 10)) conv=notrunc status=none
}
poke_alog_tail
check loader_alog_nonzero_tail "language_model.model.layers.0.self_attn.A_log has 32 values for num_heads = 2" L

# overwrite the first occurrence of $1 in the shard header with $2 (same length)
patch_header() {
    local off
    off=$(grep -obUaF -m1 -- "$1" "$tmp/m/model.safetensors" | head -1 | cut -d: -f1)
    printf '%s' "$2" | dd of="$tmp/m/model.safetensors" bs=1 seek="$off" conv=notrunc status=none
}

fresh
patch_header '"dtype":"BF16","shape":[64]' '"dtype":"BX16","shape":[64]'
check loader_unknown_dtype 'unknown dtype "BX16"' L

fresh
patch_header '"dtype":"BF16","shape":[64]' '"dtype":"BF16","shape":[66]'
check loader_wrong_byte_size "expected 132 for its shape and dtype" L

fresh
sed -i 's/"hidden_act": "situ"/"hidden_act": "gelu"/' "$tmp/m/config.json"
check loader_bad_hidden_act '"hidden_act" is "gelu"' L

check logits_missing_model "config.json" "$K3" logits --model "$tmp/nope" --tokens 1 --out "$tmp/o"
fresh
check logits_bad_tokens "--tokens" L --tokens 1,x,3
check logits_token_out_of_range "out of range" "$K3" logits --model "$tmp/m" --tokens 1,1000 --out "$tmp/o"
check logits_bad_mode "--mode" L --mode chunked:0
check logits_bad_threads "--threads" L --threads -2
check logits_missing_args "required" "$K3" logits --model "$tmp/m"
check logits_unwritable_out "cannot write" "$K3" logits --model "$tmp/m" --tokens 1 --out /nonexistent/dir/x.f32

# --- files that are not files, paths with glob characters (issue 12) ---
G() { timeout 120 "$K3" generate --model "$tmp/m" --byte-tokenizer --no-chat-template --prompt "Hi there" --verbose -m 12 "$@"; }
fresh
rm "$tmp/m/config.json" && mkfifo "$tmp/m/config.json"
check loader_fifo_config_refused "config.json: not a regular file" L # a FIFO used to hang the loader
fresh
ln -s /dev/zero "$tmp/m/model.safetensors.index.json"
check loader_index_dev_zero_refused "model.safetensors.index.json: not a regular file" L
fresh
mkfifo "$tmp/m/zz.safetensors"
check loader_fifo_shard_refused "zz.safetensors: not a regular file" L
rm -rf "$tmp/x[1]" && cp -r "$F/tiny-bf16" "$tmp/x[1]" && chmod -R u+w "$tmp/x[1]"
if "$K3" logits --model "$tmp/x[1]" --tokens 1,2,3 --out "$tmp/out.f32" 2>"$tmp/err"; then
    echo "PASS loader_glob_chars_in_path"
else
    echo "FAIL loader_glob_chars_in_path"
    sed 's/^/  /' "$tmp/err"
fi

# --- config fields: eos_token_id list, layer lists, rms_norm_eps, quantization_config ---
cfg_set() { # python expression on c (the config) and t (text_config)
    python3 - "$tmp/m/config.json" "$1" <<'PY'
import json, sys
p = sys.argv[1]
c = json.load(open(p))
t = c["text_config"]
exec(sys.argv[2])
json.dump(c, open(p, "w"), indent=1)
PY
}
# the greedy ids are 870,866,637,...: with 637 in an eos list the answer ends at it
fresh
cfg_set 'c["eos_token_id"] = t["eos_token_id"] = [999, 637]'
out=$(G 2>&1)
if grep -q '^\[k3\] generated ids (3): 870,866,637$' <<<"$out" && grep -q 'finished by end-of-turn token' <<<"$out"; then
    echo "PASS loader_eos_list_stops_on_any"
else
    echo "FAIL loader_eos_list_stops_on_any"
    grep '^\[k3\]' <<<"$out" | sed 's/^/  /'
fi
fresh
cfg_set 'c["eos_token_id"] = t["eos_token_id"] = "</s>"'
check loader_eos_string_refused '"eos_token_id" must be a token id' L
fresh
cfg_set 't["linear_attn_config"]["full_attn_layers"] = [3, 4]'
check loader_full_attn_contradicts_kda 'layer 3 is in both kda_layers and full_attn_layers' L
fresh
cfg_set 't["linear_attn_config"]["full_attn_layers"] = []'
check loader_full_attn_missing_layer 'layer 4 is in neither of kda_layers and full_attn_layers' L
fresh
cfg_set 't["rms_norm_eps"] = 0'
check loader_rms_norm_eps_zero '"rms_norm_eps" = 0' L
fresh
cfg_set 't["rms_norm_eps"] = 3.5'
check loader_rms_norm_eps_large '"rms_norm_eps" = 3.5' L
fresh
cfg_set 'c["quantization_config"] = {"quant_method": "gptq", "bits": 4, "group_size": 128}'
check loader_quant_gptq_refused 'quant_method is "gptq", which k3 does not load' L
fresh
cfg_set 't["quantization_config"] = {"quant_method": "compressed-tensors", "format": "float-quantized"}'
check loader_quant_ct_format_refused '"float-quantized"' L

# the trained context is the server's prompt cap: 0 / -1 must not mean "none"
for v in 0 -1 2147483647 true; do
    fresh
    cfg_set "t['max_position_embeddings'] = $( [ $v = true ] && echo True || echo $v )"
    check "loader_max_positions_$v" '"max_position_embeddings"' L
done
fresh
cfg_set 'c["max_position_embeddings"] = -1'
check loader_max_positions_top_level '"max_position_embeddings" = -1 is out of range' L
fresh
cfg_set 't["topk_group"] = 3'
check loader_topk_group_past_groups '"topk_group" = 3, expected 1..num_expert_group (1)' L
fresh
cfg_set 't["linear_attn_config"]["kda_layers"] = [1, 2, 3, 9]; t["linear_attn_config"]["full_attn_layers"] = [4]'
check loader_kda_layer_past_model 'kda_layers[3] = 9 names no layer of the model (num_hidden_layers 4' L
fresh
cfg_set 't["linear_attn_config"]["kda_layers"] = [1, 2, 3, 5]; t["num_nextn_predict_layers"] = 1'
if L 2>"$tmp/err"; then echo "PASS loader_kda_lists_mtp_layer"; else
    echo "FAIL loader_kda_lists_mtp_layer"; sed 's/^/  /' "$tmp/err"; fi
# every numeric field is range-checked by name
for kv in num_experts=-8 num_shared_experts=-1 first_k_dense_replace=9 first_k_dense_replace=-1 \
    q_lora_rank=-3 qk_rope_head_dim=-8 moe_renormalize=2 tie_word_embeddings=7 \
    routed_scaling_factor=0 activation_situ_beta=-1 num_nextn_predict_layers=-1 \
    attn_res_block_size=-2 num_hidden_layers=0 num_hidden_layers=5000; do
    fresh
    cfg_set "t['${kv%%=*}'] = ${kv#*=}"
    check "config_range_$kv" "\"${kv%%=*}\"" L
done

# --- the tokenizer: no silent byte-level fallback ---
fresh
check tokenizer_missing_is_error "no tiktoken.model" "$K3" generate --model "$tmp/m" --prompt hi -m 1
check tokenizer_missing_tokenize "no tiktoken.model" "$K3" tokenize --model "$tmp/m" </dev/null
if "$K3" generate --model "$tmp/m" --prompt hi -m 1 --byte-tokenizer >/dev/null 2>"$tmp/err"; then
    echo "PASS tokenizer_byte_level_on_request"
else
    echo "FAIL tokenizer_byte_level_on_request"
    sed 's/^/  /' "$tmp/err"
fi
# integer fields given as reals: whole numbers in range load; others are
# refused by name, never converted out of range (UBSan: fuzz_config found 3e9)
for v in 3e9 1e30 -3e9 2.5; do
    fresh
    cfg_set "t['hidden_size'] = $v"
    check "config_real_int_$v" 'field "hidden_size" must be an integer' L
done
fresh
cfg_set 't["num_attention_heads"] = float(t["num_attention_heads"])'
if L 2>"$tmp/err"; then echo "PASS config_whole_real_loads"; else
    echo "FAIL config_whole_real_loads"; sed 's/^/  /' "$tmp/err"; fi
cfg_set 'c["k3_tokenizer"] = "byte-level"'
if "$K3" generate --model "$tmp/m" --prompt hi -m 1 >/dev/null 2>"$tmp/err" &&
    [ "$(echo -n 'Hi' | "$K3" tokenize --model "$tmp/m")" = "72,105" ]; then
    echo "PASS tokenizer_byte_level_marked_checkpoint"
else
    echo "FAIL tokenizer_byte_level_marked_checkpoint"
    sed 's/^/  /' "$tmp/err"
fi

# --- hints for what new users point k3 at ---
printf 'GGUF\003\000\000\000' >"$tmp/model.gguf"
check hint_gguf "is a GGUF file" "$K3" generate --model "$tmp/model.gguf" --prompt hi
check hint_repo_id "k3 does not download models" "$K3" generate --model moonshotai/Kimi-K3 --prompt hi
mkdir -p "$tmp/k2" && echo '{"model_type": "kimi_k2", "architectures": ["DeepseekV3ForCausalLM"], "vocab_size": 163840}' >"$tmp/k2/config.json"
check hint_kimi_k2 '"kimi_k2" checkpoint (Kimi-K2 / DeepSeek family)' "$K3" logits --model "$tmp/k2" --tokens 1 --out "$tmp/o"
fresh
printf 'version https://git-lfs.github.com/spec/v1\noid sha256:0123\nsize 1234\n' >"$tmp/m/model.safetensors"
check hint_git_lfs_pointer "is a git-lfs pointer, not the weights" L
