#!/usr/bin/env python3
"""spec.py — speculative decoding in `k3 serve` (tests/sh/serve_spec.sh).

  spec.py URL on    the server runs --spec ngram: greedy answers with
                    speculation equal those with "speculative": false, token
                    for token (completions with and without repetition, a chat
                    with json_schema, stop sequences, a stream, and eight
                    concurrent requests); false feeds no drafts; /metrics moves
  spec.py URL off   the server runs --spec off: only "speculative": true drafts
  spec.py URL forced  (--test-mode) forced answers that repeat the prompt:
                    drafts kept, stops and tool calls as without drafts
  spec.py URL bad   "speculative" of the wrong type is a 400 naming the field

Nothing is timed. Drafts are kept only where the model's own greedy choice
equals them, and the tiny random model's answers rarely repeat: the cases
that must keep drafts bias four tokens so the greedy answer loops."""
import json
import re
import sys
import threading
import urllib.error
import urllib.request

URL, MODE = sys.argv[1], sys.argv[2]
fails = 0


def check(name, ok, detail=""):
    global fails
    print(("PASS " if ok else "FAIL ") + "spec_" + name + ("" if ok else f"  {detail}"[:600]))
    fails += 0 if ok else 1


def post(path, body):
    req = urllib.request.Request(URL + path, json.dumps(body).encode(),
                                 {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=300) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def metrics():
    with urllib.request.urlopen(URL + "/metrics", timeout=60) as r:
        text = r.read().decode()
    out = {}
    for line in text.splitlines():
        for key in ("k3_spec_verify_steps_total", "k3_spec_draft_tokens_total",
                    "k3_spec_accepted_tokens_total", "k3_decode_tokens_total"):
            if line.startswith(key):
                out[key] = float(line.split()[-1])
    return out


REPEAT = "alpha beta gamma delta " * 12
PLAIN = "The quick brown fox jumps over the lazy dog while seven wizards quietly judge boxes."
SCHEMA = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 40},
          "tags": {"type": "array", "items": {"type": "string", "maxLength": 12}, "maxItems": 6},
          "n": {"type": "integer"}}, "required": ["name", "tags", "n"]}


def completion(prompt, n=48, **extra):
    return ("/v1/completions", {"prompt": prompt, "max_tokens": n, "temperature": 0, **extra})


def chat_schema(**extra):
    return ("/v1/chat/completions", {
        "messages": [{"role": "user", "content": "Describe a tag list: a a a a a a."}],
        "max_tokens": 80, "temperature": 0, "chat_template_kwargs": {"thinking": False},
        "response_format": {"type": "json_schema",
                            "json_schema": {"name": "t", "schema": SCHEMA}}, **extra})


def answer(case, spec):
    path, body = case
    body = dict(body)
    if spec is not None:
        body["speculative"] = spec
    status, text = post(path, body)
    if status != 200:
        return status, text, None
    d = json.loads(text)
    ch = d["choices"][0]
    out = ch.get("text") if "text" in ch else ch["message"].get("content")
    return status, out, (d["usage"]["completion_tokens"], ch["finish_reason"])


# +100 on four letter tokens: the greedy answer is a word over them that
# falls into repeats the drafter finds, with some drafts kept and some not
LOOP = {"logit_bias": {"300": 100, "301": 100, "302": 100, "303": 100}}
CASES = {
    "repeat": completion(REPEAT),
    "norepeat": completion(PLAIN),
    "loop": completion("x", 64, **LOOP),
    "loop_stop": completion("x", 64, stop=["vebevebev"], **LOOP),
    "loop_prompt": completion(REPEAT, 80, **LOOP),
    "json_schema": chat_schema(),
    "json_schema_loop": chat_schema(**LOOP),
}


def same_as_plain(name, case, spec=None):
    p = answer(case, False)
    s = answer(case, spec)
    check(name + "_ok", p[0] == 200 and s[0] == 200, (p[:2], s[:2]))
    check(name + "_equals_plain", p == s, (p, s))
    return p


