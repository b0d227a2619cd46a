#!/usr/bin/env bash
# kernels_seam.sh — src/kernels/ has one interface: outside the folder a file
# includes kernels/kernels.h and no other header of it, so the ISA kernels
# (avx2.h, avx512.h, ...), the per-format dispatch table and the int8 path
# stay private to the folder. A negative control checks that the scan catches
# a private include. (Tests may include private headers: they test them.)
# k3-test: source-only (it reads src/, not a build)
set -u
cd "$(dirname "$0")/../.."

# private_includes DIR...: "file:line: #include" for each kernels/ header
# other than kernels.h included under DIR.
private_includes() {
    grep -rnE '^#include "kernels/' --include='*.c' --include='*.h' "$@" |
        grep -v '"kernels/kernels.h"'
}

dirs=$(ls -d src/*/ | grep -v '^src/kernels/$')
bad=$(private_includes $dirs)
if [ -z "$bad" ]; then
    echo "PASS kernels_one_header"
else
    echo "FAIL kernels_one_header: outside src/kernels/, include kernels/kernels.h only:"
    echo "$bad" | sed 's/^/  /'
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/model"
printf '#include "kernels/kernels.h"\n#include "kernels/avx2.h"\n' >"$tmp/model/x.c"
caught=$(private_includes "$tmp")
if [ "$(echo "$caught" | grep -c avx2.h)" = 1 ] && ! echo "$caught" | grep -q kernels.h; then
    echo "PASS kernels_seam_negative_control"
else
    echo "FAIL kernels_seam_negative_control: the scan missed a private include"
fi
