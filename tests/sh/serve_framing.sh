#!/usr/bin/env bash
# serve_framing.sh — request framing, U+0000 in request text and the
# /tokenize reply bound. Raw sockets (tests/serve/rawhttp.py) send what curl
# will not: two differing Content-Length headers (the tail would be a
# smuggled second request), "Transfer-Encoding : chunked", an unknown
# transfer coding. k3 must accept its own output back (an assistant message
# holding U+0000) and the NUL must reach the tokenizer. A 7.98 MB /tokenize
# body with with_pieces is refused with the reply limit instead of building
# an 86 MB reply (+2 GB RSS before).
cd "$(dirname "$0")/../.."
. tests/serve/lib.sh

serve_start --test-mode --cache-mb 0 --idle-timeout 600 || { echo "FAIL serve_framing_start"; exit 1; }
python3 - "$SERVE_PORT" "$SERVE_PID" <<'PY' || echo "FAIL serve_framing_script (exit $?)"
import json, os, socket, sys
sys.path.insert(0, "tests/serve")
from rawhttp import request, get, error_doc_ok
port, pid = int(sys.argv[1]), int(sys.argv[2])
SAN = os.environ.get("K3_SAN") == "1"

def check(name, ok, info=""):
    print(("PASS " if ok else "FAIL ") + name)
    if not ok:
        print("  " + str(info)[:400])

def raw_all(data):
    """Send data on one connection, read until the server closes it."""
    s = socket.create_connection(("127.0.0.1", port), timeout=60)
    s.sendall(data)
    out = b""
    while True:
        try:
            c = s.recv(65536)
        except (ConnectionResetError, socket.timeout):
            break
        if not c:
            break
        out += c
    s.close()
    return out

def post(path, doc, raw=None):
    body = raw if raw is not None else json.dumps(doc).encode()
    st, hd, b = request(port, b"POST " + path + b" HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: %d\r\n"
                        b"Connection: close\r\n\r\n" % len(body) + body, timeout=300)
    return st, b

def code(b):
    try:
        return json.loads(b)["error"]["code"]
    except Exception:
        return None

# --- framing (RFC 9112 section 6): refused, answered once, connection closed
smuggled = b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
first = b'{"content":"hi"}'
body = first + smuggled
out = raw_all(b"POST /tokenize HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: %d\r\nContent-Length: %d\r\n\r\n"
              % (len(first), len(body)) + body)
check("serve_framing_two_lengths_400", out.startswith(b"HTTP/1.1 400") and b'"conflicting_length"' in out, out[:300])
check("serve_framing_two_lengths_one_answer", out.count(b"HTTP/1.1 ") == 1, out.count(b"HTTP/1.1 "))
out = raw_all(b"POST /tokenize HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 16\r\nContent-Length: 16\r\n"
              b"Connection: close\r\n\r\n" + first)
check("serve_framing_equal_lengths_ok", out.startswith(b"HTTP/1.1 200"), out[:200])
chunked = b"10\r\n" + first + b"\r\n0\r\n\r\n"
out = raw_all(b"POST /tokenize HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding : chunked\r\n\r\n" + chunked + smuggled)
check("serve_framing_space_before_colon_400", out.startswith(b"HTTP/1.1 400") and b'"invalid_header"' in out, out[:300])
check("serve_framing_space_before_colon_one_answer", out.count(b"HTTP/1.1 ") == 1, out)
for te in [b"gzip", b"gzip, chunked", b"chunked, chunked", b"identity"]:
    out = raw_all(b"POST /tokenize HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: " + te + b"\r\n\r\n" + first)
    check("serve_framing_te_%s_501" % te.decode().replace(", ", "_"),
          out.startswith(b"HTTP/1.1 501") and b'"unsupported_transfer_encoding"' in out and
          b"connection: close" in out.lower(), out[:300])