def stream_text(case):
    path, body = case
    req = urllib.request.Request(URL + path, json.dumps({**body, "stream": True}).encode(),
                                 {"Content-Type": "application/json"})
    text = []
    with urllib.request.urlopen(req, timeout=300) as r:
        for line in r.read().decode().splitlines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            ch = json.loads(line[6:])["choices"]
            if ch and ch[0].get("text"):
                text.append(ch[0]["text"])
    return "".join(text)


def mode_on():
    m0 = metrics()
    for name in ("repeat", "norepeat"):
        answer(CASES[name], False)
    m1 = metrics()
    check("false_feeds_no_drafts",
          m1["k3_spec_draft_tokens_total"] == m0["k3_spec_draft_tokens_total"], (m0, m1))
    for name, case in CASES.items():
        d0 = metrics()
        p = same_as_plain(name, case)
        d1 = metrics()
        if name == "loop_stop":
            check("loop_stop_stopped", p[2] is not None and p[2][1] == "stop", p)
        print(f"# {name}: drafts fed {d1['k3_spec_draft_tokens_total'] - d0['k3_spec_draft_tokens_total']:.0f}, "
              f"kept {d1['k3_spec_accepted_tokens_total'] - d0['k3_spec_accepted_tokens_total']:.0f}")
    m2 = metrics()
    check("metrics_drafted_move",
          m2["k3_spec_draft_tokens_total"] > m1["k3_spec_draft_tokens_total"], (m1, m2))
    check("metrics_accepted_move",
          m2["k3_spec_accepted_tokens_total"] > m1["k3_spec_accepted_tokens_total"], (m1, m2))
    check("metrics_accepted_le_drafted",
          m2["k3_spec_accepted_tokens_total"] <= m2["k3_spec_draft_tokens_total"], m2)
    # the schema answer is valid JSON of the schema's shape
    js = answer(CASES["json_schema"], None)
    try:
        obj = json.loads(js[1])
        ok = isinstance(obj, dict) and set(obj) == {"name", "tags", "n"}
    except (TypeError, ValueError):
        ok = js[2] is not None and js[2][1] == "length"  # cut by max_tokens: not parseable
    check("json_schema_valid", ok, js)
    # a stream's text is the non-streamed answer's
    plain = answer(CASES["loop_stop"], False)
    check("stream_equals_plain", stream_text(CASES["loop_stop"]) == plain[1],
          (stream_text(CASES["loop_stop"]), plain))
    # eight concurrent requests, speculative or not, each as alone and plain
    names = ["loop", "norepeat", "loop_stop", "loop_prompt", "json_schema_loop", "loop",
             "repeat", "json_schema"]
    alone = {n: answer(CASES[n], False) for n in set(names)}
    got = [None] * len(names)

    def run(i):
        got[i] = answer(CASES[names[i]], None if i % 3 else False)

    th = [threading.Thread(target=run, args=(i,)) for i in range(len(names))]
    for t in th:
        t.start()
    for t in th:
        t.join()
    for i, n in enumerate(names):
        check(f"concurrent_{i}_{n}_equals_plain", got[i] == alone[n], (got[i], alone[n]))
    # sampling with a seed and penalties completes, within max_tokens
    st, _, usage = answer(completion(REPEAT, 40, temperature=0.8, seed=7, top_p=0.9,
                                     frequency_penalty=0.5, logit_bias={"5": 3}), None)
    check("sampling_completes", st == 200 and usage[0] <= 40, (st, usage))


O, C, S, EOM = "<|open|>", "<|close|>", "<|sep|>", "<|end_of_msg|>"
CALL = (f"Look.{C}think{S}{O}response{S}{C}response{S}{O}tools{S}"
        f'{O}call tool="get_weather" index="1"{S}{O}argument key="city" type="string"{S}'
        f"Tokyo, the capital{C}argument{S}{C}call{S}{C}tools{S}{C}message{S}{EOM}")
TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]
PRIOR = {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "type": "function",
         "function": {"name": "get_weather", "arguments": "{\"city\": \"Tokyo, the capital\"}"}}]}
SENTENCE = "the delta rule updates the state with each key and value it reads"


