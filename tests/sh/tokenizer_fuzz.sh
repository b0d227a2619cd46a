#!/usr/bin/env bash
# tokenizer_fuzz.sh — builds fuzz/fuzz_tokenizer (libFuzzer + ASan + UBSan)
# and runs it for a few seconds from small seeds (a ranks file, ranks +
# config, text). Longer runs by hand:
#   $K3_BUILD/fuzz/fuzz_tokenizer -max_total_time=600 $K3_BUILD/fuzz/tokenizer-corpus
# Built from the tokenizer's own sources (text + base layers) so it does not
# depend on the rest of the library compiling under clang.
set -u
cd "$(dirname "$0")/../.."
FUZZ_PKGS="jansson libpcre2-8"
. tests/sh/lib/fuzz.bash
fuzz_need_clang tokenizer_fuzz
SEEDS=$B/fuzz/tokenizer-seeds
fuzz_build fuzz_tokenizer src/text/bpe.c src/text/pretok.c src/text/tok_load.c src/text/tokenizer.c \
    src/text/utf8.c src/text/detok.c src/text/ids.c || exit 1

# seeds: mode byte + payload (see fuzz/fuzz_tokenizer.c); new inputs go to $CORPUS
rm -rf "$SEEDS"
mkdir -p "$SEEDS" "$B/fuzz/tokenizer-corpus"
for b in $(seq 0 255); do printf "%s %d\n" "$(printf "\\x$(printf %02x "$b")" | base64)" "$b"; done >"$B/fuzz/bytes.model"
{ printf '\000'; cat "$B/fuzz/bytes.model"; printf 'aGk= 256\nIGhp 257\n'; } >"$SEEDS/ranks"
{ printf '\001'; cat "$B/fuzz/bytes.model"; printf '\n\n{"added_tokens_decoder": {"258": {"content": "<|open|>", "special": false}}}'; } >"$SEEDS/config"
printf '\002Hello <|open|>world 你好 🚀 \xff\xe4\xbd 123456 \n\n  x' >"$SEEDS/text"

fuzz_run fuzz_tokenizer "$B/fuzz/tokenizer-corpus" "$SEEDS"
