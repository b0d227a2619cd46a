#!/usr/bin/env bash
# serve_webui.sh — the chat page at GET /: served as one self-contained HTML
# document (no external scripts, fonts or addresses; a restrictive CSP), open
# when an API key is set; then driven in headless Chromium by puppeteer-core
# (tests/serve/webui.mjs): limits shown, a streamed answer with its reasoning
# folded, a tool call, the Stop button (the server stops generating), the API
# key prompt. Without node or chromium the browser part prints a SKIP line
# (the curl checks still run). A screenshot lands in $BUILD/test-logs/webui.png.
cd "$(dirname "$0")/../.."
. tests/serve/lib.sh
T=$SERVE_TMP
CHROMIUM=${CHROMIUM:-/usr/bin/chromium}

# room for a long answer, so the one the test stops is still running
serve_start --test-mode --ctx-size 131072 --max-tokens 131072 || { echo "FAIL serve_webui_start"; exit 1; }
URL1=$SERVE_URL
PID1=$SERVE_PID
serve_start --test-mode --api-key sekrit || { echo "FAIL serve_webui_start_key"; exit 1; }
URL2=$SERVE_URL

curl -s -D "$T/hdr" -o "$T/page" "$URL1/"
check serve_webui_page_200 grep -q '^HTTP/1.1 200' "$T/hdr"
check serve_webui_page_html grep -qi '^Content-Type: text/html; charset=utf-8' "$T/hdr"
check serve_webui_page_csp grep -qi "^Content-Security-Policy: default-src 'none';.*connect-src 'self'" "$T/hdr"
check serve_webui_page_same_file cmp -s "$T/page" src/serve/webui.html
# nothing loaded from elsewhere: no src=/href= attributes, no absolute URLs
check serve_webui_self_contained bash -c "! grep -Eqi '(src|href)=|https?://|@import|url\\(' '$T/page'"
code=$(curl -s -o "$T/page2" -w '%{http_code}' "$URL2/")
check serve_webui_open_with_key test "$code" = 200
code=$(curl -s -o /dev/null -w '%{http_code}' "$URL2/v1/models")
check serve_webui_api_still_locked test "$code" = 401
code=$(curl -s -o /dev/null -w '%{http_code}' -X POST "$URL1/")
check serve_webui_post_405 test "$code" = 405

if ! command -v node >/dev/null; then
    echo "SKIP serve_webui_browser (node is not installed)"
elif [ ! -x "$CHROMIUM" ]; then
    echo "SKIP serve_webui_browser ($CHROMIUM is not installed)"
elif [ ! -d tests/npm/node_modules/puppeteer-core ]; then
    echo "SKIP serve_webui_browser (tests/npm/node_modules has no puppeteer-core)"
else
    mkdir -p "${K3_BUILD:-build}/test-logs"
    CHROMIUM=$CHROMIUM node tests/serve/webui.mjs "$URL1" "$URL2" "${K3_BUILD:-build}/test-logs/webui.png" ||
        echo "FAIL serve_webui_browser"
fi
serve_stop || echo "FAIL serve_webui_clean_exit_key"
SERVE_PID=$PID1
serve_stop || echo "FAIL serve_webui_clean_exit"
