#!/usr/bin/env bash
# longctx.sh — k3 beside llama.cpp at long context on the same weights: decode
# (and a short prompt) after a D-token context, `k3 bench --depth D` against
# `llama-bench -d D`, and the prefill average over a P-token prompt, for each
# depth and thread count, in interleaved rounds (k3, llama, k3, llama, ...).
#
#   bench/longctx.sh                 # the default set (see the times below)
#   DEPTHS="512 4096" THREADS=2 bench/longctx.sh
#   DRY=1 bench/longctx.sh           # print the commands only
#
# Environment (defaults in brackets):
#   K3 [build/k3]  LLAMA_BENCH [~/k3-peers/llama.cpp/build/bin/llama-bench]
#   MODEL [/work/models/longctx]  GGUF [/work/models/gguf/longctx-bf16.gguf]
#   DEPTHS [512 4096 16384 65536]  THREADS [1 2]
#   DEEP [65536]: depths >= DEEP run with DEEP_THREADS [2] and DEEP_ROUNDS [1] only
#   ROUNDS [1]: interleaved rounds; each process fills its context once and
#     times RUNS [3] runs from it (k3 --runs, llama-bench -r), so every round
#     pays one fill per engine and depth
#   N [16]: decoded tokens per run  PD [32]: prompt tokens timed at depth
#   PREFILL [512 16384]: prompts whose average prefill tok/s is measured, with
#     PREFILL_THREADS [2] (k3: the timed -p runs for P <= 4096, else its
#     --depth P fill, which is that prefill; llama: llama-bench -p P -n 0,
#     one run without warm-up above 4096). PREFILL="" skips them.
#   OUT [a fresh /tmp dir]: every raw JSON line, for the record
#
# Fills dominate the time: one fill per engine, depth, thread count and round.
# On the 2-core Zen 5 box the 16k fill took about 5 min per engine at 2
# threads (about twice that at 1), and a 64k fill takes roughly four times a
# 16k one, so the full default set is well over 25 minutes there; without
# 65536 (DEPTHS="512 4096 16384") one round takes about 25. A long fill can be
# watched: k3 prints its progress on stderr (kept in OUT/k3-*.err).
#
# Printed: one line per process as it ends, then per (figure, depth, threads)
# the min / median / max over every timed run of every round, and the ratios:
# decode at each depth over decode at the smallest depth, k3 over llama.cpp at
# each depth, and the prefill average of the longest prompt over the shortest.
set -u
K3=${K3:-build/k3}
LB=${LLAMA_BENCH:-$HOME/k3-peers/llama.cpp/build/bin/llama-bench}
MODEL=${MODEL:-/work/models/longctx}
GGUF=${GGUF:-/work/models/gguf/longctx-bf16.gguf}
DEPTHS=${DEPTHS-512 4096 16384 65536}
THREADS=${THREADS:-1 2}
DEEP=${DEEP:-65536} DEEP_THREADS=${DEEP_THREADS:-2} DEEP_ROUNDS=${DEEP_ROUNDS:-1}
ROUNDS=${ROUNDS:-1} RUNS=${RUNS:-3} N=${N:-16} PD=${PD:-32}
PREFILL=${PREFILL-512 16384} PREFILL_THREADS=${PREFILL_THREADS:-2}
OUT=${OUT:-$(mktemp -d /tmp/longctx.XXXXXX)}
mkdir -p "$OUT"
REC=$OUT/records.tsv # engine figure depth threads min median max
: >"$REC"

run() { # print or run a command, its stdout to $1 and stderr to $2
    local out=$1 err=$2
    shift 2
    if [ -n "${DRY:-}" ]; then
        echo "  $*"
        return 1
    fi
    "$@" >"$out" 2>"$err"
}

