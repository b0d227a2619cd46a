# transcripts.py URL OUT — the wire bytes of chat completions, completions,
# Anthropic Messages and Responses, streamed and whole, for forced outputs
# (reasoning + text, a tool call, a call cut by max_tokens, a stop string,
# an engine error), with ids and times masked. serve_transcripts.sh compares
# them with tests/serve/transcripts.txt: the three renderers must keep their
# bytes whatever changes inside the serving core.
import json
import re
import sys
import urllib.error
import urllib.request

URL, OUT = sys.argv[1], sys.argv[2]
O, C, S, EOM = "<|open|>", "<|close|>", "<|sep|>", "<|end_of_msg|>"
END = f"{C}response{S}{C}message{S}{EOM}"
THINK = f"Let me think.{C}think{S}{O}response{S}Hello there, Ünï 你好 🚀.{END}"
CALL = (f"I should look it up.{C}think{S}{O}response{S}{C}response{S}{O}tools{S}"
        f'{O}call tool="get_weather" index="1"{S}{O}argument key="city" type="string"{S}Tokyo'
        f"{C}argument{S}{C}call{S}{C}tools{S}{C}message{S}{EOM}")
CUT = (f"x{C}think{S}{O}response{S}{C}response{S}{O}tools{S}"
       f'{O}call tool="get_weather" index="1"{S}{O}argument key="city" type="string"{S}Tokyo')
SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}}
TOOLS = {
    "/v1/chat/completions": [{"type": "function", "function": {"name": "get_weather", "parameters": SCHEMA}}],
    "/v1/messages": [{"name": "get_weather", "input_schema": SCHEMA}],
    "/v1/responses": [{"type": "function", "name": "get_weather", "parameters": SCHEMA}],
}
HI = [{"role": "user", "content": "Hi"}]


def body(path, stream, forced, limit, tools=False, stop=None):
    if path == "/v1/responses":
        b = {"input": "Hi", "max_output_tokens": limit, "reasoning": {"effort": "high"}}
    elif path == "/v1/messages":
        b = {"messages": HI, "max_tokens": limit, "thinking": {"type": "enabled", "budget_tokens": 2000}}
        if stop:
            b["stop_sequences"] = stop
    else:
        b = {"messages": HI, "max_tokens": limit}
        if stream:
            b["stream_options"] = {"include_usage": True}
        if stop:
            b["stop"] = stop
    b.update({"model": "tiny", "stream": stream})
    b["k3_test_force_text" if isinstance(forced, str) else "k3_test_force_tokens"] = forced
    if tools:
        b["tools"] = TOOLS[path]
    return b


cases = []
for stream in (False, True):
    for path in TOOLS:
        cases.append((path, body(path, stream, THINK, 200)))
        cases.append((path, body(path, stream, CALL, 200, tools=True)))
        cases.append((path, body(path, stream, CUT, 30, tools=True)))
        cases.append((path, body(path, stream, [999999], 9)))
        if path != "/v1/responses":
            cases.append((path, body(path, stream, THINK, 200, stop=["there"])))
    cases.append(("/v1/completions", {"model": "tiny", "prompt": "Once", "max_tokens": 8, "stream": stream,
                                      "k3_test_force_text": "abc def"}))
cases.append(("/v1/messages/count_tokens", {"model": "tiny", "messages": HI}))

MASK = [(r'"(id|call_id|item_id|created|created_at)":("[^"]*"|\d+)', r'"\1":X'),
        (r'(resp|msg|rs|fc|toolu|call)_(?!id")[0-9a-zA-Z_-]+', r'\1_X')]
out = []
for path, b in cases:
    req = urllib.request.Request(URL + path, data=json.dumps(b).encode(),
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req) as r:
            status, data = r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        status, data = e.code, e.read().decode()
    for pat, rep in MASK:
        data = re.sub(pat, rep, data)
    out.append(f"### {path} {json.dumps(b)}\n{status}\n{data}\n")
open(OUT, "w").write("".join(out))
