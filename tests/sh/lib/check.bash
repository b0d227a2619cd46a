# check.bash — the PASS/FAIL helper of the oracle scripts, sourced after they
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
