#!/usr/bin/env bash
# synth_oracle.sh — checkpoints written by `k3 synth` load in the engine and
# their `k3 logits` match the float64 oracle (../shared/oracle/k3_ref.py).
# The oracle comparison needs python3-numpy; without it those checks print a
# SKIP line (the load / shape checks still run).
set -u
cd "$(dirname "$0")/../.."
K3=${K3:-build/k3}
ORACLE=${K3_ORACLE:-$(cd .. && pwd)/shared/oracle/k3_ref.py}
T=$(mktemp -d /tmp/k3-synth-oracle-XXXXXX)
trap 'rm -rf "$T"' EXIT
TOKENS=5,1,743,17,999,256,2,88,300,4,4,4

have_numpy=0
if [ -f "$ORACLE" ] && /usr/bin/python3 -c 'import numpy' 2>/dev/null; then have_numpy=1; fi

. tests/sh/lib/check.bash

# max |k3 - oracle| <= 2e-4 * (1 + max |oracle|), and the logits are not flat
compare() { # k3 file, oracle file
    /usr/bin/python3 - "$1" "$2" <<'EOF'
import sys, numpy as np
a = np.fromfile(sys.argv[1], dtype=np.float32)
b = np.fromfile(sys.argv[2], dtype=np.float32)
assert a.size == b.size and a.size > 0, (a.size, b.size)
err, scale = float(np.abs(a - b).max()), float(np.abs(b).max())
print(f"max abs err {err:.3g}, oracle absmax {scale:.3g}, oracle std {b.std():.3g}")
assert err <= 2e-4 * (1 + scale), "logits differ from the oracle"
assert b.std() > 0.1, "degenerate (flat) logits"
EOF
}

variant() { # name, synth options...
    local name=$1
    shift
    local dir="$T/$name"
    check "synth_${name}_writes" "$K3" synth --out "$dir" "$@"
    check "synth_${name}_logits_run" "$K3" logits --model "$dir" --tokens "$TOKENS" --out "$dir.k3"
    local want=$((12 * $(sed -n 's/^ *"vocab_size": \([0-9]*\).*/\1/p' "$dir/config.json" | head -1) * 4))
    check "synth_${name}_logits_size" test "$(stat -c %s "$dir.k3" 2>/dev/null)" = "$want"
    if [ "$have_numpy" = 1 ]; then
        check "synth_${name}_oracle_run" oracle_logits "$dir" "$TOKENS" "$dir.ref"
        check "synth_${name}_matches_oracle" compare "$dir.k3" "$dir.ref"
    else
        echo "SKIP synth_${name}_matches_oracle (python3-numpy or $ORACLE missing)"
    fi
}

variant tiny_bf16 --preset tiny --seed 7
variant tiny_f32_mxfp4_sharded --preset tiny --seed 8 --dtype f32 --experts mxfp4 --shard-mb 1
echo '{"text_config": {"vocab_size": 1000, "hidden_size": 96, "num_hidden_layers": 5,
  "linear_attn_config": {"kda_layers": [1, 3, 4], "full_attn_layers": [2, 5], "num_heads": 3},
  "q_lora_rank": null, "num_shared_experts": 2, "attn_res_block_size": 3, "first_k_dense_replace": 2}}' >"$T/odd.json"
variant odd_shapes --config "$T/odd.json" --seed 9
check synth_sharded_has_index test -f "$T/tiny_f32_mxfp4_sharded/model.safetensors.index.json"
check synth_rejects_bad_dtype bash -c "! '$K3' synth --out '$T/x' --dtype f8 2>'$T/err0' && grep -q 'bf16 or f32' '$T/err0'"
variant tiny_vocab1200 --preset tiny --seed 10 --vocab 1200
check synth_vocab_sets_config grep -q '"vocab_size": 1200' "$T/tiny_vocab1200/config.json"
check synth_rejects_unknown_preset bash -c "! '$K3' synth --out '$T/p' --preset huge 2>'$T/errp' && grep -q real-slice '$T/errp'"
check synth_rejects_tiny_vocab bash -c "! '$K3' synth --out '$T/v' --vocab 256 2>'$T/errv' && grep -q 257 '$T/errv'"
echo '{"hidden_act": "gelu"}' >"$T/bad.json"
check synth_rejects_bad_config bash -c "! '$K3' synth --out '$T/y' --config '$T/bad.json' 2>'$T/err' && grep -q hidden_act '$T/err'"
echo '{"hidden_size": ' >"$T/broken.json"
check synth_names_broken_json bash -c "! '$K3' synth --out '$T/z' --config '$T/broken.json' 2>'$T/err2' && grep -q broken.json '$T/err2'"
# negative control: the comparison itself must notice different weights
mismatch() { ! compare "$1" "$2"; }
if [ "$have_numpy" = 1 ]; then
    check synth_compare_detects_mismatch mismatch "$T/tiny_bf16.k3" "$T/odd_shapes.ref"
fi
