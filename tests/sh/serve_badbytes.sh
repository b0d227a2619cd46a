#!/usr/bin/env bash
# serve_badbytes.sh — issue 12 part 1, the crash class over HTTP: invalid UTF-8
# and multi-byte characters cut by fixed-size buffers in the method, the path
# (raw and percent-encoded), the model id of /v1/models/{id}, every quoted
# body field and jansson's error text. Each request must get a 4xx whose body
# is valid UTF-8 JSON {"error":{...}}, the server must keep serving (GET /%ff
# used to SIGSEGV it, even with --api-key, since 404 comes before auth), and
# the log must stay valid UTF-8 without forged lines or terminal escapes.
cd "$(dirname "$0")/../.."
. tests/serve/lib.sh

serve_start --api-key sekrit || { echo "FAIL serve_badbytes_start"; exit 1; }
python3 - "$SERVE_PORT" <<'PY' || echo "FAIL $(basename "$0" .sh)_script (exit $?)"
import sys
sys.path.insert(0, "tests/serve")
from rawhttp import request, get, error_doc_ok
port = int(sys.argv[1])
AUTH = b"Authorization: Bearer sekrit\r\n"
fails = []

def case(name, raw, want=None):
    st, _, body = request(port, raw)
    ok = 400 <= st < 500 and error_doc_ok(body) and (want is None or st == want)
    h, _, _ = get(port, b"/health")
    ok = ok and h == 200
    if not ok:
        fails.append(name)
        print("  %s: status %d, health %d, body %r" % (name, st, h, body[:200]))

def req(method, path, headers=b"", body=b""):
    return (method + b" " + path + b" HTTP/1.1\r\nHost: 127.0.0.1\r\n" + headers +
            b"Content-Length: %d\r\nConnection: close\r\n\r\n" % len(body) + body)

case("get_pct_ff", req(b"GET", b"/%ff"), 404)
case("get_pct_cut", req(b"GET", b"/%c3"), 404)
case("get_pct_c328", req(b"GET", b"/%c3%28"), 404)
case("get_raw_ff", req(b"GET", b"/\xff\xfe"), 404)
case("method_g_c3_t", req(b"G\xc3T", b"/health"), 405)
case("method_cut", req(b"GGGGGGGGGGGGG\xc3\xa9\xc3\xa9", b"/health"), 405)
for pad in range(100, 135):  # the 128-byte path buffer cuts the é at every offset
    case("path_cut_%d" % pad, req(b"GET", b"/" + b"a" * pad + b"%c3%a9%e2%82%ac"), 404)
case("model_id_ff", req(b"GET", b"/v1/models/%ff", AUTH), 404)
case("model_id_cut", req(b"GET", b"/v1/models/" + b"a" * 199 + "é".encode(), AUTH), 404)
U = b'"messages":[{"role":"user","content":"x"}]'
chat = lambda body: req(b"POST", b"/v1/chat/completions", AUTH, body)
case("body_bad_escape", chat('{"a": "x\\é"}'.encode()), 400)
case("body_model_199a_e", chat(b'{"model":"' + b"a" * 199 + "é".encode() + b'",' + U + b"}"), 404)
case("body_role_400e", chat(b'{"messages":[{"role":"' + "é".encode() * 400 + b'","content":"x"}]}'), 400)
case("body_tool_choice", chat(b'{' + U + b',"tool_choice":"' + "€".encode() * 300 + b'"}'), 400)
case("body_effort", chat(b'{' + U + b',"reasoning_effort":"' + b"a" * 501 + "😀".encode() + b'"}'), 400)
case("body_part_type", chat(b'{"messages":[{"role":"user","content":[{"type":"' + "é".encode() * 300 + b'"}]}]}'), 400)
case("body_invalid_utf8", chat(b'{"messages":[{"role":"user","content":"\xc3\x28"}]}'), 400)
case("body_unterminated", chat(b'{"a": "' + "é".encode() * 100), 400)
case("log_forge", req(b"GET", b"/x%0Aforged%1b[31m"), 404)
st, _, _ = get(port, b"/health")
print(("PASS" if not fails else "FAIL") + " serve_badbytes_all_4xx_json_utf8 (%d failed)" % len(fails))
print(("PASS" if st == 200 else "FAIL") + " serve_badbytes_still_serving")
PY
kill -0 "$SERVE_PID" 2>/dev/null
check serve_badbytes_no_crash test $? = 0
serve_stop
check serve_badbytes_clean_exit_1 test $? = 0
check serve_badbytes_log_utf8 python3 -c 'import sys; sys.stdin.buffer.read().decode("utf-8")' <"$SERVE_LOG"
check serve_badbytes_log_no_escape_chars sh -c "! grep -q \$(printf '\\033') '$SERVE_LOG'"
check serve_badbytes_log_not_forged sh -c "! grep -q '^forged' '$SERVE_LOG' && grep -q 'GET /x\\\\x0aforged\\\\x1b' '$SERVE_LOG'"