def forced_chat(n, stream=False):
    return ("/v1/chat/completions", {
        "messages": [{"role": "user", "content": "Weather in Tokyo?"}, PRIOR,
                     {"role": "tool", "tool_call_id": "c1", "content": "sunny"},
                     {"role": "user", "content": "Again, the same call please."}],
        "tools": TOOLS, "max_tokens": n,
        "k3_test_force_text": CALL})


def mode_forced():
    """Test mode: forced answers that repeat the prompt keep their drafts
    (as in k3 bench --replay); stops, max_tokens and the tool-call parser see
    the same tokens as without drafts."""
    m0 = metrics()
    text = completion(SENTENCE + ". " + SENTENCE, 60, stop=["value it"],
                      k3_test_force_text=" " + SENTENCE + ". " + SENTENCE)
    p = same_as_plain("forced_stop", text)
    check("forced_stop_stopped", p[2] is not None and p[2][1] == "stop", p)
    for n in (3, 9, 14, 20, 40):
        path, body = forced_chat(n)
        plain = post(path, {**body, "speculative": False})
        spec = post(path, body)
        def msg(r):  # the choice and the token count; ids and times differ
            if r[0] != 200:
                return r
            d = json.loads(re.sub(r'"id":"[^"]*"', '"id":""', r[1]))
            return d["choices"], d["usage"]["completion_tokens"]
        check(f"forced_tool_call_{n}_equals_plain", msg(plain) == msg(spec), (plain, spec))
    m1 = metrics()
    check("forced_kept_drafts",
          m1["k3_spec_accepted_tokens_total"] - m0["k3_spec_accepted_tokens_total"] >= 20, (m0, m1))
    # the Anthropic and Responses APIs pass "speculative" on
    said = SENTENCE + ". " + SENTENCE + ". " + SENTENCE
    apis = {"messages": ("/v1/messages", {"model": "tiny", "max_tokens": 60, "messages": [
                {"role": "user", "content": said}], "k3_test_force_text": said}),
            "responses": ("/v1/responses", {"model": "tiny", "max_output_tokens": 60,
                          "input": said, "k3_test_force_text": said})}
    for name, (path, body) in apis.items():
        for spec in (False, True):
            a = metrics()
            st, text = post(path, {**body, "speculative": spec})
            fed = metrics()["k3_spec_draft_tokens_total"] - a["k3_spec_draft_tokens_total"]
            check(f"{name}_speculative_{str(spec).lower()}",
                  st == 200 and (fed > 0) == spec, (st, text[:200], fed))
        st, text = post(path, {**body, "speculative": 1})
        check(f"{name}_speculative_bad_type_400", st == 400 and "speculative" in text, (st, text))


def mode_off():
    m0 = metrics()
    same_as_plain("off_default", CASES["loop"])
    m1 = metrics()
    check("off_default_feeds_no_drafts",
          m1["k3_spec_draft_tokens_total"] == m0["k3_spec_draft_tokens_total"], (m0, m1))
    same_as_plain("off_true", CASES["loop"], True)
    m2 = metrics()
    check("off_true_drafts",
          m2["k3_spec_draft_tokens_total"] > m1["k3_spec_draft_tokens_total"], (m1, m2))


def mode_costly():
    """--spec-cost 1000000: a draft never pays for its verify, so a forced
    answer that repeats its prompt is decoded plainly (no draft fed), the
    same tokens."""
    m0 = metrics()
    text = completion(SENTENCE + ". " + SENTENCE, 60,
                      k3_test_force_text=" " + SENTENCE + ". " + SENTENCE)
    same_as_plain("costly_forced", text, True)
    m1 = metrics()
    check("costly_feeds_no_drafts",
          m1["k3_spec_draft_tokens_total"] == m0["k3_spec_draft_tokens_total"], (m0, m1))


def mode_bad():
    st, text = post("/v1/completions", {"prompt": "hi", "max_tokens": 2, "speculative": "yes"})
    check("bad_type_400", st == 400 and '"param":"speculative"' in text.replace(" ", ""),
          (st, text))


{"on": mode_on, "off": mode_off, "bad": mode_bad, "forced": mode_forced,
 "costly": mode_costly}[MODE]()
sys.exit(1 if fails else 0)
