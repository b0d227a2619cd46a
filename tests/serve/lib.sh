#!/usr/bin/env bash
# lib.sh — helpers for the tests/sh/serve_*.sh end-to-end tests (sourced).
#
#   serve_model            path of a synthetic checkpoint (made once per build dir)
#   serve_start ARGS...    start `k3 serve --port 0 ARGS` in the background; sets
#                          SERVE_PID, SERVE_PORT, SERVE_URL, SERVE_LOG. The server
#                          is killed when the test exits (trap).
#   serve_stop             SIGTERM the server and wait; returns its exit status
#   check NAME CMD...      prints PASS NAME / FAIL NAME by CMD's status
#
# Servers bind 127.0.0.1 on a port the kernel picks (no collisions between
# parallel tests); the port is read from the server's "listening on" line.
set -u
K3=${K3:-build/k3}
K3_BUILD=${K3_BUILD:-build}
SERVE_TMP=$(mktemp -d)
SERVE_PIDS=()

serve_cleanup() {
    for p in "${SERVE_PIDS[@]}"; do kill -9 "$p" 2>/dev/null; done
    rm -rf "$SERVE_TMP"
}
trap serve_cleanup EXIT

serve_model() {
    local dir="$K3_BUILD/serve-test-model"
    # tests run in parallel (tests/run_all.sh): one writes it, the others wait
    # on the lock, and none removes the model a running server reads
    (
        flock 9
        if [ ! -f "$dir/config.json" ]; then
            "$K3" synth --out "$dir.tmp.$$" --seed 3 >/dev/null 2>&1 || exit 1
            rm -rf "$dir"
            mv "$dir.tmp.$$" "$dir"
        fi
    ) 9>"$K3_BUILD/serve-test-model.lock" || return 1
    echo "$dir"
}

serve_start() {
    local model
    model=$(serve_model) || { echo "serve_start: k3 synth failed"; return 1; }
    SERVE_LOG="$SERVE_TMP/server.$RANDOM.log"
    # OpenMP waiting as the caller's environment says; with nothing set, serve
    # spins a bounded while before sleeping (docs/serve.md)
    "$K3" serve --model "$model" --name tiny --port 0 "$@" \
        >"$SERVE_LOG" 2>&1 &
    SERVE_PID=$!
    SERVE_PIDS+=("$SERVE_PID")
    local i
    for i in $(seq 1 600); do
        SERVE_PORT=$(sed -n 's/.*listening on http:\/\/[^:]*:\([0-9]*\).*/\1/p' "$SERVE_LOG" 2>/dev/null)
        if [ -n "$SERVE_PORT" ]; then
            SERVE_URL="http://127.0.0.1:$SERVE_PORT"
            return 0
        fi
        kill -0 "$SERVE_PID" 2>/dev/null || break
        sleep 0.1
    done
    echo "serve_start: server did not come up:"
    cat "$SERVE_LOG"
    return 1
}

serve_stop() {
    kill -TERM "$SERVE_PID" 2>/dev/null
    wait "$SERVE_PID"
}

check() {
    local name=$1
    shift
    if "$@"; then echo "PASS $name"; else echo "FAIL $name"; fi
}
