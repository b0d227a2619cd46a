#!/usr/bin/env bash
# setup.sh — installs the npm packages some tests compare against (js-tiktoken,
# openai) into tests/npm/node_modules. Idempotent and quiet; exit 1 if npm fails.
set -euo pipefail
cd "$(dirname "$0")"
# tests run in parallel (tests/run_all.sh): one installs, the others wait here
exec 9<setup.sh
flock 9
if [ -f node_modules/.k3-installed ] && [ node_modules/.k3-installed -nt package.json ]; then
    exit 0
fi
npm install --no-audit --no-fund --loglevel=error >/dev/null
touch node_modules/.k3-installed
