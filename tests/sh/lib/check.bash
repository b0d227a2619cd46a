# check.bash — what the oracle scripts share, sourced after they
# set T (their temporary folder): `check NAME COMMAND...` runs the command with
# its output in $T/NAME.log, prints "PASS NAME" on success, else "FAIL NAME"
# and the log's last 15 lines.
check() { # name, command...
    local name=$1
    shift
    if "$@" >"$T/$name.log" 2>&1; then
        echo "PASS $name"
    else
        echo "FAIL $name"
        sed 's/^/  /' "$T/$name.log" | tail -15
    fi
}

# oracle_logits MODEL TOKENS OUT — the float64 oracle's logits ($ORACLE) for
# TOKENS on the checkpoint MODEL. With K3_TEST_CACHE set (run_all.sh sets it
# for one run of the suite) they are kept there under the sha256 of the
# checkpoint's files, the tokens and the oracle: the oracle is plain Python,
# so the sanitizer phase, which writes the same checkpoints from the same
# sources and seeds, takes the normal phase's numbers instead of running it again.
oracle_logits() { # model dir, tokens, output file
    local key=
    if [ -n "${K3_TEST_CACHE:-}" ] && [ -d "$K3_TEST_CACHE" ]; then
        key=$({
            printf '%s\n' "$2"
            cat "$ORACLE"
            find "$1/" -type f | LC_ALL=C sort | xargs cat
        } | sha256sum | cut -c1-40)
        if [ -f "$K3_TEST_CACHE/oracle-$key.f32" ]; then
            cp "$K3_TEST_CACHE/oracle-$key.f32" "$3" && echo "the oracle's logits of this run's normal phase (key $key)"
            return
        fi
    fi
    /usr/bin/python3 "$ORACLE" "$1" --tokens "$2" --out "$3" || return 1
    # by rename: a test running beside this one never reads half a file
    [ -z "$key" ] || { cp "$3" "$K3_TEST_CACHE/.oracle-$key.$$" && mv "$K3_TEST_CACHE/.oracle-$key.$$" "$K3_TEST_CACHE/oracle-$key.f32"; }
}

# synth_checkpoint DIR ARGS... — `$K3 synth --out DIR ARGS`. With K3_TEST_CACHE
# set, the normal phase keeps the checkpoint (hard links) under the sha256 of
# the arguments (a file argument by its contents), and the sanitizer phase
# links it instead of writing the same bytes again: for a large checkpoint the
# sanitized writer costs far more than the forward pass under test, and the
# synth code is checked under the sanitizers on small checkpoints
# (synth_oracle.sh).
synth_checkpoint() { # dir, synth args...
    local dir=$1 key= a
    shift
    if [ -n "${K3_TEST_CACHE:-}" ] && [ -d "$K3_TEST_CACHE" ]; then
        key=$(for a in "$@"; do if [ -f "$a" ]; then cat "$a"; else printf '%s\n' "$a"; fi; done |
            sha256sum | cut -c1-40)
        if [ "${K3_SAN:-0}" = 1 ] && [ -d "$K3_TEST_CACHE/synth-$key" ]; then
            ln -s "$K3_TEST_CACHE/synth-$key" "$dir" && echo "the checkpoint of this run's normal phase (key $key)"
            return
        fi
    fi
    "$K3" synth --out "$dir" "$@" || return 1
    if [ -n "$key" ] && [ "${K3_SAN:-0}" != 1 ]; then
        # copied aside, then renamed into place (tests run in parallel: another
        # may keep the same checkpoint at the same time; the first one stays)
        local t="$K3_TEST_CACHE/.synth-$key.$$"
        rm -rf "$t"
        cp -al "$dir" "$t" 2>/dev/null || cp -r "$dir" "$t"
        mv -T "$t" "$K3_TEST_CACHE/synth-$key" 2>/dev/null || rm -rf "$t"
    fi
}
