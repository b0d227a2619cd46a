#!/usr/bin/env bash
# serve_limits.sh — issue 12 part 2: one client must not hold the server.
# Prompt-length cap (--ctx-size, 400 with the numbers); --timeout during
# prompt processing (a counted deadline: k3_test_prefill_deadline_tokens, so
# the check between prefill chunks is proven without timing); hostile JSON
# bodies refused before a tree is built, RSS bounded; ten clients that stop
# reading a stream are paused (backpressure), bounded in RSS, then cancelled
# by the idle timeout; a per-address connection limit with /health still
# answering another address; idle and half-sent connections closed.
cd "$(dirname "$0")/../.."
. tests/serve/lib.sh
T=$SERVE_TMP

serve_start --test-mode --cache-mb 0 --ctx-size 64 --prefill-chunk 16 --max-unread 65536 --idle-timeout 3 ||
    { echo "FAIL serve_limits_start"; exit 1; }
python3 - "$SERVE_PORT" "$SERVE_LOG" <<'PY' || echo "FAIL serve_limits_script_1 (exit $?)"
import json, re, socket, sys, time
sys.path.insert(0, "tests/serve")
from rawhttp import request, get, error_doc_ok
port, log = int(sys.argv[1]), sys.argv[2]

def check(name, ok, info=""):
    print(("PASS " if ok else "FAIL ") + name)
    if not ok:
        print("  " + str(info)[:400])

def post(path, doc, raw=None):
    body = raw if raw is not None else json.dumps(doc).encode()
    st, hd, b = request(port, b"POST " + path + b" HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: %d\r\n"
                        b"Connection: close\r\n\r\n" % len(body) + body, timeout=120)
    return st, b

def health():
    return json.loads(get(port, b"/health")[2])

LONG = " ".join(["abc"] * 200)  # ~800 prompt tokens
USER = lambda text: {"messages": [{"role": "user", "content": text}], "chat_template_kwargs": {"thinking": False}}

# --- prompt cap: 400 naming both numbers; a prompt within it gets max_tokens clamped
st, b = post(b"/v1/chat/completions", USER(LONG))
e = json.loads(b).get("error", {})
check("serve_limits_ctx_cap_400", st == 400 and e.get("code") == "context_length_exceeded" and
      e.get("param") == "messages" and "64" in e["message"] and re.search(r"\b[0-9]{3}\b", e["message"]), b)
st, b = post(b"/v1/completions", {"prompt": LONG})
check("serve_limits_ctx_cap_completions_400", st == 400 and json.loads(b)["error"]["code"] == "context_length_exceeded", b)
st, b = post(b"/v1/chat/completions", dict(USER("hi"), max_tokens=1000, k3_test_force_text=LONG))
u = json.loads(b).get("usage", {})
check("serve_limits_ctx_clamps_completion", st == 200 and u["prompt_tokens"] + u["completion_tokens"] <= 64 and
      json.loads(b)["choices"][0]["finish_reason"] == "length", b)
h = health()
check("serve_limits_reported_in_health", h["limits"]["ctx_size"] == 64, h.get("limits"))
m = json.loads(get(port, b"/v1/models")[2])
check("serve_limits_reported_in_models", m["data"][0].get("max_model_len") == 64, m)
PY
serve_stop
check serve_limits_clean_exit_1 test $? = 0

# --- --timeout during prefill, counted: the deadline passes after 48 prompt tokens
serve_start --test-mode --cache-mb 0 --prefill-chunk 16 || { echo "FAIL serve_limits_start2"; exit 1; }
python3 - "$SERVE_PORT" <<'PY' || echo "FAIL serve_limits_script_2 (exit $?)"
import json, sys
sys.path.insert(0, "tests/serve")
from rawhttp import request, get
port = int(sys.argv[1])
def check(name, ok, info=""):
    print(("PASS " if ok else "FAIL ") + name)
    if not ok: print("  " + str(info)[:400])
