#!/usr/bin/env bash
# serve_sampling.sh — logit_bias, presence_penalty and frequency_penalty
# against a real `k3 serve` on a synthetic model, and the refusal of the
# OpenAI fields k3 does not implement (tests/serve/sampling.mjs).
cd "$(dirname "$0")/../.."
. tests/serve/lib.sh
serve_start || { echo "FAIL serve_sampling_start"; exit 1; }
node tests/serve/sampling.mjs "$SERVE_URL"
rc=$?
serve_stop || { echo "FAIL serve_sampling_clean_exit"; exit 1; }
exit $rc
