# fuzz.bash — what the fuzz test scripts (tests/sh/*fuzz*.sh) share: building a
# libFuzzer target from the sources it exercises, and running it briefly.
#
#   . tests/sh/lib/fuzz.bash        (after cd to the repo root)
#   fuzz_need_clang NAME            exits the script (no check) when clang is missing
#   FUZZ_PKGS="jansson libpcre2-8"  pkg-config packages to compile and link with
#   fuzz_build NAME SOURCES...      fuzz/NAME.c + SOURCES + src/base/*.c -> $B/fuzz/NAME;
#                                   prints PASS/FAIL NAME_build. Sources are compiled
#                                   once into $B/fuzz/obj/ (the Makefile's rule), shared
#                                   by every target
#   fuzz_run NAME DIR... [-- ARGS]  runs it on the seed dirs (default 5 s); PASS/FAIL NAME_run
#                                   with the runs and libFuzzer's final coverage (cov:)
#   FUZZ_SECONDS=N                  every fuzz_run runs N seconds instead (make fuzz-long)
#   FUZZ_SMOKE_SECONDS=N            otherwise a run's time is capped at N (default 2): the seeds
#                                   (which reach the deep code) all run first whatever the cap
#
# Targets are linked from just the sources they exercise (not the whole
# library), so a library file clang cannot compile does not block an unrelated
# target.
B=${K3_BUILD:-build}
FUZZ_PKGS=${FUZZ_PKGS:-jansson}
mkdir -p "$B/fuzz"

fuzz_need_clang() {
    if ! command -v clang >/dev/null; then
        echo "$1: clang not installed, skipped"
        exit 0
    fi
}

fuzz_build() { # name, sources...
    local n=$1 a objs=() make_objs=()
    shift
    # each source is compiled once into $B/fuzz/obj/ by the Makefile (make
    # keeps it until the source or a header it includes changes), then linked
    for a in "fuzz/$n.c" "$@" src/base/*.c; do
        case "$a" in
        *.c)
            objs+=("$B/fuzz/obj/${a%.c}.o")
            make_objs+=("$B/fuzz/obj/${a%.c}.o")
            ;;
        *) objs+=("$a") ;;
        esac
    done
    # shellcheck disable=SC2046
    if make -s -j2 BUILD="$B" "${make_objs[@]}" >"$B/fuzz/$n.build.log" 2>&1 &&
        clang -fsanitize=fuzzer,address,undefined "${objs[@]}" $(pkg-config --libs $FUZZ_PKGS) -lm -lpthread \
            -o "$B/fuzz/$n" >>"$B/fuzz/$n.build.log" 2>&1; then
        echo "PASS ${n}_build"
        return 0
    fi
    tail -20 "$B/fuzz/$n.build.log"
    echo "FAIL ${n}_build"
    return 1
}

fuzz_run() { # name, seed dirs... [-- libFuzzer args]
    local n=$1 dirs=() args=()
    shift
    while [ $# -gt 0 ] && [ "$1" != -- ]; do
        dirs+=("$1")
        shift
    done
    [ "${1:-}" = -- ] && shift
    args=("$@")
    [ ${#args[@]} -eq 0 ] && args=(-max_total_time=5)
    if [ -n "${FUZZ_SECONDS:-}" ]; then # a long run: the time replaces -runs / -max_total_time
        local a keep=()
        for a in "${args[@]}"; do
            case "$a" in -runs=* | -max_total_time=*) ;; *) keep+=("$a") ;; esac
        done
        args=("${keep[@]}" "-max_total_time=$FUZZ_SECONDS")
    fi
    if [ -z "${FUZZ_SECONDS:-}" ]; then # the default suite: every seed, then a short smoke run
        local a cap=${FUZZ_SMOKE_SECONDS:-2} short=()
        for a in "${args[@]}"; do
            case "$a" in -max_total_time=*) [ "${a#*=}" -gt "$cap" ] && a="-max_total_time=$cap" ;; esac
            short+=("$a")
        done
        args=("${short[@]}")
    fi
    local log="$B/fuzz/$n.run.log"
    if "$B/fuzz/$n" "${args[@]}" -print_final_stats=1 -rss_limit_mb=1024 -timeout=10 "${dirs[@]}" \
        >"$log" 2>&1; then
        echo "PASS ${n}_run ($(grep -o 'stat::number_of_executed_units: [0-9]*' "$log" | cut -d' ' -f2) runs," \
            "cov $(grep -o 'INITED cov: [0-9]*' "$log" | grep -o '[0-9]*') on the seeds," \
            "$(grep -o ' cov: [0-9]*' "$log" | tail -1 | grep -o '[0-9]*') at the end)"
    else
        echo "FAIL ${n}_run"
        grep -E 'ERROR|SUMMARY|#[0-9] ' "$log" | head -12 | sed 's/^/  /'
        tail -5 "$log" | sed 's/^/  /'
    fi
}
