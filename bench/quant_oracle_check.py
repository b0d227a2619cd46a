#!/usr/bin/python3
"""quant_oracle_check.py — is a `k3 quantize` output exactly what k3 computes on?

Dequantizes every MLX-affine Linear of QUANT_DIR with numpy (spec §4.2.2),
writes that f32 "twin" next to a copy of the config without the quantization
block, runs the float64 oracle on it and compares with `k3 logits` on the
quantized checkpoint itself. A match to ~1e-5 means quantize (layout, names,
packing) and the loader agree; the distance to the unquantized model is then
pure quantization error.

    /usr/bin/python3 bench/quant_oracle_check.py QUANT_DIR [K3] [TOKENS]

Needs numpy and /work/shared/oracle (or ../shared/oracle); not part of the suite.
"""
import json, os, subprocess, sys, tempfile
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ORACLE = os.path.join(HERE, "../../shared/oracle")
sys.path.insert(0, ORACLE)
from k3_ref import load_checkpoint, write_safetensors  # noqa: E402


def unpack(words, bits, cols):
    b = np.unpackbits(words.view(np.uint8), axis=-1, bitorder="little")
    b = b.reshape(words.shape[:-1] + (cols, bits))
    return (b * (1 << np.arange(bits))).sum(-1)


def main():
    qdir = sys.argv[1]
    k3 = sys.argv[2] if len(sys.argv) > 2 else os.path.join(HERE, "../build/k3")
    tokens = sys.argv[3] if len(sys.argv) > 3 else ",".join(str(i) for i in range(1, 17))
    cfg, raw = load_checkpoint(qdir)
    quant = cfg.get("quantization", {})
    out = {}
    for k, t in raw.items():
        if k.endswith((".scales", ".biases")):
            continue
        m = k[: -len(".weight")] if k.endswith(".weight") else None
        if m and m + ".scales" in raw:
            q = quant.get(m, {})
            if q.get("mode", quant.get("mode")) == "mxfp4" or m + ".biases" not in raw:
                raise SystemExit(f"{m}: mxfp4 modules are not handled by this check")
            s = raw[m + ".scales"].get().astype(np.float64)
            b = raw[m + ".biases"].get().astype(np.float64)
            w = t.raw()
            bits, gs = q.get("bits", quant["bits"]), q.get("group_size", quant["group_size"])
            cols = s.shape[-1] * gs
            c = unpack(w, bits, cols).reshape(w.shape[:-1] + (cols // gs, gs))
            out[k] = ("F32", (c * s[..., None] + b[..., None]).reshape(w.shape[:-1] + (cols,)).astype(np.float32))
        else:
            out[k] = ("F32", t.get().astype(np.float32))
    with tempfile.TemporaryDirectory() as d:
        c2 = {k: v for k, v in cfg.items() if k not in ("quantization", "quantization_config")}
        with open(os.path.join(d, "config.json"), "w") as f:
            json.dump(c2, f)
        write_safetensors(os.path.join(d, "model.safetensors"), out)
        subprocess.check_call([sys.executable, os.path.join(ORACLE, "k3_ref.py"), d, "--tokens", tokens,
                               "--out", os.path.join(d, "twin.f32")])
        subprocess.check_call([k3, "logits", "--model", qdir, "--tokens", tokens, "--out",
                               os.path.join(d, "k3.f32")])
        a = np.fromfile(os.path.join(d, "k3.f32"), np.float32).astype(np.float64)
        b = np.fromfile(os.path.join(d, "twin.f32"), np.float32).astype(np.float64)
    V = a.size // len(tokens.split(","))
    agree = (a.reshape(-1, V).argmax(1) == b.reshape(-1, V).argmax(1)).mean()
    print(f"k3 on {qdir} vs oracle on its dequantized twin: max |diff| {np.abs(a - b).max():.3g}, "
          f"argmax agreement {agree:.3f}")


if __name__ == "__main__":
    main()
