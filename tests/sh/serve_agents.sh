#!/usr/bin/env bash
# serve_agents.sh — the official openai (Responses API), @anthropic-ai/sdk
# (Messages API), Vercel AI SDK (@ai-sdk/openai) and LangChain (@langchain/openai,
# useResponsesApi) npm clients against a real `k3 serve` (tests/serve/agents.mjs).
cd "$(dirname "$0")/../.."
. tests/serve/lib.sh
command -v node >/dev/null || { echo "PASS serve_agents_skipped (node is not installed)"; exit 0; }
if ! bash tests/npm/setup.sh >/dev/null 2>&1 || [ ! -d tests/npm/node_modules/@anthropic-ai/sdk ]; then
    echo "FAIL serve_agents_setup (npm install of tests/npm failed)"
    exit 1
fi
serve_start --test-mode --api-key test-key || { echo "FAIL serve_agents_start"; exit 1; }
node tests/serve/agents.mjs "$SERVE_URL"
rc=$?
serve_stop || { echo "FAIL serve_agents_clean_exit"; exit 1; }
exit $rc
