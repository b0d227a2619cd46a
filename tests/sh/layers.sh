#!/usr/bin/env bash
# layers.sh — the layering rule of src/: a file in one layer includes only
# headers of its own layer or of a lower one, in the order
#   base < io < quant < kernels < model < text < gen < serve < dist < cli
# (text needs only base, but sits above model so that gen may use both).
# One PASS/FAIL line per layer, naming every offending include. A negative
# control checks that the scan itself catches an upward include. Then
# docs/ARCHITECTURE.md must name every folder of src/ (as `NAME/`), so the
# floor plan cannot fall behind the tree; a negative control again.
# k3-test: source-only (it reads src/ and docs/, not a build)
set -u
cd "$(dirname "$0")/../.."
ORDER="base io quant kernels model text gen serve dist cli"

# RANK[NAME] = position in ORDER (a lookup, not a subshell per include: the
# scan reads a few thousand includes)
declare -A RANK
i=0
for l in $ORDER; do
    RANK[$l]=$i
    i=$((i + 1))
done
rank() { # rank NAME -> position in ORDER, or -1 if NAME is not a layer
    echo "${RANK[$1]:--1}"
}

# upward_includes DIR LAYER: "file: #include" for each include of a higher layer.
upward_includes() {
    local dir=$1 layer=$2 me f inc target
    me=$(rank "$layer")
    # one grep for the folder: lines "FILE:#include ..."
    while IFS= read -r inc; do
        f=${inc%%:#include*}
        inc=${inc#"$f:"}
        target=${inc#*\"}
        target=${target%%/*}
        [ "${RANK[$target]:--1}" -gt "$me" ] && echo "$f: $inc"
    done < <(grep -HE '^#include "[a-z]+/' "$dir"/*.[ch] 2>/dev/null)
}

for layer in $ORDER; do
    if [ ! -d "src/$layer" ]; then
        echo "FAIL layer_$layer (src/$layer is missing)"
        continue
    fi
    bad=$(upward_includes "src/$layer" "$layer")
    if [ -z "$bad" ]; then
        echo "PASS layer_$layer"
    else
        echo "FAIL layer_$layer includes a higher layer:"
        echo "$bad" | sed 's/^/  /'
    fi
done

# unnamed_folders DOC: each folder of src/ that DOC does not name as `NAME/`.
unnamed_folders() {
    local d name
    for d in src/*/; do
        name=$(basename "$d")
        grep -qF "\`$name/\`" "$1" || echo "$name"
    done
}

missing=$(unnamed_folders docs/ARCHITECTURE.md)
if [ -z "$missing" ]; then
    echo "PASS architecture_names_every_folder"
else
    echo "FAIL architecture_names_every_folder: docs/ARCHITECTURE.md does not name" $missing
fi

# Negative control: a file in io that includes a model header must be reported.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
printf '#include "base/err.h"\n#include "model/model.h"\n' >"$tmp/upward.c"
if upward_includes "$tmp" io | grep -q 'model/model.h'; then
    echo "PASS layer_scan_catches_upward_include"
else
    echo "FAIL layer_scan_catches_upward_include"
fi

# Negative control: a plan that leaves out a folder must be reported.
grep -vF '`kernels/`' docs/ARCHITECTURE.md >"$tmp/plan.md"
if unnamed_folders "$tmp/plan.md" | grep -qx kernels; then
    echo "PASS architecture_check_catches_a_missing_folder"
else
    echo "FAIL architecture_check_catches_a_missing_folder"
fi
