#!/usr/bin/env python3
"""serve_spec.py — aggregate tokens/s of `k3 serve` with N concurrent streams,
speculative decoding on against off, on replay workloads (bench/serve_spec.sh
starts the server; run that).

  bench/serve_spec.py URL N ROUNDS TOKENS FILE.jsonl...

Each FILE is a replay workload (k3 bench --replay's format: one
{"prompt", "answer"} per line). A round sends N requests at once to
/v1/completions: line i mod lines' prompt (no chat template), its answer
forced as the generated text (k3_test_force_text, test mode: the model runs
every step and every verify pass; a draft is kept when it equals the
answer's next token, as in k3 bench --replay), at most TOKENS tokens each,
once with "speculative": false and once with true, the order alternating
per round (interleaved, so drift hits both). A round's aggregate tok/s is
the completion tokens of its N answers over its wall time. Prints, per
workload, the median of each mode's aggregate tok/s, the ratio on/off, and
the acceptance from /metrics (drafts kept / fed during the on runs); one
JSON line per run goes to stderr."""
import json
import statistics
import sys
import threading
import time
import urllib.request

URL, N, ROUNDS, TOKENS = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
FILES = sys.argv[5:]


def post(body):
    req = urllib.request.Request(URL + "/v1/completions", json.dumps(body).encode(),
                                 {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=3600) as r:
        return json.loads(r.read())


def metric(name):
    with urllib.request.urlopen(URL + "/metrics", timeout=60) as r:
        for line in r.read().decode().splitlines():
            if line.startswith(name):
                return float(line.split()[-1])
    return 0.0


def run(lines, spec):
    got = [0] * N
    errs = []

    def one(i):
        ln = lines[i % len(lines)]
        try:
            d = post({"prompt": ln["prompt"], "max_tokens": TOKENS, "temperature": 0,
                      "k3_test_force_text": ln["answer"], "speculative": spec})
            got[i] = d["usage"]["completion_tokens"]
        except Exception as e:  # reported, counted as no tokens
            errs.append(str(e))

    th = [threading.Thread(target=one, args=(i,)) for i in range(N)]
    t0 = time.perf_counter()
    for t in th:
        t.start()
    for t in th:
        t.join()
    wall = time.perf_counter() - t0
    return sum(got) / wall, sum(got), wall, errs


print(f"| workload | streams | plain agg tok/s | spec agg tok/s | spec/plain | kept/fed |")
print("|---|---|---|---|---|---|")
for f in FILES:
    lines = [json.loads(l) for l in open(f) if l.strip()]
    run(lines, False)  # warm-up: the prompts go into the prompt cache for both modes
    tps = {False: [], True: []}
    fed = kept = 0.0
    for r in range(ROUNDS):
        for spec in ((False, True) if r % 2 == 0 else (True, False)):
            d0, a0 = metric("k3_spec_draft_tokens_total"), metric("k3_spec_accepted_tokens_total")
            agg, tokens, wall, errs = run(lines, spec)
            if spec:
                fed += metric("k3_spec_draft_tokens_total") - d0
                kept += metric("k3_spec_accepted_tokens_total") - a0
            tps[spec].append(agg)
            print(json.dumps({"file": f, "round": r, "spec": spec, "streams": N, "tokens": tokens,
                              "wall_s": round(wall, 3), "agg_tps": round(agg, 2),
                              "errors": errs[:3]}), file=sys.stderr)
    p, s = statistics.median(tps[False]), statistics.median(tps[True])
    name = f.rsplit("/", 1)[-1].removesuffix(".jsonl")
    print(f"| {name} | {N} | {p:.2f} | {s:.2f} | {s / p if p else 0:.3f} | "
          f"{kept:.0f}/{fed:.0f} |")