def post(doc):
    body = json.dumps(doc).encode()
    return request(port, b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: %d\r\n"
                   b"Connection: close\r\n\r\n" % len(body) + body, timeout=120)
health = lambda: json.loads(get(port, b"/health")[2])
LONG = " ".join(["abc"] * 200)
before = health()["prefill_tokens"]
st, _, b = post({"messages": [{"role": "user", "content": LONG}], "k3_test_prefill_deadline_tokens": 48})
e = json.loads(b).get("error", {})
check("serve_limits_prefill_timeout_504", st == 504 and e.get("code") == "timeout" and "48 of " in e.get("message", ""), b)
after = health()["prefill_tokens"]
check("serve_limits_prefill_stops_between_chunks", after - before == 48, (before, after))
st, _, b = post({"stream": True, "messages": [{"role": "user", "content": LONG}], "k3_test_prefill_deadline_tokens": 0})
check("serve_limits_prefill_timeout_stream", st == 200 and b'"code":"timeout"' in b and b.rstrip().endswith(b"data: [DONE]"), b[-300:])
check("serve_limits_prefill_timeout_nothing_fed", health()["prefill_tokens"] == after)
PY
serve_stop
check serve_limits_clean_exit_2 test $? = 0

# --- hostile bodies and stalled readers: bounded RSS
# (idle timeout long here: every stalled client must stay until all ten are paused)
serve_start --test-mode --cache-mb 0 --max-unread 65536 --idle-timeout 600 || { echo "FAIL serve_limits_start3"; exit 1; }
python3 - "$SERVE_PORT" "$SERVE_LOG" <<'PY' || echo "FAIL serve_limits_script_3 (exit $?)"
import json, os, socket, sys, time
sys.path.insert(0, "tests/serve")
from rawhttp import request, get
port, log = int(sys.argv[1]), sys.argv[2]
def check(name, ok, info=""):
    print(("PASS " if ok else "FAIL ") + name)
    if not ok: print("  " + str(info)[:400])
def post(body):
    return request(port, b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: %d\r\n"
                   b"Connection: close\r\n\r\n" % len(body) + body, timeout=120)
