#!/usr/bin/env bash
# run.sh — the standard k3 benchmark table, written to bench/RESULTS.md.
#
# Builds the bench preset (../shared/bench/k3-bench-config.json, ~267M
# parameters) in five formats — bf16, bf16 with MXFP4 routed experts, and
# MLX affine q8, q4 and q2-mixed made by `k3 quantize` from the bf16 one —
# then runs `k3 bench --model M -p 64 -n 32 --threads T` for T = 1, 2 and
# writes a Markdown table with the commit and machine. Then the quantized
# formats once more at I8_THREADS (default 2) with --act-int8 (int8
# activations, lossy, opt-in; rows "FORMAT act-int8", only where the CPU has
# AVX-512 VNNI; I8_THREADS="" skips them).
#
#   bench/run.sh                 BUILD=build, checkpoints in /tmp/k3-bench-models
#   BUILD=dir WORK=dir bench/run.sh
#   RUNS=3 THREADS="2" bench/run.sh   fewer runs / thread counts
#
# OMP_WAIT_POLICY defaults to passive: on a shared machine, spinning OpenMP
# workers steal the core from the thread they wait for and 2-thread numbers
# collapse (measured 1.9 vs 10.7 decode tok/s at load average 8). Set
# OMP_WAIT_POLICY=active on a quiet machine.
set -eu
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
K3=${K3:-$BUILD/k3}
WORK=${WORK:-/tmp/k3-bench-models}
CFG=${CFG:-../shared/bench/k3-bench-config.json}
RUNS=${RUNS:-5}
THREADS=${THREADS:-1 2}
OUT=${OUT:-bench/RESULTS.md}
mkdir -p "$WORK"

make_models() {
    [ -f "$WORK/bf16/config.json" ] || "$K3" synth --out "$WORK/bf16" --preset bench --config "$CFG" >&2
    [ -f "$WORK/mxfp4/config.json" ] ||
        "$K3" synth --out "$WORK/mxfp4" --preset bench --config "$CFG" --experts mxfp4 >&2
    [ -f "$WORK/q8/config.json" ] || "$K3" quantize --model "$WORK/bf16" --out "$WORK/q8" --bits 8 >&2
    [ -f "$WORK/q4/config.json" ] || "$K3" quantize --model "$WORK/bf16" --out "$WORK/q4" --bits 4 >&2
    [ -f "$WORK/q2-mixed/config.json" ] ||
        "$K3" quantize --model "$WORK/bf16" --out "$WORK/q2-mixed" --bits 2 --recipe mixed >&2
}

field() { # json, key -> value
    echo "$1" | grep -o "\"$2\":[^,}]*" | head -1 | cut -d: -f2 | tr -d '"'
}

mib() { awk -v b="$1" 'BEGIN { printf "%.1f", b / 1048576 }'; }
gbs() { awk -v b="$1" 'BEGIN { printf "%.2f", b / 1e9 }'; }

make_models
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')
load0=$(cut -d' ' -f1-3 /proc/loadavg)
rows=""
bench_row() { # format, threads, label, extra k3 bench flags... -> appends a table row
    local m=$1 t=$2 label=$3
    shift 3
    local j
    j=$("$K3" bench --model "$WORK/$m" -p 64 -n 32 --threads "$t" --runs "$RUNS" --json "$@")
    echo "$label threads=$t: $j" >&2
    isa=$(field "$j" kernels)
    if [ $# -gt 0 ] && [ "$(field "$j" activations)" != int8 ]; then
        echo "$label: no int8 kernels on this CPU, row skipped" >&2
        return
    fi
    rows+="| $label | $t | $(field "$j" prefill_tps) | $(field "$j" decode_tps) | "
    rows+="$(mib "$(field "$j" active_bytes_per_token)") | $(gbs "$(field "$j" bandwidth_bytes_per_s)") | "
    rows+="$(awk -v b="$(field "$j" bandwidth_bytes_per_s)" -v a="$(field "$j" active_bytes_per_token)" \
        'BEGIN { printf "%.1f", b / a }') | $(field "$j" roofline) | "
    rows+="$(mib "$(field "$j" peak_rss_bytes)") | $(field "$j" load_s) |"$'\n'
}
for m in bf16 mxfp4 q8 q4 q2-mixed; do
    for t in $THREADS; do bench_row "$m" "$t" "$m"; done
done
for m in mxfp4 q8 q4 q2-mixed; do
    for t in ${I8_THREADS-2}; do bench_row "$m" "$t" "$m act-int8" --act-int8; done
done
{
    echo "# k3 benchmark results"
    echo
    echo "Commit \`$commit\`, $(date -u '+%Y-%m-%d %H:%M UTC'), $cpu, $(nproc) cores, kernels $isa (avx512 = AVX2 everywhere plus the AVX-512 MXFP4 matvec)."
    echo "Model: bench preset (\`$CFG\`), prompt 64 tokens, 32 decoded tokens, median of $RUNS runs"
    echo "after a warm-up. Roofline = measured read bandwidth / weight bytes per decoded token."
    echo "OMP_WAIT_POLICY=$OMP_WAIT_POLICY; load average before: $load0, after: $(cut -d' ' -f1-3 /proc/loadavg)"
    echo "(other jobs were sharing the machine when the load average is well above the thread count)."
    echo "Rows \"act-int8\": \`--act-int8\` (int8 activations with VNNI integer dots in quantized decode;"
    echo "lossy, opt-in; prefill is unchanged). See docs/performance.md, \"int8 activations (opt-in)\"."
    echo
    echo "| format | threads | prefill tok/s | decode tok/s | MiB/token | GB/s | roofline tok/s | ratio | peak RSS MiB | load s |"
    echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    printf '%s' "$rows"
    if [ -n "${NOTES:-}" ]; then
        echo
        cat "$NOTES"
    fi
} >"$OUT"
cat "$OUT"
