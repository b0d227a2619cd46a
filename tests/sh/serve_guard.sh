#!/usr/bin/env bash
# serve_guard.sh — issue 12 part 4 against a real `k3 serve`: the Host check
# (loopback bind: loopback names only unless --allowed-host; blocks DNS
# rebinding), cross-origin POSTs refused unless same-origin, Content-Length
# together with chunked refused (and the connection closed), --api-key ""
# an error, and /health without the key answering only {"status":"ok"}.
cd "$(dirname "$0")/../.."
. tests/serve/lib.sh

serve_start --api-key sekrit --test-mode || { echo "FAIL serve_guard_start"; exit 1; }
python3 - "$SERVE_PORT" <<'PY' || echo "FAIL $(basename "$0" .sh)_script (exit $?)"
import json, sys
sys.path.insert(0, "tests/serve")
from rawhttp import request, error_doc_ok
port = int(sys.argv[1])

def check(name, ok, info=""):
    print(("PASS " if ok else "FAIL ") + name)
    if not ok:
        print("  " + str(info)[:300])

def req(method, path, headers=b"", body=b"", host=b"127.0.0.1:%d" % port):
    h = b"Host: " + host + b"\r\n" if host is not None else b""
    return request(port, method + b" " + path + b" HTTP/1.1\r\n" + h + headers +
                   b"Content-Length: %d\r\nConnection: close\r\n\r\n" % len(body) + body)

AUTH = b"Authorization: Bearer sekrit\r\n"
CHAT = b'{"messages":[{"role":"user","content":"Hi"}],"max_tokens":2,"k3_test_force_text":"ok"}'

# Host: loopback names pass, anything else (a rebinding attacker's name) is 403
for i, h in enumerate([b"127.0.0.1:%d" % port, b"localhost:%d" % port, b"LOCALHOST", b"127.5.6.7",
                       b"[::1]:%d" % port, b"app.localhost:80", b"localhost."]):
    st, _, body = req(b"GET", b"/health", host=h)
    check("serve_guard_host_ok_%d" % i, st == 200, (h, st, body))
for i, h in enumerate([b"evil.example:%d" % port, b"evil.example", b"127.0.0.1.evil.example",
                       b"localhost.evil.example", b"10.0.0.1", b"[::2]", b"", b"localhost:80x",
                       b"local host", b"evil.example\xff"]):
    st, hd, body = req(b"GET", b"/v1/models", AUTH, host=h)
    ok = st == 403 and error_doc_ok(body) and json.loads(body)["error"]["code"] == "host_not_allowed"
    check("serve_guard_host_refused_%d" % i, ok, (h, st, body))
st, _, body = req(b"GET", b"/health", host=b"evil.example")
check("serve_guard_host_refused_health_too", st == 403, (st, body))
st, _, body = req(b"GET", b"/health", host=None)  # HTTP/1.1 without Host: libmicrohttpd answers 400
check("serve_guard_no_host_not_served", st in (200, 400), st)

# Origin: same-origin and no Origin pass; another origin (a text/plain form post) is 403
st, _, body = req(b"POST", b"/v1/chat/completions", AUTH + b"Content-Type: text/plain\r\nOrigin: https://evil.example\r\n", CHAT)
check("serve_guard_cross_origin_text_plain_403", st == 403 and json.loads(body)["error"]["code"] == "origin_not_allowed", (st, body))
st, _, body = req(b"POST", b"/v1/chat/completions", b"Content-Type: text/plain\r\nOrigin: null\r\n", CHAT)
check("serve_guard_origin_null_403", st == 403, (st, body))
st, _, body = req(b"POST", b"/v1/chat/completions", AUTH + b"Origin: http://127.0.0.1:%d\r\n" % port, CHAT)
check("serve_guard_same_origin_ok", st == 200, (st, body))
st, _, body = req(b"POST", b"/v1/chat/completions", AUTH, CHAT)
check("serve_guard_no_origin_ok", st == 200, (st, body))

# Content-Length together with chunked: 400, connection closed
raw = (b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n" + AUTH +
       b"Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n" +
       b"%x\r\n" % len(CHAT) + CHAT + b"\r\n0\r\n\r\n" +
       b"GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
st, hd, body = request(port, raw)
check("serve_guard_cl_and_chunked_400", st == 400 and error_doc_ok(body) and
      json.loads(body)["error"]["code"] == "conflicting_length", (st, body))
check("serve_guard_cl_and_chunked_closes", hd.get("connection", "").lower() == "close" and body.count(b'"error"') == 1, (hd, body))

# /health without the key: status only; with it, the counters and limits
st, _, body = req(b"GET", b"/health")
check("serve_guard_health_minimal", st == 200 and json.loads(body) == {"status": "ok"}, body)
st, _, body = req(b"GET", b"/health", AUTH)
d = json.loads(body)
check("serve_guard_health_full_with_key", st == 200 and "requests_done" in d and "prompt_cache" in d and
      d["limits"]["ctx_size"] > 0, body)
PY
serve_stop
check serve_guard_clean_exit_1 test $? = 0

# --allowed-host adds names; '*' accepts any
serve_start --allowed-host 'k3.internal,other.example' || { echo "FAIL serve_guard_start_allowed"; exit 1; }
st=$(curl -s -o /dev/null -w '%{http_code}' -H 'Host: k3.internal:8000' "$SERVE_URL/health")
check serve_guard_allowed_host_ok test "$st" = 200
st=$(curl -s -o /dev/null -w '%{http_code}' -H 'Host: localhost' "$SERVE_URL/health")
check serve_guard_allowed_host_keeps_loopback test "$st" = 200
st=$(curl -s -o /dev/null -w '%{http_code}' -H 'Host: evil.example' "$SERVE_URL/health")
check serve_guard_allowed_host_others_403 test "$st" = 403
serve_stop
check serve_guard_clean_exit_2 test $? = 0
serve_start --allowed-host '*' || { echo "FAIL serve_guard_start_any"; exit 1; }
st=$(curl -s -o /dev/null -w '%{http_code}' -H 'Host: evil.example' "$SERVE_URL/health")
check serve_guard_allowed_host_star test "$st" = 200
serve_stop
check serve_guard_clean_exit_3 test $? = 0

# --api-key "" is an error, not "auth off"
"$K3" serve --api-key "" --port 0 --model "$(serve_model)" >"$SERVE_TMP/cli" 2>&1
check serve_guard_empty_api_key_refused test $? = 2 -a -n "$(grep -- '--api-key is empty' "$SERVE_TMP/cli")"
