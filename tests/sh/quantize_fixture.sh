#!/usr/bin/env bash
# quantize_fixture.sh — `k3 quantize` end to end on the shared tiny fixtures.
#
# Each output is reloaded by `k3 quantize` itself; here we also run `k3 logits`
# on it and compare with the fixture's oracle logits (od + awk, no Python).
# The tiny fixtures are random models whose logits react strongly to weight
# noise (the quantized embedding and near-tied router scores dominate), so the
# accuracy bounds are the measured behaviour with margin, not the 95% target:
# q8 group 32 measured 14/16 argmax and 0.19 relative RMS (see
# docs/performance.md). Exactness of the format itself (k3 logits on a q8
# checkpoint = the oracle on its dequantized twin, max diff 6e-6) was checked
# with bench/quant_oracle_check.py, which needs Python and is not run here.
set -u
K3=${K3:-build/k3}
FIX=${K3_FIXTURES:-../shared/fixtures}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

pass() { echo "PASS $1"; }
fail() { echo "FAIL $1${2:+ ($2)}"; }

# cmp A B V -> "agree rows relrms maxdiff"
cmp_logits() {
    paste <(od -An -v -f "$1" | tr -s ' ' '\n' | grep -v '^$') \
        <(od -An -v -f "$2" | tr -s ' ' '\n' | grep -v '^$') | awk -v V="$3" '
    { c = (NR - 1) % V; a = $1; b = $2; d = a - b; if (d < 0) d = -d; if (d > md) md = d
      sd += d * d; sr += b * b
      if (c == 0 || a > ma) { ma = a; ia = c }
      if (c == 0 || b > mb) { mb = b; ib = c }
      if (c == V - 1) { rows++; if (ia == ib) agree++ } }
    END { printf "%d %d %.6f %.6f\n", agree, rows, (sr > 0 ? sqrt(sd / sr) : 1), md }'
}

# check NAME FIXTURE MIN_AGREE MAX_RELRMS quantize-args...
check() {
    local name=$1 fx=$2 min_agree=$3 max_rms=$4
    shift 4
    local out=$TMP/$name tok
    tok=$(cat "$FIX/$fx/expected/tokens.txt")
    if ! "$K3" quantize --model "$FIX/$fx" --out "$out" "$@" >"$TMP/$name.log" 2>&1; then
        fail "quantize_$name" "$(tail -1 "$TMP/$name.log")"
        return
    fi
    grep -q '"quantization"' "$out/config.json" && grep -q '"quantization_config"' "$out/config.json" &&
        pass "quantize_${name}_config" || fail "quantize_${name}_config" "no quantization block"
    if ! "$K3" logits --model "$out" --tokens "$tok" --out "$TMP/$name.f32" >/dev/null 2>&1; then
        fail "quantize_${name}_logits" "k3 logits failed on the output"
        return
    fi
    local v r
    v=$(grep -o '"vocab_size": *[0-9]*' "$FIX/$fx/config.json" | head -1 | grep -o '[0-9]*$')
    r=$(cmp_logits "$TMP/$name.f32" "$FIX/$fx/expected/logits.f32" "$v")
    read -r agree rows rms md <<<"$r"
    echo "  $name: argmax $agree/$rows, relative RMS $rms, max diff $md"
    if [ "$agree" -ge "$min_agree" ] && awk -v a="$rms" -v b="$max_rms" 'BEGIN{exit !(a <= b)}'; then
        pass "quantize_${name}_vs_oracle"
    else
        fail "quantize_${name}_vs_oracle" "argmax $agree/$rows (min $min_agree), rms $rms (max $max_rms)"
    fi
}

check q8_g32 tiny-bf16 12 0.3 --bits 8 --group-size 32
check q8_f32_src tiny-f32-sharded 11 0.2 --bits 8 --group-size 64
check q8_keep_mxfp4 tiny-mxfp4 13 0.15 --bits 8 --group-size 32 --keep-experts-mxfp4
check q4_g32 tiny-bf16 4 0.9 --bits 4 --group-size 32
check mxfp4_mode tiny-bf16 3 1.0 --mode mxfp4
check q2_mixed ext-mxfp4 1 1.5 --bits 2 --group-size 32 --recipe mixed

# keep-experts-mxfp4 copies the expert bytes: the stacked tensor must be U32 + U8 scales
if grep -q '"mode": "mxfp4"' "$TMP/q8_keep_mxfp4/config.json"; then
    pass quantize_keep_mxfp4_mode
else
    fail quantize_keep_mxfp4_mode "global mode is not mxfp4"
fi
# routers keep their source dtype (BF16, no quantization entry) unless --quantize-router
if ! grep -q 'mlp.gate"' "$TMP/q4_g32/config.json"; then
    pass quantize_router_source_dtype
else
    fail quantize_router_source_dtype "a router has a quantization entry"
fi
if "$K3" quantize --model "$FIX/tiny-bf16" --out "$TMP/qr" --bits 4 --group-size 32 \
    --quantize-router >/dev/null 2>&1 && grep -A3 'mlp.gate"' "$TMP/qr/config.json" | grep -q '"bits": 8'; then
    pass quantize_router_8bit_option
else
    fail quantize_router_8bit_option
fi

# bad input: clear message, non-zero exit, no crash
expect_error() { # name, pattern, args...
    local name=$1 pat=$2
    shift 2
    "$K3" quantize "$@" >"$TMP/err.log" 2>&1
    local rc=$?
    if [ "$rc" -ne 0 ] && [ "$rc" -lt 128 ] && grep -q -- "$pat" "$TMP/err.log"; then
        pass "quantize_err_$name"
    else
        fail "quantize_err_$name" "rc $rc: $(head -1 "$TMP/err.log")"
    fi
}
expect_error bits7 "bits must be" --model "$FIX/tiny-bf16" --out "$TMP/e1" --bits 7
expect_error group "group-size" --model "$FIX/tiny-bf16" --out "$TMP/e2" --bits 4 --group-size 48
expect_error no_model "required" --out "$TMP/e3" --bits 4
expect_error missing_dir "cannot open" --model "$TMP/nope" --out "$TMP/e4" --bits 4
expect_error requantize "already MLX-quantized" --model "$TMP/q8_g32" --out "$TMP/e5" --bits 4
mkdir -p "$TMP/badcfg" && echo '{"text_config": {"hidden_size": "x"}}' >"$TMP/badcfg/config.json"
expect_error bad_config "hidden_size" --model "$TMP/badcfg" --out "$TMP/e6" --bits 4