health = lambda: json.loads(get(port, b"/health")[2])
MB = 1 << 20
# RSS bounds are not checked under AddressSanitizer (K3_SAN=1, set by run_all.sh):
# its quarantine keeps up to 256 MiB of freed memory resident on purpose (seen:
# 100-132 MB after one 8 MiB body, 496 MB with the stalled readers; 13 MB without).
SAN = os.environ.get("K3_SAN") == "1"
ok = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 4, "k3_test_force_text": "a b c d"}
post(json.dumps(ok).encode())
base = health()["rss_bytes"]
hostile = {
    "objects": b"[" + b"{}," * (8 * MB // 3 - 2) + b"{}]",
    "numbers": b'{"messages":[' + b"1," * (4 * MB - 64) + b"1]}",
    "deep": b'{"messages":' + b"[" * 5000 + b"]" * 5000 + b"}",
    "messages": b'{"messages":[' + b'{"role":"user","content":"x"},' * 200000 + b'{"role":"user","content":"x"}]}',
}
for name, body in hostile.items():
    for path in [b"/v1/chat/completions", b"/tokenize"]:
        st, _, b = request(port, b"POST " + path + b" HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: %d\r\n"
                           b"Connection: close\r\n\r\n" % len(body) + body, timeout=120)
        e = json.loads(b).get("error", {})
        tag = name + ("_tokenize" if path == b"/tokenize" else "")
        check("serve_limits_hostile_%s_400" % tag, st == 400 and e.get("code") == "request_too_complex", (st, b[:300]))
        rss = health()["rss_bytes"]
        check("serve_limits_hostile_%s_rss" % tag, SAN or rss < base + 64 * MB, "base %d MB, now %d MB" % (base >> 20, rss >> 20))
st, _, b = post(json.dumps(ok).encode())
check("serve_limits_serves_after_hostile", st == 200, b[:200])

# ten clients that never read a long stream (2 KB per token with top_logprobs)
LONG = " ".join(["abc"] * 4000)
body = json.dumps({"stream": True, "logprobs": True, "top_logprobs": 20, "max_tokens": 100000,
                   "messages": [{"role": "user", "content": "hi"}], "chat_template_kwargs": {"thinking": False},
                   "k3_test_force_text": LONG}).encode()
socks = []
for i in range(10):
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.connect(("127.0.0.1", port))
    s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
    socks.append(s)
paused, rss_max = 0, 0
for k in range(1200):  # waits for an event (all ten paused), up to ~10 minutes
    h = health()
    rss_max = max(rss_max, h["rss_bytes"])
    paused = h["paused"]
    if paused == 10:
        break
    time.sleep(0.5)
check("serve_limits_stalled_readers_paused", paused == 10, h)
rss = health()["rss_bytes"]
check("serve_limits_stalled_readers_rss", SAN or max(rss, rss_max) < base + 64 * MB,
      "base %d MB, paused %d MB, max seen %d MB" % (base >> 20, rss >> 20, rss_max >> 20))
for s in socks:
    s.close()
for k in range(1200):  # the hang-ups cancel them
    h = health()
    if h["active"] == 0:
        break
    time.sleep(0.5)
check("serve_limits_stalled_readers_gone", h["active"] == 0 and h["paused"] == 0, h)
check("serve_limits_rss_after_stall", SAN or health()["rss_bytes"] < base + 64 * MB)
PY
serve_stop
check serve_limits_clean_exit_3 test $? = 0

# a stalled reader is cancelled by the idle timeout (no successful write for 2 s)
serve_start --test-mode --cache-mb 0 --max-unread 65536 --idle-timeout 2 || { echo "FAIL serve_limits_start4"; exit 1; }
python3 - "$SERVE_PORT" "$SERVE_LOG" <<'PY' || echo "FAIL serve_limits_script_4 (exit $?)"
import json, socket, sys, time
sys.path.insert(0, "tests/serve")
from rawhttp import get
port, log = int(sys.argv[1]), sys.argv[2]
def check(name, ok, info=""):
    print(("PASS " if ok else "FAIL ") + name)
    if not ok: print("  " + str(info)[:400])
health = lambda: json.loads(get(port, b"/health")[2])
body = json.dumps({"stream": True, "logprobs": True, "top_logprobs": 20, "max_tokens": 1000000,
                   "messages": [{"role": "user", "content": "hi"}], "chat_template_kwargs": {"thinking": False},
                   "k3_test_force_text": " ".join(["abc"] * 40000)}).encode()
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
s.connect(("127.0.0.1", port))
s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
for k in range(1200):  # waits for the event, up to ~10 minutes
    time.sleep(0.5)
    h = health()
    if h["requests_done"] >= 1 and h["active"] == 0:
        break
n = sum(1 for ln in open(log, errors="replace") if "finish=cancelled stream" in ln)
check("serve_limits_stalled_reader_cancelled", h["active"] == 0 and n == 1, (h, n))
s.close()
PY
serve_stop
check serve_limits_clean_exit_4 test $? = 0

# --- connections: per-address limit, /health from another address
serve_start --max-conn-per-ip 4 --idle-timeout 600 || { echo "FAIL serve_limits_start5"; exit 1; }
python3 - "$SERVE_PORT" <<'PY' || echo "FAIL serve_limits_script_5 (exit $?)"
import socket, sys, time
port = int(sys.argv[1])
def check(name, ok, info=""):
    print(("PASS " if ok else "FAIL ") + name)
    if not ok: print("  " + str(info)[:400])
def health_from(addr):
    s = socket.socket()
    s.settimeout(30)
    s.bind((addr, 0))
    s.connect(("127.0.0.1", port))
    s.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
    data = b""
    try:
        while True:
            c = s.recv(65536)
            if not c: break
            data += c
    except (ConnectionResetError, socket.timeout):
        pass
    s.close()
    return data.split(b" ")[1] if data.startswith(b"HTTP/") else b"none"
idle = []
for i in range(40):  # one address opens 40 idle connections
    s = socket.socket()
    s.connect(("127.0.0.1", port))
    idle.append(s)
check("serve_limits_health_other_address", health_from("127.0.0.2") == b"200")
# of the 40, libmicrohttpd kept 4 (this address's limit): the rest were closed.
# Wait for the server to close each refused one (EOF or reset), so the count
# below does not depend on how far the server's accept loop has got.
refused = 0
for s in idle[4:]:
    s.settimeout(30)
    try:
        if s.recv(16) == b"":
            refused += 1
    except ConnectionResetError:
        refused += 1
    except socket.timeout:
        pass
check("serve_limits_over_limit_closed", refused == 36, refused)
served = 0
for s in idle[:4]:
    try:
        s.settimeout(30)
        s.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        if s.recv(16).startswith(b"HTTP/1.1 200"):
            served += 1
    except OSError:
        pass
    s.close()
check("serve_limits_per_ip_limit", served == 4, served)
for s in idle[4:]:
    s.close()
# The server notices the 4 closes asynchronously: poll (bounded) until this
# address may connect again instead of racing the server's bookkeeping.
st = b"none"
for _ in range(300):
    st = health_from("127.0.0.1")
    if st == b"200":
        break
    time.sleep(0.1)
check("serve_limits_same_address_after_close", st == b"200", st)
PY
serve_stop
check serve_limits_clean_exit_5 test $? = 0

# --- an idle connection and a half-sent header are closed by the idle timeout
# (a stream waiting on a long prefill is not idle: it gets SSE keep-alive comments)
serve_start --idle-timeout 1 --test-mode --cache-mb 0 --ctx-size 100000 || { echo "FAIL serve_limits_start6"; exit 1; }
python3 - "$SERVE_PORT" <<'PY' || echo "FAIL serve_limits_script_6 (exit $?)"
import socket, sys
port = int(sys.argv[1])
def check(name, ok, info=""):
    print(("PASS " if ok else "FAIL ") + name)
    if not ok: print("  " + str(info)[:400])
def closed_by_server(first):
    s = socket.socket()
    s.settimeout(120)  # waits for the event; the server closes after ~1 s
    s.connect(("127.0.0.1", port))
    if first: s.sendall(first)
    try:
        while s.recv(65536):  # an error answer, if any, then EOF
            pass
        return True
    except socket.timeout:
        return False
    except ConnectionResetError:
        return True
    finally:
        s.close()
check("serve_limits_idle_closed", closed_by_server(b""))
check("serve_limits_half_header_closed", closed_by_server(b"GET /health HTTP/1.1\r\nHost: 127"))
import json, time
sys.path.insert(0, "tests/serve")
from rawhttp import request
body = json.dumps({"stream": True, "max_tokens": 3, "chat_template_kwargs": {"thinking": False},
                   "messages": [{"role": "user", "content": " ".join(["abc"] * 4000)}]}).encode()
t0 = time.time()
st, _, b = request(port, b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: %d\r\n"
                   b"Connection: close\r\n\r\n" % len(body) + body, timeout=600)
secs = time.time() - t0
check("serve_limits_long_prefill_stream_not_idle", st == 200 and b.rstrip().endswith(b"data: [DONE]"),
      (st, round(secs, 1), b[-200:]))
# the prefill took longer than the idle timeout: the stream carried keep-alives
check("serve_limits_keepalive_comments", secs < 2 or b": keep-alive\n\n" in b, (round(secs, 1), b[:300]))
print("  long prefill stream: %.1f s, %d keep-alive comments" % (secs, b.count(b": keep-alive")))
PY
serve_stop
check serve_limits_clean_exit_6 test $? = 0
