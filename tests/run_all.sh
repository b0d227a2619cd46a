#!/usr/bin/env bash
# run_all.sh — runs the whole k3 test suite and prints "N passed, N failed".
#
# Phase 1 runs every test program (build/tests/test_*) and every shell test
# (tests/sh/*.sh) against the normal build. Phase 2 rebuilds with
# AddressSanitizer + UndefinedBehaviorSanitizer ($BUILD-asan/) and runs them
# again (the fuzz scripts, whose targets are always built with the
# sanitizers, run once). Each test prints "PASS name" / "FAIL name" lines; a
# program that exits non-zero without reporting a failure counts as one
# failure. Each test's line ends with its wall and CPU seconds (user + sys of
# all it ran: on a loaded machine the CPU figure is the one to compare).
#
#   K3_NO_ASAN=1 tests/run_all.sh     skip the sanitizer phase (quick local runs)
#   K3_ASAN_ONLY=1 tests/run_all.sh   only the sanitizer phase
#   tests/run_all.sh PATTERN          only tests whose file name contains PATTERN
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
export K3_FIXTURES=${K3_FIXTURES:-$(cd .. && pwd)/shared/fixtures}
PATTERN=${1:-}
# OpenMP threads with nothing to do spin a bounded while and then sleep, as in
# `k3 serve` (docs/serve.md), instead of libgomp's default 300000 PAUSEs: a
# server and its clients, mpirun's ranks and the programs a test starts share
# two cores, and long spinning burns the core the other needs (on a loaded
# machine it multiplied the suite's CPU time: test_model_spec 47 s -> 2 s).
# Results do not depend on it (threaded results equal single-threaded ones).
if [ -z "${OMP_WAIT_POLICY:-}" ] && [ -z "${GOMP_SPINCOUNT:-}" ]; then
    export GOMP_SPINCOUNT=1000
fi
pass=0
fail=0
failed_names=()
LOG_DIR=$BUILD/test-logs
mkdir -p "$LOG_DIR"
# What the sanitizer phase may take from the normal phase of the same run
# (tests/sh/lib/check.bash: the float64 oracle's logits); removed at the end.
if [ -z "${K3_TEST_CACHE:-}" ]; then
    K3_TEST_CACHE=$(mktemp -d /tmp/k3-test-cache-XXXXXX)
    trap 'rm -rf "$K3_TEST_CACHE"' EXIT
fi
export K3_TEST_CACHE

# CPU time (user + sys) of the waited-for children so far, in tenths of a
# second, into $cpu_now: the per-test figure stays meaningful on a loaded
# machine, where wall time is not. `times` runs in this shell (a subshell would
# see no children).
cpu_now=0
child_cpu() {
    times >"$LOG_DIR/.times"
    local u s
    { read -r _ _; read -r u s; } <"$LOG_DIR/.times"
    cpu_now=$(($(tenths "$u") + $(tenths "$s")))
}
tenths() { # 1m2.345s -> 623
    local m=${1%%m*} r=${1#*m}
    r=${r%s}
    local whole=${r%.*} frac=${r#*.}
    echo $((10#$m * 600 + 10#$whole * 10 + 10#${frac:0:1}))
}

run_one() { # phase, name, command...
    local phase=$1 name=$2
    shift 2
    local log="$LOG_DIR/${phase}-${name}.log"
    local t0=$SECONDS c0
    child_cpu
    c0=$cpu_now
    "$@" >"$log" 2>&1
    local rc=$?
    child_cpu
    local cpu=$((cpu_now - c0))
    local p f
    p=$(grep -c '^PASS ' "$log")
    f=$(grep -c '^FAIL ' "$log")
    if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
        f=1
        echo "FAIL $name (exit $rc without a FAIL line)" >>"$log"
    fi
    if [ "$p" -eq 0 ] && [ "$f" -eq 0 ]; then
        f=1
        echo "FAIL $name (ran no test)" >>"$log"
    fi
    pass=$((pass + p))
    fail=$((fail + f))
    printf '[%s] %-32s %3d passed %3d failed  (%ds, cpu %d.%ds)\n' "$phase" "$name" "$p" "$f" \
        $((SECONDS - t0)) $((cpu / 10)) $((cpu % 10))
    if [ "$f" -ne 0 ]; then
        failed_names+=("$phase/$name")
        grep -E '^(FAIL|  )' "$log" | head -40 | sed 's/^/    /'
        tail -5 "$log" | sed 's/^/    | /'
    fi
}

run_phase() { # phase, build dir
    local phase=$1 bdir=$2
    export K3="$bdir/k3" K3_BUILD="$bdir"
    for t in "$bdir"/tests/test_*; do
        [ -x "$t" ] || continue
        case "$t" in *.d | *.o) continue ;; esac
        local n
        n=$(basename "$t")
        [ -n "$PATTERN" ] && [[ "$n" != *"$PATTERN"* ]] && continue
        run_one "$phase" "$n" "$t"
    done
    for s in tests/sh/*.sh; do
        [ -f "$s" ] || continue
        local n
        n=$(basename "$s" .sh)
        [ -n "$PATTERN" ] && [[ "$n" != *"$PATTERN"* ]] && continue
        # fuzz scripts build their targets with ASan+UBSan in every phase:
        # running them again in the sanitizer phase would repeat the same run
        [ "$phase" = asan ] && grep -q 'lib/fuzz.bash' "$s" && continue
        run_one "$phase" "$n" bash "$s"
    done
}

[ "${K3_ASAN_ONLY:-0}" = 1 ] || run_phase normal "$BUILD"

if [ "${K3_NO_ASAN:-0}" != 1 ]; then
    ASAN_BUILD="${BUILD}-asan"
    echo "building the AddressSanitizer + UBSan build ($ASAN_BUILD/)..."
    if make -s -j"$(nproc)" SAN=1 BUILD="$ASAN_BUILD" all >"$LOG_DIR/asan-build.log" 2>&1; then
        export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0:halt_on_error=1}
        export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
        export K3_SAN=1
        run_phase asan "$ASAN_BUILD"
    else
        tail -20 "$LOG_DIR/asan-build.log"
        fail=$((fail + 1))
        failed_names+=("asan/build")
    fi
fi

if [ ${#failed_names[@]} -gt 0 ]; then
    echo "failed: ${failed_names[*]}"
fi
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
