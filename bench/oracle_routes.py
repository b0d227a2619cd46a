#!/usr/bin/python3
"""oracle_routes.py MODEL_DIR TOKENS OUT -- the float64 oracle (../shared/oracle/k3_ref.py) on
comma-separated TOKENS, plus every MoE call's top-k expert choices: writes OUT.f32 / OUT.f64
(logits [T, vocab]) and OUT.routes.json ([MoE call][token][k]). Used for the quantize quality
table in bench/RESULTS.md (compare with bench/quant_quality.py)."""
import json, os, sys
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.environ.get("K3_ORACLE_DIR", os.path.join(HERE, "..", "..", "shared", "oracle")))
import k3_ref  # noqa: E402

routes = []
select = k3_ref.select_experts


def recorded(*a, **k):
    inds, w = select(*a, **k)
    routes.append(inds.tolist())
    return inds, w


k3_ref.select_experts = recorded
model, toks, out = sys.argv[1], [int(t) for t in sys.argv[2].split(",")], sys.argv[3]
lg = k3_ref.K3(model).forward(toks)
lg.astype("<f4").tofile(out + ".f32")
lg.astype("<f8").tofile(out + ".f64")
json.dump(routes, open(out + ".routes.json", "w"))
print("logits", lg.shape, "argmax", lg.argmax(1).tolist(), "MoE calls", len(routes))
