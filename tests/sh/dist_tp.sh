#!/usr/bin/env bash
# dist_tp.sh — tensor parallelism end to end: `mpirun -np 2|4 k3 logits` on the
# 4-head fixtures (tests/fixtures/tp4-*) must give the full logits of the
# single-process run within rtol 1e-5 / atol 1e-6 (the blocked order of
# model/rowpar.h makes them identical in practice) for prefill, decode and
# chunked modes, and agree with the oracle's logits (the sanitizer phase runs
# each mode once, with 4 or 2 ranks); with a bf16 latent cache (--cache-type
# bf16) TP2 and PP2 give the single-process bf16 logits in decode and chunked
# modes; every rank logs its slice;
# a rank count that does not divide the heads, or that would split an MXFP4
# group, is refused on every rank with a message.
# k3-test: alone (MPI ranks fill the cores; beside another test a sanitized run once passed its time limit)
cd "$(dirname "$0")/../.."
. tests/sh/dist_env.sh.inc
CMP=$K3_BUILD/tests/test_dist_cmp
TMP=$(mktemp -d)
DIST_FIXTURES="tp4-bf16 tp4-mxfp4"
[ "${K3_SAN:-0}" = 1 ] && DIST_FIXTURES=tp4-bf16 # the sanitizer phase is ~10x slower
trap 'rm -rf "$TMP"' EXIT

check() { # name, command... : PASS/FAIL on the command's status, its output as detail
    local name=$1
    shift
    local out
    if out=$("$@" 2>&1); then
        echo "PASS $name ($(tail -1 <<<"$out"))"
    else
        echo "FAIL $name"
        echo "$out" | tail -15 | sed 's/^/  /'
    fi
}

# Every run counts its traffic (K3_DIST_STATS) and keeps its log, so the slice
# and traffic checks below read the runs of the comparison loop instead of
# starting the same ranks again.
runs() { # the (mode, ranks) pairs a fixture is run with
    if [ "${K3_SAN:-0}" = 1 ]; then # the sanitizer phase: each mode and rank count once
        echo prefill:4 decode:4 chunked:5:2
    else
        local mode
        for mode in prefill decode chunked:5; do echo "$mode:2 $mode:4"; done
    fi
}
for fx in $DIST_FIXTURES; do
    F=tests/fixtures/$fx
    dist_tokens "$F" "$TMP/expected-$fx.f32"
    T=$DIST_T
    for run in $(runs); do
        np=${run##*:} mode=${run%:*}
        m=${mode/:/}
        [ -f "$TMP/tp1-$fx-$m.f32" ] ||
            "$K3" logits --model "$F" --tokens "$T" --out "$TMP/tp1-$fx-$m.f32" --mode "$mode" 2>"$TMP/err" ||
            cat "$TMP/err"
        out="$TMP/tp$np-$m.f32"
        log="$TMP/log-$fx-$m-$np"
        K3_DIST_STATS=1 dist_mpirun "$np" "$K3" logits --model "$F" --tokens "$T" --out "$out" --mode "$mode" \
            >"$log" 2>&1 || { tail -5 "$log"; rm -f "$out"; }
        check "dist_tp${np}_${fx}_${m}_vs_tp1" "$CMP" "$out" "$TMP/tp1-$fx-$m.f32" 1e-5 1e-6 "TP$np vs TP1"
        check "dist_tp${np}_${fx}_${m}_vs_oracle" "$CMP" "$out" "$TMP/expected-$fx.f32" 1e-4 1e-4 "TP$np vs oracle"
    done
done

# a bf16 latent cache: each rank keeps its own, split or staged the same way
F=tests/fixtures/tp4-bf16
T=$(cat $F/expected/tokens.txt)
bf16_modes="decode chunked:5"
[ "${K3_SAN:-0}" = 1 ] && bf16_modes=decode # the sanitizer phase: one mode
for mode in $bf16_modes; do
    m=${mode/:/}
    "$K3" logits --model "$F" --tokens "$T" --out "$TMP/bf1-$m.f32" --mode "$mode" --cache-type bf16
    for how in tp pp; do
        rm -f "$TMP/bf2.f32"
        dist_mpirun 2 "$K3" logits --model "$F" --tokens "$T" --out "$TMP/bf2.f32" --mode "$mode" \
            --cache-type bf16 $([ $how = pp ] && echo --pipeline) >"$TMP/log" 2>&1 || tail -5 "$TMP/log"
        check "dist_${how}2_bf16_cache_${m}_vs_1" "$CMP" "$TMP/bf2.f32" "$TMP/bf1-$m.f32" 1e-5 1e-6 "${how^^}2 vs 1 rank, bf16 cache"
    done
done

# every rank says which slice it holds
log=$TMP/log-tp4-bf16-prefill-4
n=$(grep -c 'tensor-parallel slice [0-3] of 4: KDA heads' "$log")
if [ "$n" -eq 4 ] && grep -q '\[rank 3/4\] tensor-parallel slice 3 of 4: KDA heads 3..3 of 4' "$log"; then
    echo "PASS dist_tp_ranks_log_their_slice"
else
    echo "FAIL dist_tp_ranks_log_their_slice ($n of 4 lines)"
    sed 's/^/  /' "$log"
fi

refused() { # name, np, model dir, expected message part
    local name=$1 np=$2 dir=$3 want=$4
    dist_mpirun "$np" "$K3" logits --model "$dir" --tokens 1,2,3 --out "$TMP/r.f32" >"$TMP/log" 2>&1
    local rc=$? lines
    lines=$(grep -c "$want" "$TMP/log")
    if [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] && [ "$lines" -eq "$np" ] && [ ! -e "$TMP/r.f32" ]; then
        echo "PASS $name"
    else
        echo "FAIL $name (exit $rc, $lines of $np ranks printed '$want')"
        sed 's/^/  /' "$TMP/log" | tail -12
    fi
}
refused dist_tp3_refused_heads 3 tests/fixtures/tp4-bf16 "are not divisible by 3"
refused dist_tp2_refused_mxfp4_group 2 "$K3_FIXTURES/ext-mxfp4" "would split a quantization"

# communication counted by the all-reduce wrapper: per decoded token, one
# all-reduce of D floats after each attention block and one after each FFN
# (D for the dense layer 0, latent + D for a MoE layer: one call for both).
# tp4-bf16: 7 layers, D = 64, latent 32 -> 14 calls and
# 7*256 + 256 + 6*384 = 4352 bytes per token (the decode run above).
log=$TMP/log-tp4-bf16-decode-4
dist_tokens tests/fixtures/tp4-bf16 "$TMP/unused.f32"
nt=$(tr ',' '\n' <<<"$DIST_T" | grep -c .)
n=$(grep -c "comm: $((14 * nt)) all-reduce calls, $((4352 * nt)) all-reduce bytes" "$log")
if [ "$n" -eq 4 ]; then
    echo "PASS dist_tp_bytes_per_token (4352 B per decoded token = 621.7 B per layer, 14 all-reduces; $nt tokens)"
else
    echo "FAIL dist_tp_bytes_per_token ($n of 4 ranks counted 14 x $nt calls, 4352 x $nt bytes)"
    grep comm "$log" | sed 's/^/  /'
fi
