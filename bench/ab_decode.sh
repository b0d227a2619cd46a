#!/usr/bin/env bash
# ab_decode.sh — interleaved old/new rounds of `k3 bench` (decode and prefill) for
# comparing builds on a shared, drifting machine: every round runs each binary
# back to back, for each wait policy and thread count, so compare within rounds.
#
#   flock /work/.measure.lock bench/ab_decode.sh MODEL ROUNDS "THREADS" "POLICIES" P N RUNS BIN...
#   e.g. bench/ab_decode.sh /tmp/bench 3 "1 2" "passive active" 16 32 3 /tmp/k3-old build/k3
#
# One line per run: round policy threads binary decode_tps prefill_tps
# bandwidth_GB/s roofline_tok/s, then the process CPU time (user, system s) from
# /usr/bin/time; the load average before and after. Needs python3 and /usr/bin/time.
set -u
if [ $# -lt 8 ]; then
    sed -n '2,12p' "$0"
    exit 2
fi
M=$1 R=$2 TH=$3 POL=$4 P=$5 N=$6 RUNS=$7
shift 7
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg) $(date -u +%T)"
for r in $(seq "$R"); do for pol in $POL; do for th in $TH; do for bin in "$@"; do
    out=$({ /usr/bin/time -f "cpu %U %S" env OMP_WAIT_POLICY="$pol" "$bin" bench --model "$M" \
        -p "$P" -n "$N" --runs "$RUNS" --threads "$th" --json; } 2>&1)
    js=$(echo "$out" | grep '^{')
    cpu=$(echo "$out" | grep '^cpu')
    vals=$(echo "$js" | python3 -c 'import json,sys
d=json.load(sys.stdin)
print(d["decode_tps"], d["prefill_tps"], round(d["bandwidth_bytes_per_s"]/1e9, 2), d["roofline"])' 2>/dev/null || echo "failed")
    echo "$r $pol $th $bin $vals $cpu"
done; done; done; done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg) $(date -u +%T)"
