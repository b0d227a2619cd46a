#!/usr/bin/env bash
# serve_structured.sh — structured output with sampling on the random model,
# validated with ajv (tests/serve/structured.mjs via the official openai client).
cd "$(dirname "$0")/../.."
. tests/serve/lib.sh
command -v node >/dev/null || { echo "PASS serve_structured_skipped (node is not installed)"; exit 0; }
if ! bash tests/npm/setup.sh >/dev/null 2>&1 || [ ! -d tests/npm/node_modules/ajv ]; then
    echo "FAIL serve_structured_setup (npm install of tests/npm failed)"
    exit 1
fi
# the sanitizer phase (~10x slower) samples 6 seeds a schema; the normal phase 24
[ "${K3_SAN:-0}" = 1 ] && export K3_STRUCTURED_SEEDS=${K3_STRUCTURED_SEEDS:-6}
serve_start || { echo "FAIL serve_structured_start"; exit 1; }
node tests/serve/structured.mjs "$SERVE_URL" "$SERVE_PID"
rc=$?
serve_stop || { echo "FAIL serve_structured_clean_exit"; exit 1; }
exit $rc
