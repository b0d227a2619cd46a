#!/usr/bin/env bash
# tokenizer_parity.sh — `k3 tokenize` against the npm js-tiktoken encoder on
# a few thousand generated strings (multilingual, emoji, digits, whitespace
# runs, code, control-token spellings), using two public vocabularies
# (cl100k_base, o200k_base) written out as tiktoken.model with K3's pattern
# and K3's control tokens (tests/tok/make_parity.js). Ids must be identical,
# with control-token matching off and on; decoding gives the text back.
set -u
cd "$(dirname "$0")/../.."
K3=${K3:-build/k3}
OUT=${K3_BUILD:-build}/tok-parity
COUNT=${K3_TOK_PARITY_COUNT:-3000}

if ! command -v node >/dev/null; then
    echo "FAIL tokenizer_parity_setup (node is not installed)"
    exit 1
fi
if ! bash tests/npm/setup.sh; then
    echo "FAIL tokenizer_parity_setup (npm install of js-tiktoken failed)"
    exit 1
fi

# same lines -> count; print the first difference
compare() { # name expected got
    local total same
    total=$(wc -l <"$2")
    same=$(paste -d '\n' "$2" "$3" | paste - - -d '\t' | awk -F'\t' '$1 == $2' | wc -l)
    if [ "$total" -gt 0 ] && [ "$same" -eq "$total" ] && [ "$(wc -l <"$3")" -eq "$total" ]; then
        echo "PASS $1 ($same/$total identical)"
    else
        echo "FAIL $1 ($same/$total identical)"
        diff <(cat -n "$2") <(cat -n "$3") | head -4
    fi
}

for enc in cl100k_base:7:--shuffle o200k_base:11:; do
    IFS=: read -r name seed flag <<<"$enc"
    dir=$OUT/$name
    stamp=$dir/.made-$COUNT-$seed$flag
    if [ ! -f "$stamp" ] || [ tests/tok/make_parity.js -nt "$stamp" ]; then
        rm -rf "$dir"
        if ! node tests/tok/make_parity.js "$name" "$dir" "$COUNT" "$seed" $flag; then
            echo "FAIL tokenizer_parity_${name}_generate"
            continue
        fi
        touch "$stamp"
    fi
    "$K3" tokenize --model "$dir" --no-special --null <"$dir/strings.bin" >"$dir/got_plain.txt"
    compare "tokenizer_parity_${name}_plain" "$dir/expect_plain.txt" "$dir/got_plain.txt"
    "$K3" tokenize --model "$dir" --null <"$dir/strings.bin" >"$dir/got_special.txt"
    compare "tokenizer_parity_${name}_special" "$dir/expect_special.txt" "$dir/got_special.txt"
    # decode(encode(s)) == s in both modes (control tokens decode to their spelling)
    for mode in plain special; do
        if "$K3" detokenize --model "$dir" --null <"$dir/expect_$mode.txt" | cmp -s - "$dir/strings.bin"; then
            echo "PASS tokenizer_roundtrip_${name}_$mode"
        else
            echo "FAIL tokenizer_roundtrip_${name}_$mode"
        fi
    done
done
