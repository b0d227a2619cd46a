#!/usr/bin/env bash
# serve_bench.sh — `k3 serve` under N concurrent streaming clients over 127.0.0.1.
#
#   bench/serve_bench.sh MODEL_DIR            N = 1 2 4 8 16, 3 interleaved rounds
#   NS="1 8" ROUNDS=5 TOKENS=64 SYS=900 THREADS=2 bench/serve_bench.sh DIR
#   SERVE_ARGS="--max-batch 8" bench/serve_bench.sh DIR   extra server options
#   CLIENT_S=300 LIMIT=600 ...   per-client deadline (default 60 s + 2 s per
#                                token) and per-round limit (default 3600 s)
#
# Starts `k3 serve --test-mode --threads THREADS` on a free port, warms it up
# with one request (which also puts the shared system prompt in the prompt
# cache), then for each round and each N runs bench/serve_bench.mjs: N
# clients at once, each the same SYS-character system prompt plus its own
# user message, TOKENS streamed tokens each (forced ids: the model runs every
# step, forcing only fixes the length). Per N it prints the medians over the
# rounds of: aggregate tok/s (all tokens / the round's wall time, prefill
# included), decode tok/s (tokens after each stream's first / the span from
# the first first-token to the last token), per-stream tok/s (p50 over
# streams), TTFT p50 and p95, and the cache hit rate (hits / lookups; tokens reused / prompt
# tokens), as a Markdown table on stdout; raw JSON lines go to stderr.
# Bounded: every client has a deadline, the whole run a `timeout`, and the
# server is stopped on exit.
set -eu
cd "$(dirname "$0")/.."
MODEL=${1:?usage: bench/serve_bench.sh MODEL_DIR}
K3=${K3:-build/k3}
NS=${NS:-1 2 4 8 16}
ROUNDS=${ROUNDS:-3}
TOKENS=${TOKENS:-32}
SYS=${SYS:-900}
THREADS=${THREADS:-2}
LIMIT=${LIMIT:-3600}
. bench/serve_start.sh.inc
# shellcheck disable=SC2086 # SERVE_ARGS: extra options, split on spaces
bench_serve_start --model "$MODEL" --test-mode --threads "$THREADS" ${SERVE_ARGS:-}
URL=http://127.0.0.1:$PORT
# the server's OpenMP waiting as it runs (it re-executes itself with a bounded spin
# unless OMP_WAIT_POLICY or GOMP_SPINCOUNT was given; docs/serve.md)
WAITS=$(tr '\0' '\n' <"/proc/$PID/environ" | grep -E '^(OMP_WAIT_POLICY|GOMP_SPINCOUNT)=' | tr '\n' ' ' || true)
run() { timeout "$LIMIT" node bench/serve_bench.mjs "$URL" "$@"; }
run 1 4 "$SYS" warmup >/dev/null
for r in $(seq 1 "$ROUNDS"); do
    for n in $NS; do run "$n" "$TOKENS" "$SYS" "$r" | tee -a "$TMP/raw.jsonl" >&2; done
done
python3 - "$TMP/raw.jsonl" "$MODEL" "$THREADS" "$TOKENS" "$SYS" "$ROUNDS" "${WAITS:-libgomp default}" <<'PY'
import json, statistics, sys
raw, model, threads, tokens, sysc, rounds, waits = sys.argv[1:]
rows = [json.loads(l) for l in open(raw)]
ns = sorted({r["n"] for r in rows})
med = lambda v: statistics.median(v) if v else 0
print(f"model {model}, {threads} threads, {tokens} tokens per stream, {sysc}-character shared "
      f"system prompt, medians of {rounds} interleaved rounds, server waits: {waits.strip()}\n")
print("| streams | aggregate tok/s | decode tok/s | per-stream tok/s | TTFT p50 ms | TTFT p95 ms | cache hits | prompt tokens reused | errors |")
print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
base = dbase = None
f = lambda v: f"{v:.1f}" if v >= 10 else f"{v:.2f}"
for n in ns:
    rs = [r for r in rows if r["n"] == n]
    agg = med([r["agg_tps"] for r in rs])
    dagg = med([r.get("decode_agg_tps", 0) for r in rs])
    base = base or agg
    dbase = dbase or dagg
    hits = sum(r["cache_hits"] for r in rs); looks = sum(r["cache_lookups"] for r in rs)
    reused = sum(r["cache_tokens_reused"] for r in rs)
    pre = sum(r["prefill_tokens"] for r in rs)
    frac = reused / (reused + pre) if reused + pre else 0
    errs = sum(len(r["errors"]) for r in rs)
    print(f"| {n} | {f(agg)} ({agg / base:.2f}x) | {f(dagg)} ({dagg / (dbase or 1):.2f}x) | {f(med([r['stream_tps_p50'] for r in rs]))} | "
          f"{med([r['ttft_p50_ms'] for r in rs]):.0f} | {med([r['ttft_p95_ms'] for r in rs]):.0f} | "
          f"{hits}/{looks} | {100 * frac:.0f}% | {errs} |")
PY
