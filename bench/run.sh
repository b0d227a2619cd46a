#!/usr/bin/env bash
# run.sh — the standard k3 benchmark table of the bench preset, printed and
# written to $OUT (default $WORK/table.md); paste it under "New results" in
# bench/RESULTS.md, which holds only the current tables.
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
#   ROUNDS=1 bench/run.sh          one pass over the list (default 3, interleaved;
#                                  cells are medians over the rounds, with min-max)
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
ROUNDS=${ROUNDS:-3}
THREADS=${THREADS:-1 2}
OUT=${OUT:-$WORK/table.md}
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
JS=$(mktemp)
trap 'rm -f "$JS"' EXIT
# One k3 bench run -> a line "label|threads|json" in $JS.
bench_once() { # format, threads, label, extra k3 bench flags...
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
    echo "$label|$t|$j" >>"$JS"
}
# ROUNDS passes over the whole list, interleaved, so a slow minute of a
# shared machine spreads over every row instead of landing on one.
labels=()
for r in $(seq "$ROUNDS"); do
    for m in bf16 mxfp4 q8 q4 q2-mixed; do
        for t in $THREADS; do bench_once "$m" "$t" "$m"; done
    done
    for m in mxfp4 q8 q4 q2-mixed; do
        for t in ${I8_THREADS-2}; do bench_once "$m" "$t" "$m act-int8" --act-int8; done
    done
done
# med KEY FIELD -> median over the rounds; range KEY FIELD -> "min-max".
vals() { awk -F'|' -v k="$1" '$1 "|" $2 == k { print $3 }' "$JS" | while read -r j; do field "$j" "$2"; done | sort -g; }
med() { # key, field [, printf format]
    vals "$1" "$2" | awk -v f="${3:-%.2f}" '{ v[NR] = $1 }
        END { if (NR) printf f, (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2) }'
}
range() { vals "$1" "$2" | awk 'NR == 1 { lo = $1 } { hi = $1 } END { if (NR > 1) printf " (%s-%s)", lo, hi }'; }
rows=""
for key in $(cut -d'|' -f1,2 "$JS" | awk '!seen[$0]++' | tr ' ' '~'); do
    k=${key//\~/ }
    label=${k%|*}
    t=${k##*|}
    rows+="| $label | $t | $(med "$k" prefill_tps)$(range "$k" prefill_tps) | "
    rows+="$(med "$k" decode_tps)$(range "$k" decode_tps) | "
    rows+="$(mib "$(med "$k" active_bytes_per_token %.0f)") | $(gbs "$(med "$k" bandwidth_bytes_per_s %.0f)") | "
    rows+="$(awk -v b="$(med "$k" bandwidth_bytes_per_s %.0f)" -v a="$(med "$k" active_bytes_per_token %.0f)" \
        'BEGIN { printf "%.1f", b / a }') | $(med "$k" roofline %.3f)$(range "$k" roofline) | "
    rows+="$(mib "$(med "$k" peak_rss_bytes %.0f)") | $(med "$k" load_s %.3f) |"$'\n'
done
{
    echo "## The bench preset, bench/run.sh"
    echo
    echo "Commit \`$commit\`, $(date -u '+%Y-%m-%d %H:%M UTC'), $cpu, $(nproc) cores, kernels $isa (avx512 = the AVX-512 prefill tile and MXFP4 / affine matvecs (affine 3/5/6-bit where the CPU has VBMI), AVX2 elsewhere)."
    echo "Model: bench preset (\`$CFG\`), prompt 64 tokens, 32 decoded tokens. Each \`k3 bench\` run reports"
    echo "the median of $RUNS runs after a warm-up; the whole list ran $ROUNDS times, interleaved: each cell is the"
    echo "median over those rounds (min-max in brackets). Roofline = read bandwidth measured in the"
    echo "same run / weight bytes per decoded token; ratio = decode tok/s / roofline tok/s."
    echo "OMP_WAIT_POLICY=$OMP_WAIT_POLICY; load average before: $load0, after: $(cut -d' ' -f1-3 /proc/loadavg)"
    echo "(other jobs were sharing the machine when the load average is well above the thread count)."
    echo "Rows \"act-int8\": \`--act-int8\` (int8 activations with VNNI integer dots in quantized decode;"
    echo "lossy, opt-in; prefill is unchanged). See docs/performance.md, \"int8 activations (opt-in, lossy)\"."
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