# k3 bench --json: the prefill and decode min/median/max of the timed runs, and
# with --depth the fill's seconds (the prefill of a D-token prompt).
k3_records() { # jsonfile errfile depth threads
    python3 - "$@" >>"$REC" <<'EOF'
import json, re, sys
js, err, d, t = sys.argv[1:]
try:
    j = json.loads([l for l in open(js) if l.startswith("{")][-1])
except Exception:
    sys.exit(0)
print("k3\tdecode\t%s\t%s\t%.3f\t%.3f\t%.3f" % (d, t, j["decode_tps_min"], j["decode_tps"], j["decode_tps_max"]))
print("k3\tprompt_at_depth\t%s\t%s\t%.3f\t%.3f\t%.3f" % (d, t, j["prefill_tps_min"], j["prefill_tps"], j["prefill_tps_max"]))
fill = re.findall(r"context (\d+)/(\d+) tokens \(([0-9.]+) s\)", open(err).read())
if fill and fill[-1][0] == fill[-1][1]:
    s = float(fill[-1][2])
    print("k3\tfill_prefill\t%s\t%s\t%.3f\t%.3f\t%.3f" % (d, t, int(d) / s, int(d) / s, int(d) / s))
EOF
}

# llama-bench -o jsonl: one line per test (prompt: n_gen 0, generation: n_prompt 0).
llama_records() { # jsonfile depth threads promptfigure
    python3 - "$@" >>"$REC" <<'EOF'
import json, statistics, sys
js, d, t, pfig = sys.argv[1:]
for line in open(js):
    try:
        j = json.loads(line)
    except Exception:
        continue
    s = j.get("samples_ts") or [j["avg_ts"]]
    fig = "decode" if j["n_gen"] > 0 else pfig
    print("llama\t%s\t%s\t%s\t%.3f\t%.3f\t%.3f" % (fig, d, t, min(s), statistics.median(s), max(s)))
EOF
}

k3_depth() { # depth threads round
    local f=$OUT/k3-d$1-t$2-r$3
    run "$f.json" "$f.err" "$K3" bench --model "$MODEL" -p "$PD" -n "$N" --runs "$RUNS" \
        --threads "$2" --depth "$1" --json || return
    k3_records "$f.json" "$f.err" "$1" "$2"
    echo "k3    depth $1 threads $2 round $3: decode $(grep "^k3	decode	$1	$2	" "$REC" | tail -1 | cut -f6) tok/s"
}

llama_depth() { # depth threads round
    local f=$OUT/llama-d$1-t$2-r$3
    run "$f.json" "$f.err" "$LB" -m "$GGUF" -p "$PD" -n "$N" -d "$1" -t "$2" -r "$RUNS" \
        -o jsonl || return
    llama_records "$f.json" "$1" "$2" prompt_at_depth
    echo "llama depth $1 threads $2 round $3: decode $(grep "^llama	decode	$1	$2	" "$REC" | tail -1 | cut -f6) tok/s"
}

k3_prefill() { # P threads: P <= 4096 timed runs; longer ones come from the P-depth fill
    local f=$OUT/k3-p$1-t$2
    if [ "$1" -le 4096 ]; then
        run "$f.json" "$f.err" "$K3" bench --model "$MODEL" -p "$1" -n 1 --runs "$RUNS" \
            --threads "$2" --json || return
        python3 - "$f.json" "$1" "$2" >>"$REC" <<'EOF'
import json, sys
js, p, t = sys.argv[1:]
j = json.loads([l for l in open(js) if l.startswith("{")][-1])
print("k3\tprefill\t%s\t%s\t%.3f\t%.3f\t%.3f" % (p, t, j["prefill_tps_min"], j["prefill_tps"], j["prefill_tps_max"]))
EOF
    elif grep -q "^k3	fill_prefill	$1	$2	" "$REC"; then
        grep "^k3	fill_prefill	$1	$2	" "$REC" | sed 's/fill_prefill/prefill/' >>"$REC"
    else
        run "$f.json" "$f.err" "$K3" bench --model "$MODEL" -p 1 -n 1 --runs 1 --threads "$2" \
            --depth "$1" --json || return
        k3_records "$f.json" "$f.err" "$1" "$2"
        grep "^k3	fill_prefill	$1	$2	" "$REC" | tail -1 | sed 's/fill_prefill/prefill/' >>"$REC"
    fi
    echo "k3    prefill $1 threads $2: $(grep "^k3	prefill	$1	$2	" "$REC" | tail -1 | cut -f6) tok/s"
}

