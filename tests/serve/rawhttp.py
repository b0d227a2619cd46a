"""rawhttp.py — raw-socket HTTP helpers for the tests/sh/serve_*.sh tests that
need bytes curl will not send (invalid UTF-8 in the method or path, Content-Length
together with chunked, idle connections). Used as a library or as
`python3 tests/serve/rawhttp.py CASES_FILE PORT` (see serve_badbytes.sh)."""
import json
import socket


def request(port, raw, timeout=30.0):
    """Send raw bytes on a fresh connection; return (status, headers, body bytes)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    try:
        try:
            s.sendall(raw)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the server answered early (413, 400) and closed: read that answer
        data = b""
        while True:
            try:
                chunk = s.recv(65536)
            except (ConnectionResetError, socket.timeout):
                break
            if not chunk:
                break
            data += chunk
    finally:
        s.close()
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    try:
        status = int(lines[0].split(b" ")[1])
    except (IndexError, ValueError):
        status = 0
    headers = {}
    for ln in lines[1:]:
        k, _, v = ln.partition(b":")
        headers[k.strip().lower().decode("latin-1")] = v.strip().decode("latin-1")
    if headers.get("transfer-encoding", "").lower() == "chunked":
        out, rest = b"", body
        while rest:
            size_line, _, rest = rest.partition(b"\r\n")
            try:
                n = int(size_line.split(b";")[0], 16)
            except ValueError:
                break
            if n == 0:
                break
            out, rest = out + rest[:n], rest[n + 2:]
        body = out
    return status, headers, body


def error_doc_ok(body):
    """The body is valid UTF-8 JSON of the form {"error":{"message": str, ...}}."""
    try:
        d = json.loads(body.decode("utf-8", errors="strict"))
        return isinstance(d["error"]["message"], str) and len(d["error"]["message"]) > 0
    except Exception:
        return False


def get(port, path, headers=b""):
    return request(port, b"GET " + path + b" HTTP/1.1\r\nHost: 127.0.0.1\r\n" + headers +
                   b"Connection: close\r\n\r\n")
