#!/usr/bin/env bash
# serve_spec.sh — `k3 serve` with N concurrent streams, speculative decoding
# on against off, on the replay workloads (bench/serve_spec.py: interleaved
# rounds, aggregate tokens/s, the ratio, drafts kept/fed).
#
#   bench/serve_spec.sh MODEL_DIR                     8 streams, 3 rounds, 128 tokens
#   N=8 ROUNDS=5 TOKENS=256 THREADS=2 bench/serve_spec.sh DIR [FILE.jsonl...]
#   SERVE_ARGS="--spec-max 8" bench/serve_spec.sh DIR  extra server options
#   LIMIT=3600                                         the whole run's time limit (s)
#
# Default workloads: bench/replay/*.jsonl. The server runs --test-mode (the
# answers are forced text, as in k3 bench --replay) with --parallel N, and
# is stopped on exit.
set -eu
cd "$(dirname "$0")/.."
MODEL=${1:?usage: bench/serve_spec.sh MODEL_DIR [FILE.jsonl...]}
shift
FILES=("$@")
[ ${#FILES[@]} -gt 0 ] || FILES=(bench/replay/*.jsonl)
K3=${K3:-build/k3}
N=${N:-8}
ROUNDS=${ROUNDS:-3}
TOKENS=${TOKENS:-128}
THREADS=${THREADS:-2}
LIMIT=${LIMIT:-3600}
. bench/serve_start.sh.inc
# shellcheck disable=SC2086 # SERVE_ARGS: extra options, split on spaces
bench_serve_start --model "$MODEL" --test-mode --threads "$THREADS" --parallel "$N" \
    --max-tokens "$TOKENS" ${SERVE_ARGS:-}
echo "model $MODEL, $N streams, $ROUNDS rounds, $TOKENS tokens, $THREADS threads${SERVE_ARGS:+, $SERVE_ARGS}"
timeout "$LIMIT" python3 bench/serve_spec.py "http://127.0.0.1:$PORT" "$N" "$ROUNDS" "$TOKENS" "${FILES[@]}"
