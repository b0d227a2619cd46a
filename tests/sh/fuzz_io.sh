#!/usr/bin/env bash
# fuzz_io.sh — builds the safetensors-header and config.json fuzz targets and runs
# each for a few seconds on seeds made from the fixtures: small valid checkpoints
# (each fixture shard re-packed with its smallest tensors, so the seeds pass the
# header checks and reach tensor parsing, offsets and overlap checks), the shard
# indexes, and the configs.
set -u
cd "$(dirname "$0")/../.."
F=${K3_FIXTURES:-../shared/fixtures}
. tests/sh/lib/fuzz.bash
fuzz_need_clang fuzz_io
seeds=$(mktemp -d)
trap 'rm -rf "$seeds"' EXIT
mkdir -p "$seeds/st" "$seeds/cfg"
for d in "$F"/*/ tests/fixtures/*/; do
    n=$(basename "$d")
    [ -f "$d/config.json" ] && cp "$d/config.json" "$seeds/cfg/$n.json"
    for s in "$d"/*.safetensors; do
        [ -f "$s" ] && python3 - "$s" "$seeds/st/$n-$(basename "$s")" <<'PY'
import json, struct, sys
src, dst = sys.argv[1], sys.argv[2]
raw = open(src, "rb").read()
hl = struct.unpack("<Q", raw[:8])[0]
hdr = json.loads(raw[8:8 + hl])
meta = hdr.pop("__metadata__", None)
data = raw[8 + hl:]
def size(kv):
    b, e = kv[1]["data_offsets"]
    return e - b
out, blob = {}, b""
for k, v in sorted(hdr.items(), key=size)[:12]:  # the 12 smallest tensors, re-packed
    b, e = v["data_offsets"]
    if len(blob) + e - b > 6000:
        break
    out[k] = dict(v, data_offsets=[len(blob), len(blob) + e - b])
    blob += data[b:e]
if meta is not None:
    out["__metadata__"] = meta
h = json.dumps(out, separators=(",", ":")).encode()
h += b" " * (-len(h) % 8)
open(dst, "wb").write(struct.pack("<Q", len(h)) + h + blob)
PY
    done
    for s in "$d"/*.index.json; do
        [ -f "$s" ] && cp "$s" "$seeds/st/$n-index.json"
    done
done
fuzz_build fuzz_safetensors src/io/safetensors.c src/io/mapguard.c && fuzz_run fuzz_safetensors "$seeds/st" -- -max_total_time=5 -max_len=8192
fuzz_build fuzz_config src/io/config.c && fuzz_run fuzz_config "$seeds/cfg" -- -max_total_time=5 -max_len=8192
