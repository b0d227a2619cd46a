#!/usr/bin/env bash
# serve_markers.sh — output structure comes only from control-token ids:
# marker spellings generated as ordinary text are returned as content, tool
# calls need tools declared and tool_choice not "none", a user's spelled
# think opener changes nothing (tests/serve/markers.mjs, issue 12 part 3).
cd "$(dirname "$0")/../.."
. tests/serve/lib.sh
serve_start --test-mode || { echo "FAIL serve_markers_start"; exit 1; }
node tests/serve/markers.mjs "$SERVE_URL" "$K3" "$(serve_model)"
rc=$?
serve_stop || { echo "FAIL serve_markers_clean_exit"; exit 1; }
exit $rc
