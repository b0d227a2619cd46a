#!/usr/bin/env bash
# realdims.sh — `make test-realdims` (opt-in, not in the default suite): the
# v32k real slice (`k3 synth --preset real-slice-v32k`: K3's real per-layer
# shapes, 3 KDA + 1 MLA layers, 64 MXFP4 experts top-16, 32768-token
# vocabulary, ~9.3 GB) against the float64 oracle on a few tokens, in
# prefill, decode and chunked modes, within 1e-4 of the oracle's largest logit.
#
#   make test-realdims                          synthesizes into a temp dir (~10-20 min)
#   REALDIMS_MODEL=DIR make test-realdims       uses an existing slice instead
#
# Needs ~10 GB of free disk for the slice and ~4 GB of memory for the oracle.
set -u
cd "$(dirname "$0")/.."
K3=${K3:-build/k3}
ORACLE=${K3_ORACLE:-$(cd .. && pwd)/shared/oracle/k3_ref.py}
TOKENS=${REALDIMS_TOKENS:-163,1,30000,17}
T=$(mktemp -d "${TMPDIR:-/tmp}/k3-realdims-XXXXXX")
trap 'rm -rf "$T"' EXIT
fails=0
check() { # name, command...
    local name=$1
    shift
    if "$@" >"$T/$name.log" 2>&1; then
        echo "PASS $name"
        case $name in *_matches_oracle) sed 's/^/  /' "$T/$name.log" | tail -1 ;; esac
    else
        echo "FAIL $name"
        sed 's/^/  /' "$T/$name.log" | tail -15
        fails=$((fails + 1))
    fi
}
compare() { # k3 file, oracle file, tokens
    /usr/bin/python3 - "$1" "$2" "$3" <<'PY'
import sys, numpy as np
n = len(sys.argv[3].split(","))
a = np.fromfile(sys.argv[1], dtype=np.float32).reshape(n, -1)
b = np.fromfile(sys.argv[2], dtype=np.float32).reshape(n, -1)
err, scale = float(np.abs(a - b).max()), float(np.abs(b).max())
print(f"max abs err {err:.3g} = {err / scale:.3g} of oracle absmax {scale:.3g}")
assert err <= 1e-4 * scale, "logits differ from the oracle"
assert (a.argmax(1) == b.argmax(1)).all(), "argmax differs"
assert b.std() > 0.1, "degenerate (flat) logits"
PY
}
if ! /usr/bin/python3 -c 'import numpy' 2>/dev/null || [ ! -f "$ORACLE" ]; then
    echo "FAIL realdims_needs_oracle (python3-numpy and $ORACLE)"
    exit 1
fi
M=${REALDIMS_MODEL:-}
if [ -z "$M" ]; then
    M="$T/slice"
    check realdims_synth "$K3" synth --preset real-slice-v32k --out "$M"
fi
n=$(echo "$TOKENS" | tr ',' '\n' | wc -l)
for mode in prefill decode "chunked:$(((n + 1) / 2))"; do
    check "realdims_logits_${mode%%:*}" "$K3" logits --model "$M" --tokens "$TOKENS" --mode "$mode" --out "$T/k3.${mode%%:*}"
done
check realdims_oracle_run /usr/bin/python3 "$ORACLE" "$M" --tokens "$TOKENS" --out "$T/ref"
for mode in prefill decode chunked; do
    check "realdims_${mode}_matches_oracle" compare "$T/k3.$mode" "$T/ref" "$TOKENS"
done
echo "realdims: $fails failed"
[ "$fails" = 0 ]