out = raw_all(b"POST /tokenize HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n" + chunked)
check("serve_framing_two_te_501", out.startswith(b"HTTP/1.1 501"), out[:200])
out = raw_all(b"POST /tokenize HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n" + chunked)
check("serve_framing_chunked_ok", out.startswith(b"HTTP/1.1 200"), out[:200])
out = raw_all(b"POST /tokenize HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 1e3\r\n\r\n" + first)
check("serve_framing_bad_length_400", out.startswith(b"HTTP/1.1 400"), out[:200])
st = request(port, b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: " + b"a" * 40000 + b"\r\n\r\n")[0]
check("serve_framing_header_buffer_431", st == 431, st)
check("serve_framing_health_after", get(port, b"/health")[0] == 200)

# --- U+0000 in request text: accepted, carried to the tokenizer
st, b = post(b"/tokenize", {"content": "\u0000"})
nul_id = json.loads(b)["tokens"][0] if st == 200 else None
check("serve_framing_nul_tokenize", st == 200 and json.loads(b)["count"] == 1, b)
st, b = post(b"/tokenize", {"content": "a\u0000b", "with_pieces": True})
toks = json.loads(b)["tokens"] if st == 200 else []
check("serve_framing_nul_tokenize_pieces", st == 200 and any(t["id"] == nul_id and t["piece"] == "\u0000" for t in toks), b)
convo = [{"role": "user", "content": "hi"},
         {"role": "assistant", "content": "x\u0000y", "reasoning_content": "r\u0000s"},
         {"role": "tool", "tool_call_id": "c1", "name": "f", "content": "bin\u0000ary"},
         {"role": "user", "content": "again"}]
st, b = post(b"/tokenize", {"messages": convo})
ids = json.loads(b)["tokens"] if st == 200 else []
check("serve_framing_nul_in_prompt", st == 200 and ids.count(nul_id) >= 2, (st, b[:300]))
st, b = post(b"/v1/chat/completions", {"messages": convo, "max_tokens": 4, "k3_test_force_text": "ok"})
check("serve_framing_nul_echo_200", st == 200, b[:300])
st, b = post(b"/v1/completions", {"prompt": "a\u0000b", "max_tokens": 2, "k3_test_force_text": "ok"})
check("serve_framing_nul_completion_200", st == 200, b[:300])
st, b = post(b"/v1/chat/completions", {"messages": [{"role": "user\u0000x", "content": "hi"}]})
check("serve_framing_nul_role_400", st == 400 and code(b) == "invalid_value", b[:300])
st, b = post(b"/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}], "stop": ["a\u0000b"]})
check("serve_framing_nul_stop_400", st == 400 and "U+0000" in json.loads(b)["error"]["message"], b[:300])
def count_tokens(text, thinking):
    doc = {"model": "tiny", "max_tokens": 4, "messages": [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": [{"type": "thinking", "thinking": thinking, "signature": "s"},
                                           {"type": "tool_use", "id": "t1", "name": "f", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "is_error": True, "content": text}]}]}
    st, b = post(b"/v1/messages/count_tokens", doc)
    return st, json.loads(b).get("input_tokens")
a, b2 = count_tokens("xy", "rs"), count_tokens("x\u0000y", "r\u0000s")
check("serve_framing_nul_anthropic", a[0] == 200 and b2[0] == 200 and b2[1] > a[1], (a, b2))
st, b = post(b"/v1/responses", {"input": [{"role": "user", "content": "a\u0000b"}], "max_output_tokens": 2,
                                "k3_test_force_text": "ok"})
check("serve_framing_nul_responses_200", st == 200, b[:300])
def resp_tokens(r):
    doc = {"input": [{"role": "user", "content": "q"},
                     {"type": "reasoning", "summary": [{"type": "summary_text", "text": r}]},
                     {"role": "assistant", "content": [{"type": "output_text", "text": "a"}]},
                     {"role": "user", "content": "b"}], "max_output_tokens": 2, "k3_test_force_text": "ok"}
    st, b = post(b"/v1/responses", doc)
    return st, json.loads(b).get("usage", {}).get("input_tokens")
a, b2 = resp_tokens("rs"), resp_tokens("r\u0000s")
check("serve_framing_nul_responses_reasoning", a[0] == 200 and b2[0] == 200 and b2[1] > a[1], (a, b2))

# --- /tokenize reply bound: 7.98 MB of "\x01<|open|>é😀 " with pieces
def vm(field):
    for ln in open("/proc/%d/status" % pid):
        if ln.startswith(field + ":"):
            return int(ln.split()[1]) * 1024
MB = 1 << 20
lim = json.loads(get(port, b"/health")[2])["limits"]["max_reply"]
unit = "\u0001<|open|>é😀 "
text = unit * (int(7.98e6) // len(json.dumps(unit)))
base = vm("VmRSS")
st, b = post(b"/tokenize", {"content": text, "with_pieces": True})
e = json.loads(b).get("error", {})
check("serve_framing_tokenize_pieces_capped", st == 400 and e.get("code") == "reply_too_large" and str(lim) in e.get("message", ""), b[:300])
peak = vm("VmHWM")
check("serve_framing_tokenize_peak_rss", SAN or peak - base < 400 * MB, "base %d MB, peak %d MB" % (base >> 20, peak >> 20))
st, b = post(b"/tokenize", {"content": text})
check("serve_framing_tokenize_ids_bounded", (st == 200 and len(b) <= lim) or (st == 400 and code(b) == "reply_too_large"), (st, len(b)))
st, b = post(b"/tokenize", {"content": unit * 20000, "with_pieces": True})
check("serve_framing_tokenize_pieces_small_ok", st == 200 and json.loads(b)["count"] > 20000 and len(b) <= lim, (st, len(b)))
st, b = post(b"/tokenize", {"content": "<|open|>", "parse_special": True})
open_id = json.loads(b)["tokens"][0]
st, b = post(b"/detokenize", {"tokens": [open_id] * 400000})  # 3.2 MB of text, twice, escaped
check("serve_framing_detokenize_capped", st == 400 and code(b) == "reply_too_large", (st, b[:200]))
st, b = post(b"/detokenize", {"tokens": [nul_id] * 1000})
check("serve_framing_detokenize_ok", st == 200 and json.loads(b)["content"] == "\u0000" * 1000, (st, b[:200]))
print("INFO tokenize peak RSS growth %d MB" % ((vm("VmHWM") - base) >> 20))
PY
serve_stop
check serve_framing_clean_exit test $? = 0