llama_prefill() { # P threads
    local f=$OUT/llama-p$1-t$2 r=$RUNS warm=()
    [ "$1" -gt 4096 ] && r=1 warm=(--no-warmup)
    run "$f.json" "$f.err" "$LB" -m "$GGUF" -p "$1" -n 0 -t "$2" -r "$r" "${warm[@]}" \
        -o jsonl || return
    llama_records "$f.json" "$1" "$2" prefill
    echo "llama prefill $1 threads $2: $(tail -1 "$REC" | cut -f6) tok/s"
}

echo "k3 $K3 on $MODEL; llama.cpp $LB on $GGUF; raw output in $OUT"
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg) $(date -u +%T)"
for D in $DEPTHS; do
    th=$THREADS rounds=$ROUNDS
    [ "$D" -ge "$DEEP" ] && th=$DEEP_THREADS rounds=$DEEP_ROUNDS
    for t in $th; do
        for r in $(seq "$rounds"); do
            k3_depth "$D" "$t" "$r"
            llama_depth "$D" "$t" "$r"
        done
    done
done
for P in $PREFILL; do
    for t in $PREFILL_THREADS; do
        k3_prefill "$P" "$t"
        llama_prefill "$P" "$t"
    done
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg) $(date -u +%T)"
[ -n "${DRY:-}" ] && exit 0

python3 - "$REC" <<'EOF'
import collections, statistics, sys
rows = collections.defaultdict(list)  # (engine, figure, depth, threads) -> [(min, med, max)]
for line in open(sys.argv[1]):
    e, f, d, t, lo, med, hi = line.split("\t")
    rows[(e, f, int(d), int(t))].append((float(lo), float(med), float(hi)))
def fig(e, f, d, t):  # min over runs, median of the rounds' medians, max over runs
    v = rows.get((e, f, d, t))
    return (min(x[0] for x in v), statistics.median(x[1] for x in v), max(x[2] for x in v)) if v else None
print("\n%-6s %-16s %7s %3s %10s %10s %10s" % ("engine", "figure", "depth", "thr", "min", "median", "max"))
for k in sorted(rows, key=lambda k: (k[1], k[3], k[2], k[0])):
    lo, med, hi = fig(*k)
    print("%-6s %-16s %7d %3d %10.2f %10.2f %10.2f" % (k + (lo, med, hi)))
print("\nratios of medians")
for t in sorted({k[3] for k in rows}):
    for e in ("k3", "llama"):
        ds = sorted(k[2] for k in rows if k[:2] == (e, "decode") and k[3] == t)
        for d in ds[1:]:
            print("  %-5s decode %6d/%-6d threads %d: %.3f" % (e, d, ds[0], t, fig(e, "decode", d, t)[1] / fig(e, "decode", ds[0], t)[1]))
        ps = sorted(k[2] for k in rows if k[:2] == (e, "prefill") and k[3] == t)
        if len(ps) > 1:
            print("  %-5s prefill average %d/%d threads %d: %.3f" % (e, ps[-1], ps[0], t, fig(e, "prefill", ps[-1], t)[1] / fig(e, "prefill", ps[0], t)[1]))
    for f in ("decode", "prompt_at_depth", "prefill"):
        for d in sorted(k[2] for k in rows if k[:2] == ("k3", f) and k[3] == t):
            a, b = fig("k3", f, d, t), fig("llama", f, d, t)
            if a and b:
                print("  k3/llama %-15s %6d threads %d: %.3f" % (f, d, t, a[1] / b[1]))
EOF
