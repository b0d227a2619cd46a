#!/usr/bin/env bash
# tokenizer_cli.sh — `k3 tokenize` / `k3 detokenize`: byte-level defaults,
# model directories with and without tokenizer files, control tokens, and
# malformed tokenizer files (non-zero exit, message naming file and line).
set -u
cd "$(dirname "$0")/../.."
K3=${K3:-build/k3}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

check() { # name expected actual
    if [ "$2" = "$3" ]; then echo "PASS $1"; else echo "FAIL $1 (want '$2', got '$3')"; fi
}

# fails with a message containing $3
check_error() { # name dir text
    local err rc
    err=$(printf 'hi' | "$K3" tokenize --model "$2" 2>&1 >/dev/null)
    rc=$?
    if [ "$rc" -ne 0 ] && [[ "$err" == *"$3"* ]]; then
        echo "PASS $1"
    else
        echo "FAIL $1 (exit $rc, message '$err', want '$3')"
    fi
}

# Byte-level with the real K3 layout (no --model).
check tokenizer_cli_bytes "72,105" "$(printf 'Hi' | "$K3" tokenize)"
check tokenizer_cli_special "163587,104,163589" "$(printf '<|open|>h<|sep|>' | "$K3" tokenize)"
check tokenizer_cli_no_special "60,124,111,112,101,110,124,62" "$(printf '<|open|>' | "$K3" tokenize --no-special)"
check tokenizer_cli_empty "" "$(printf '' | "$K3" tokenize)"
check tokenizer_cli_detok "Hi<|close|>" "$(echo '72, 105 163588' | "$K3" detokenize)"
check tokenizer_cli_detok_skip "Hi<|sep|>" "$(echo '72,105,163586,163589,163839' | "$K3" detokenize --skip-special)"
check tokenizer_cli_detok_repair "a$(printf '\xef\xbf\xbd')" "$(echo '97,228,189' | "$K3" detokenize)"
check tokenizer_cli_roundtrip "$(printf 'na\xc3\xafve \xf0\x9f\x9a\x80 \xe4\xbd\xa0\xe5\xa5\xbd')" \
    "$(printf 'na\xc3\xafve \xf0\x9f\x9a\x80 \xe4\xbd\xa0\xe5\xa5\xbd' | "$K3" tokenize | "$K3" detokenize)"

# A model directory without tokenizer files, marked byte-level: byte-level for its vocab_size.
mkdir -p "$TMP/synth"
echo '{"model_type": "kimi_k3", "k3_tokenizer": "byte-level", "text_config": {"vocab_size": 1000}}' >"$TMP/synth/config.json"
check tokenizer_cli_synth_layout "747,65,748" "$(printf '<|open|>A<|close|>' | "$K3" tokenize --model "$TMP/synth")"
out=$(echo '1000' | "$K3" detokenize --model "$TMP/synth" 2>&1)
rc=$?
if [ $rc -ne 0 ] && [[ "$out" == *"1000 is out of range"* ]]; then
    echo "PASS tokenizer_cli_detok_range"
else
    echo "FAIL tokenizer_cli_detok_range (exit $rc: $out)"
fi
out=$(echo '12,x3' | "$K3" detokenize 2>&1)
rc=$?
if [ $rc -ne 0 ] && [[ "$out" == *"id #2: expected a decimal token id"* ]]; then
    echo "PASS tokenizer_cli_detok_garbage"
else
    echo "FAIL tokenizer_cli_detok_garbage (exit $rc: $out)"
fi

# A loaded vocabulary: the 256 bytes plus "hi" and " hi".
mkdir -p "$TMP/tok"
for b in $(seq 0 255); do # bytes 0..255 in base64, rank = byte
    printf "%s %d\n" "$(printf "\\x$(printf %02x "$b")" | base64)" "$b"
done >"$TMP/bytes.model"
cp "$TMP/bytes.model" "$TMP/tok/tiktoken.model"
printf 'aGk= 256\nIGhp 257\n' >>"$TMP/tok/tiktoken.model"
cat >"$TMP/tok/tokenizer_config.json" <<'JSON'
{"added_tokens_decoder": {"258": {"content": "[BOS]", "special": true},
                          "261": {"content": "<|open|>", "special": false}}}
JSON
check tokenizer_cli_loaded "256,257,261,104" "$(printf 'hi hi<|open|>h' | "$K3" tokenize --model "$TMP/tok")"
check tokenizer_cli_loaded_detok "hi hi<|open|>" "$(echo '256,257,258,261' | "$K3" detokenize --model "$TMP/tok" --skip-special)"

# Malformed files.
bad() { # name line-to-append expected-message
    mkdir -p "$TMP/$1"
    cp "$TMP/tok/tokenizer_config.json" "$TMP/$1/"
    cp "$TMP/bytes.model" "$TMP/$1/tiktoken.model"
    printf '%s\n' "$2" >>"$TMP/$1/tiktoken.model"
    check_error "tokenizer_cli_$1" "$TMP/$1" "$TMP/$1/tiktoken.model:257: $3"
}
bad bad_base64 'aG!= 256' "bad base64"
bad bad_rank 'aGk= 25x' "rank '25x' is not a decimal number"
bad dup_rank 'aGk= 7' "duplicate rank 7 (first on line 8)"
bad dup_bytes 'YQ== 256' "token bytes duplicate those of rank 97"
bad fields 'aGk=' 'expected "BASE64 RANK"'
mkdir -p "$TMP/nofile"
echo '{}' >"$TMP/nofile/tokenizer_config.json"
touch "$TMP/nofile/tiktoken.model"
check_error tokenizer_cli_empty_ranks "$TMP/nofile" "$TMP/nofile/tiktoken.model: no ranks"
mkdir -p "$TMP/noconfig"
cp "$TMP/tok/tiktoken.model" "$TMP/noconfig/"
check_error tokenizer_cli_missing_config "$TMP/noconfig" "$TMP/noconfig/tokenizer_config.json: cannot open"
mkdir -p "$TMP/badjson"
cp "$TMP/tok/tiktoken.model" "$TMP/badjson/"
printf '{\n"added_tokens_decoder": {,}\n' >"$TMP/badjson/tokenizer_config.json"
check_error tokenizer_cli_bad_config "$TMP/badjson" "$TMP/badjson/tokenizer_config.json:2: invalid JSON"
check_error tokenizer_cli_missing_dir "$TMP/none" "$TMP/none/config.json: cannot open"
