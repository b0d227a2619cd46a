#!/usr/bin/env bash
# tokenizer_fuzz.sh — builds fuzz/fuzz_tokenizer (libFuzzer + ASan + UBSan)
# and runs it for a few seconds from small seeds (a ranks file, ranks +
# config, text). Longer runs by hand:
#   $K3_BUILD/fuzz/fuzz_tokenizer -max_total_time=600 $K3_BUILD/fuzz/tokenizer-corpus
# Built from the tokenizer's own sources (text + base layers) so it does not
# depend on the rest of the library compiling under clang.
set -u
cd "$(dirname "$0")/../.."
B=${K3_BUILD:-build}/fuzz
BIN=$B/fuzz_tokenizer
SEEDS=$B/tokenizer-seeds
if ! command -v clang >/dev/null; then
    echo "clang not installed: tokenizer fuzz target skipped"
    exit 0
fi
mkdir -p "$B" "$SEEDS"
SRC="fuzz/fuzz_tokenizer.c src/text/bpe.c src/text/pretok.c src/text/tok_load.c src/text/tokenizer.c
     src/text/utf8.c src/text/detok.c src/base/*.c"
need=0
[ -x "$BIN" ] || need=1
for f in $SRC src/text/*.h tests/tok/learn_bpe.h; do [ "$f" -nt "$BIN" ] && need=1; done
if [ $need = 1 ]; then
    # shellcheck disable=SC2046,SC2086
    if ! clang -std=c11 -D_GNU_SOURCE -g -O1 -Iinclude -Isrc $(pkg-config --cflags jansson libpcre2-8) \
        -fsanitize=fuzzer,address,undefined $SRC $(pkg-config --libs jansson libpcre2-8) -lpthread \
        -o "$BIN" >"$B/fuzz_tokenizer.build.log" 2>&1; then
        echo "FAIL tokenizer_fuzz_build"
        tail -5 "$B/fuzz_tokenizer.build.log"
        exit 1
    fi
fi
echo "PASS tokenizer_fuzz_build"

# seeds: mode byte + payload (see fuzz/fuzz_tokenizer.c); new inputs go to $CORPUS
rm -rf "$SEEDS"
mkdir -p "$SEEDS" "$B/tokenizer-corpus"
for b in $(seq 0 255); do printf "%s %d\n" "$(printf "\\x$(printf %02x "$b")" | base64)" "$b"; done >"$B/bytes.model"
{ printf '\000'; cat "$B/bytes.model"; printf 'aGk= 256\nIGhp 257\n'; } >"$SEEDS/ranks"
{ printf '\001'; cat "$B/bytes.model"; printf '\n\n{"added_tokens_decoder": {"258": {"content": "<|open|>", "special": false}}}'; } >"$SEEDS/config"
printf '\002Hello <|open|>world 你好 🚀 \xff\xe4\xbd 123456 \n\n  x' >"$SEEDS/text"

log=$B/fuzz_tokenizer.log
if "$BIN" -max_total_time=5 -timeout=10 -rss_limit_mb=1024 "$B/tokenizer-corpus" "$SEEDS" >"$log" 2>&1; then
    echo "PASS tokenizer_fuzz_run ($(grep -o 'Done [0-9]* runs' "$log" | head -1))"
else
    echo "FAIL tokenizer_fuzz_run"
    grep -E 'ERROR|SUMMARY|#0|#1|#2' "$log" | head -8
fi
