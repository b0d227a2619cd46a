#!/usr/bin/env bash
# prefetch_residency.sh — expert read-ahead and the RAM budget never change the logits.
#
# k3 logits (decode mode, 40 tokens: 80 MoE calls, so the hot-expert ranking
# runs several times) with read-ahead off (K3_PREFETCH=0), on (K3_PREFETCH=1),
# auto (unset) with a model that fits (each expert read ahead once) and one
# that does not (K3_PREFETCH_MEMAVAIL below the model: every selection), and
# with RAM budgets that lock the dense part only partly, the dense part and a
# few hot experts (the set changes between re-rankings), and everything. Every
# output must be byte-identical to the first. K3_PREFETCH_STATS shows that
# each mode did what it says (bytes read ahead, bytes locked), so a no-op
# cannot pass. Fixtures: bf16 MoE (tp4-moe) and MXFP4 experts (tiny-mxfp4).
set -u
K3=${K3:-build/k3}
FIX=${K3_FIXTURES:-../shared/fixtures}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
TOK=$(seq -s, 3 42)

pass() { echo "PASS $1"; }
fail() { echo "FAIL $1${2:+ ($2)}"; }

stat_of() { # log, field regex -> number
    grep -o "$2" "$1" | head -1 | grep -o '[0-9.]*' | head -1
}

for fx in tests/fixtures/tp4-moe "$FIX/tiny-mxfp4"; do
    name=$(basename "$fx")
    i=0
    for mode in "K3_PREFETCH=0" "K3_PREFETCH=1" "K3_RAM_BUDGET=200K" "K3_RAM_BUDGET=500K" "K3_RAM_BUDGET=1G" \
        "K3_PREFETCH_MEMAVAIL=1T" "K3_PREFETCH_MEMAVAIL=1K"; do
        i=$((i + 1))
        if ! env -u K3_PREFETCH "$mode" K3_PREFETCH_STATS=1 "$K3" logits --model "$fx" --tokens "$TOK" --mode decode \
            --out "$TMP/$i.f32" >"$TMP/$i.log" 2>&1; then
            fail "prefetch_${name}_${mode}" "$(tail -1 "$TMP/$i.log")"
            continue
        fi
        echo "  $name $mode: $(grep -o '[0-9.]* MB read ahead.*' "$TMP/$i.log")"
        if [ "$i" -gt 1 ]; then
            cmp -s "$TMP/1.f32" "$TMP/$i.f32" && pass "prefetch_${name}_${mode}_bitwise" ||
                fail "prefetch_${name}_${mode}_bitwise" "logits differ from K3_PREFETCH=0"
        fi
    done
    ahead=$(stat_of "$TMP/2.log" '[0-9.]* MB read ahead')
    off=$(stat_of "$TMP/1.log" '[0-9.]* MB read ahead')
    awk -v a="$ahead" -v o="$off" 'BEGIN { exit !(a > 0 && o == 0) }' &&
        pass "prefetch_${name}_reads_ahead" || fail "prefetch_${name}_reads_ahead" "on $ahead MB, off $off MB"
    fits=$(stat_of "$TMP/6.log" '[0-9.]* MB read ahead')
    big=$(stat_of "$TMP/7.log" '[0-9.]* MB read ahead')
    grep -q 'read-ahead first selection' "$TMP/6.log" && grep -q 'read-ahead every selection' "$TMP/7.log" &&
        awk -v a="$ahead" -v f="$fits" -v b="$big" 'BEGIN { exit !(f > 0 && f < a && b == a) }' &&
        pass "prefetch_${name}_auto" || fail "prefetch_${name}_auto" "fits $fits MB, larger than RAM $big MB, on $ahead MB"
    d3=$(stat_of "$TMP/3.log" 'dense locked [0-9.]*')
    d5=$(stat_of "$TMP/5.log" 'dense locked [0-9.]*')
    e4=$(stat_of "$TMP/4.log" 'experts locked [0-9.]*')
    e5=$(stat_of "$TMP/5.log" 'experts locked [0-9.]*')
    r4=$(stat_of "$TMP/4.log" '[0-9]* re-rankings')
    awk -v d3="$d3" -v d5="$d5" -v e4="$e4" -v e5="$e5" -v r4="$r4" \
        'BEGIN { exit !(d3 > 0 && d3 <= 0.21 && d5 > d3 && e5 > 0 && e4 < e5 && r4 >= 3) }' &&
        pass "prefetch_${name}_budget_locks" ||
        fail "prefetch_${name}_budget_locks" "dense $d3/$d5 MB, experts $e4/$e5 MB, $r4 re-rankings"
done
