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
#   K3_TEST_JOBS=N tests/run_all.sh   N tests at a time (default: the number of cores)
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
# python3 once, not through a version manager's shim per start: pyenv's shim
# runs several bash programs before the interpreter (0.5 s of CPU against
# 0.04 s), and the tests start python3 hundreds of times. The interpreter is
# the one the shim picks (its sys.executable), on PATH under the same name.
K3_TEST_BIN=$(mktemp -d /tmp/k3-test-bin-XXXXXX)
py=$(python3 -c 'import sys; print(sys.executable)' 2>/dev/null)
[ -n "$py" ] && [ -x "$py" ] && ln -s "$py" "$K3_TEST_BIN/python3" && export PATH="$K3_TEST_BIN:$PATH"
pass=0
fail=0
failed_names=()
LOG_DIR=$BUILD/test-logs
mkdir -p "$LOG_DIR"
trap 'rm -rf "$K3_TEST_BIN"' EXIT
# What the sanitizer phase may take from the normal phase of the same run
# (tests/sh/lib/check.bash: the float64 oracle's logits); removed at the end.
if [ -z "${K3_TEST_CACHE:-}" ]; then
    K3_TEST_CACHE=$(mktemp -d /tmp/k3-test-cache-XXXXXX)
    trap 'rm -rf "$K3_TEST_CACHE" "$K3_TEST_BIN"' EXIT
fi
export K3_TEST_CACHE

# Tests run K3_TEST_JOBS at a time (default: the number of cores): most of
# them leave a core idle much of the time (a client waiting on a server, one
# single-threaded sanitized program, a Python or node start-up). Each test has
# its own log, temporary folders (mktemp) and ports (a server binds port 0), and
# what tests share is written atomically (the serve model under a lock, the
# K3_TEST_CACHE entries by rename). A script whose first lines hold the marker
# "k3-test: alone" runs with no other test beside it (the MPI runs: their
# ranks fill the cores). Results are printed in the order
# of the sequential runner; K3_TEST_JOBS=1 runs one test at a time.
JOBS=${K3_TEST_JOBS:-$(nproc)}
[ "$JOBS" -ge 1 ] 2>/dev/null || JOBS=1

tenths() { # 1m2.345s -> 623
    local m=${1%%m*} r=${1#*m}
    r=${r%s}
    local whole=${r%.*} frac=${r#*.}
    echo $((10#$m * 600 + 10#$whole * 10 + 10#${frac:0:1}))
}

# One test in a background subshell: its output into its log, then "exit-code
# wall-seconds cpu-tenths" into its status file (written last, by rename, so
# the file's presence means the test is over). The CPU figure is user + sys of
# everything the test ran (`times` in the subshell sees its own children).
start_one() { # phase, name, command...
    local phase=$1 name=$2
    shift 2
    (
        t0=$SECONDS
        "$@" >"$LOG_DIR/${phase}-${name}.log" 2>&1
        rc=$?
        times >"$LOG_DIR/.times-$phase-$name"
        { read -r _ _; read -r u s; } <"$LOG_DIR/.times-$phase-$name"
        rm -f "$LOG_DIR/.times-$phase-$name"
        echo "$rc $((SECONDS - t0)) $(($(tenths "$u") + $(tenths "$s")))" >"$LOG_DIR/.st-$phase-$name.tmp"
        mv "$LOG_DIR/.st-$phase-$name.tmp" "$LOG_DIR/.st-$phase-$name"
    ) &
}

report_one() { # phase, name: counts the log's PASS / FAIL lines and prints the test's line
    local phase=$1 name=$2
    local log="$LOG_DIR/${phase}-${name}.log" st="$LOG_DIR/.st-$phase-$name"
    local rc secs cpu p f
    read -r rc secs cpu <"$st"
    rm -f "$st"
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
        "$secs" $((cpu / 10)) $((cpu % 10))
    if [ "$f" -ne 0 ]; then
        failed_names+=("$phase/$name")
        grep -E '^(FAIL|  )' "$log" | head -40 | sed 's/^/    /'
        tail -5 "$log" | sed 's/^/    | /'
    fi
}

# The phase's tests: names[i], cmds[i] (a command line for eval, quoted with
# printf %q) and alone[i].
names=()
cmds=()
alone=()
add_test() { # alone(0|1), name, command...
    alone+=("$1")
    names+=("$2")
    shift 2
    cmds+=("$(printf '%q ' "$@")")
}

run_phase() { # phase, build dir
    local phase=$1 bdir=$2
    export K3="$bdir/k3" K3_BUILD="$bdir"
    names=() cmds=() alone=()
    rm -f "$LOG_DIR/.st-$phase-"* # of a run that was stopped
    for t in "$bdir"/tests/test_*; do
        [ -x "$t" ] || continue
        case "$t" in *.d | *.o) continue ;; esac
        local n
        n=$(basename "$t")
        [ -n "$PATTERN" ] && [[ "$n" != *"$PATTERN"* ]] && continue
        add_test 0 "$n" "$t"
    done
    for s in tests/sh/*.sh; do
        [ -f "$s" ] || continue
        local n a=0
        n=$(basename "$s" .sh)
        [ -n "$PATTERN" ] && [[ "$n" != *"$PATTERN"* ]] && continue
        # fuzz scripts build their targets with ASan+UBSan in every phase:
        # running them again in the sanitizer phase would repeat the same run
        [ "$phase" = asan ] && grep -q 'lib/fuzz.bash' "$s" && continue
        # scripts marked "k3-test: source-only" read the sources, not a build:
        # the sanitizer phase would repeat the same scan of the same files
        [ "$phase" = asan ] && head -20 "$s" | grep -q 'k3-test: source-only' && continue
        head -20 "$s" | grep -q 'k3-test: alone' && a=1
        add_test "$a" "$n" bash "$s"
    done
    local n_all=${#names[@]} next=0 shown=0 running=0 i t0=$SECONDS
    while [ "$shown" -lt "$n_all" ]; do
        running=0
        for ((i = shown; i < next; i++)); do
            [ -f "$LOG_DIR/.st-$phase-${names[i]}" ] || running=$((running + 1))
        done
        # start what may start: up to JOBS at once, an "alone" test only into
        # an empty pool, and nothing beside it
        while [ "$next" -lt "$n_all" ] && [ "$running" -lt "$JOBS" ]; do
            if [ "${alone[next]}" = 1 ] && [ "$running" -gt 0 ]; then break; fi
            [ "$next" -gt 0 ] && [ "${alone[next - 1]}" = 1 ] && [ "$running" -gt 0 ] && break
            eval "start_one $phase ${names[next]} ${cmds[next]}"
            next=$((next + 1))
            running=$((running + 1))
        done
        # print, in order, every test that is over
        while [ "$shown" -lt "$next" ] && [ -f "$LOG_DIR/.st-$phase-${names[shown]}" ]; do
            report_one "$phase" "${names[shown]}"
            shown=$((shown + 1))
        done
        [ "$shown" -lt "$n_all" ] && wait -n
    done
    wait
    echo "[$phase] $n_all tests in $((SECONDS - t0))s ($JOBS at a time)"
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
