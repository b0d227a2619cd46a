#!/usr/bin/env bash
# huge_pages.sh — K3_HUGE_PAGES=1 (transparent huge pages asked for on the
# weight mappings, opt-in) changes nothing but the kernel's paging: the logits
# of every tiny fixture are byte-identical with and without it, and a value
# other than "1" leaves it off without error.
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
    if [ -s "$T/base.f32" ] && cmp -s "$T/base.f32" "$T/huge.f32" && cmp -s "$T/base.f32" "$T/other.f32"; then
        echo "PASS huge_pages_same_logits_$fx"
    else
        echo "FAIL huge_pages_same_logits_$fx"
        tail -3 "$T/log" | sed 's/^/  /'
    fi
    rm -f "$T"/*.f32
done
