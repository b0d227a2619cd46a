#!/usr/bin/env bash
# serve_anthropic.sh — the Anthropic routes' shared validator and structured
# outputs (output_config.format, @anthropic-ai/sdk's messages.parse) against a
# real `k3 serve` on a synthetic model, sampling (tests/serve/anthropic_check.mjs).
cd "$(dirname "$0")/../.."
. tests/serve/lib.sh
serve_start || { echo "FAIL serve_anthropic_start"; exit 1; }
node tests/serve/anthropic_check.mjs "$SERVE_URL"
rc=$?
serve_stop || { echo "FAIL serve_anthropic_clean_exit"; exit 1; }
exit $rc
