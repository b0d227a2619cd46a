#!/usr/bin/env bash
# huge_pages.sh — K3_HUGE_PAGES=1 (transparent huge pages asked for on the
# weight mappings, opt-in) and K3_WEIGHTS=anon (the weight files read into
# anonymous huge-page memory instead of mapped, opt-in) change nothing but the
# paging: the logits of every tiny fixture are byte-identical with and
# without them (prefill, decode, and k3 quantize's output, which drops the
# mapped pages after each chunk), and a value other than "1" or "anon" leaves
# them off without error.
set -u
cd "$(dirname "$0")/../.."
K3=${K3:-build/k3}
FIX=${K3_FIXTURES:-$(cd .. && pwd)/shared/fixtures}
T=$(mktemp -d /tmp/k3-hugepages-XXXXXX)
trap 'rm -rf "$T"' EXIT
for fx in tiny-bf16 tiny-mxfp4 tiny-f32-sharded; do
    [ -d "$FIX/$fx" ] || { echo "FAIL huge_pages_$fx (no fixture $FIX/$fx)"; continue; }
    "$K3" logits --model "$FIX/$fx" --tokens 1,2,3,4,5 --out "$T/base.f32" >"$T/log" 2>&1 &&
        K3_HUGE_PAGES=1 "$K3" logits --model "$FIX/$fx" --tokens 1,2,3,4,5 --out "$T/huge.f32" \
            >>"$T/log" 2>&1 &&
        K3_HUGE_PAGES=yes "$K3" logits --model "$FIX/$fx" --tokens 1,2,3,4,5 --out "$T/other.f32" \
            >>"$T/log" 2>&1
    K3_WEIGHTS=anon "$K3" logits --model "$FIX/$fx" --tokens 1,2,3,4,5 --out "$T/anon.f32" \
        >>"$T/log" 2>&1
    "$K3" logits --model "$FIX/$fx" --tokens 1,2,3,4,5 --mode decode --out "$T/dec.f32" \
        >>"$T/log" 2>&1
    K3_WEIGHTS=anon "$K3" logits --model "$FIX/$fx" --tokens 1,2,3,4,5 --mode decode \
        --out "$T/anondec.f32" >>"$T/log" 2>&1
    K3_WEIGHTS=no "$K3" logits --model "$FIX/$fx" --tokens 1,2,3,4,5 --out "$T/no.f32" >>"$T/log" 2>&1
    if [ -s "$T/anon.f32" ] && cmp -s "$T/base.f32" "$T/anon.f32" && cmp -s "$T/base.f32" "$T/no.f32" &&
        [ -s "$T/dec.f32" ] && cmp -s "$T/dec.f32" "$T/anondec.f32"; then
        echo "PASS weights_anon_same_logits_$fx"
    else
        echo "FAIL weights_anon_same_logits_$fx"
        tail -3 "$T/log" | sed 's/^/  /'
    fi
    if [ -s "$T/base.f32" ] && cmp -s "$T/base.f32" "$T/huge.f32" && cmp -s "$T/base.f32" "$T/other.f32"; then
        echo "PASS huge_pages_same_logits_$fx"
    else
        echo "FAIL huge_pages_same_logits_$fx"
        tail -3 "$T/log" | sed 's/^/  /'
    fi
    rm -f "$T"/*.f32
done
# k3 quantize drops its inputs' mapped pages after each chunk (MADV_DONTNEED):
# on anonymous copies that would zero them, so it must leave them alone
if [ -d "$FIX/tiny-bf16" ]; then
    "$K3" quantize --model "$FIX/tiny-bf16" --out "$T/q-map" --bits 8 >"$T/log" 2>&1 &&
        K3_WEIGHTS=anon "$K3" quantize --model "$FIX/tiny-bf16" --out "$T/q-anon" --bits 8 >>"$T/log" 2>&1
    same=1
    for f in "$T"/q-map/*.safetensors; do
        cmp -s "$f" "$T/q-anon/$(basename "$f")" || same=0
    done
    if [ -d "$T/q-anon" ] && [ "$same" = 1 ]; then
        echo "PASS weights_anon_quantize_same_output"
    else
        echo "FAIL weights_anon_quantize_same_output"
        tail -3 "$T/log" | sed 's/^/  /'
    fi
fi
