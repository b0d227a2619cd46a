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
