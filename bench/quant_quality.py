#!/usr/bin/python3
"""quant_quality.py REF VOCAB NAME=LOGITS[,ROUTES] ... -- one table row per model: relative RMS
logit error, worst position, max abs error / max abs oracle and argmax agreement against
REF.f64 (bench/oracle_routes.py), and with ROUTES (a K3_ROUTES_FILE of `k3 logits --mode
decode`: one line per token and MoE layer) how many top-k expert choices differ from
REF.routes.json."""
import json, sys
import numpy as np

ref_p, V = sys.argv[1], int(sys.argv[2])
ref = np.fromfile(ref_p + ".f64", dtype="<f8").reshape(-1, V)
T = ref.shape[0]
oroutes = json.load(open(ref_p + ".routes.json"))
nmoe = len(oroutes)
print("| model | rel. RMS logit error | worst position | max abs err / max abs oracle | argmax | top-k choices changed |")
print("|---|---|---|---|---|---|")
for arg in sys.argv[3:]:
    name, files = arg.split("=", 1)
    lf, rf = (files.split(",") + [None])[:2]
    a = np.fromfile(lf, dtype="<f4").astype(np.float64).reshape(-1, V)
    assert a.shape == ref.shape, (lf, a.shape)
    d = a - ref
    rel = np.sqrt((d ** 2).mean()) / np.sqrt((ref ** 2).mean())
    worst = max(np.linalg.norm(d[t]) / np.linalg.norm(ref[t]) for t in range(T))
    mx = np.abs(d).max() / np.abs(ref).max()
    am = int((a.argmax(1) == ref.argmax(1)).sum())
    ch = "n/a"
    if rf:
        rr = [set(map(int, l.split(":")[1].split())) for l in open(rf).read().strip().splitlines()]
        assert len(rr) == T * nmoe, (rf, len(rr))
        diff = [len(set(oroutes[l][t]) - rr[t * nmoe + l]) for t in range(T) for l in range(nmoe)]
        k = len(oroutes[0][0])
        ch = f"{sum(diff)} of {T * nmoe * k} ({sum(x > 0 for x in diff)} of {T * nmoe} routings)"
    print(f"| {name} | {rel:.3g} | {worst:.3g} | {mx:.3g} | {am}/{T} | {ch} |")
