#!/usr/bin/python3
"""generate_oracle.py — expected `k3 generate` token ids from the float64 oracle.

Runs the oracle model (../shared/oracle/k3_ref.py) token by token and picks
each next token with an independent Python port of k3's sampler chain
(src/gen/sampler.h: top-k, top-p, min-p, temperature; greedy at temp 0;
xoshiro256** seeded through splitmix64, one draw per token). Used only by
tests/sh/generate_fixture.sh, and only when python3-numpy is present.

  generate_oracle.py MODEL_DIR --prompt 1,2,3 --max N --stop 999,746
                     [--temp T --top-k K --top-p P --min-p M --seed S]
"""
import argparse, math, os, sys

import numpy as np

M64 = (1 << 64) - 1


class Xoshiro:
    def __init__(self, seed):
        x, self.s = seed & M64, []
        for _ in range(4):
            x = (x + 0x9E3779B97F4A7C15) & M64
            z = x
            z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
            z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
            self.s.append(z ^ (z >> 31))

    @staticmethod
    def rotl(x, k):
        return ((x << k) | (x >> (64 - k))) & M64

    def unit(self):
        s = self.s
        out = (self.rotl((s[1] * 5) & M64, 7) * 9) & M64
        t = (s[1] << 17) & M64
        s[2] ^= s[0]
        s[3] ^= s[1]
        s[1] ^= s[2]
        s[0] ^= s[3]
        s[2] ^= t
        s[3] = self.rotl(s[3], 45)
        return (out >> 11) * 2.0 ** -53


def pick(logits, a, rng):
    """The chain of src/gen/sampler.h, written the plain way (full sorts)."""
    x = logits.astype(np.float32)  # the engine samples from float32 logits
    if a.temp <= 0:
        return int(np.argmax(x))  # first maximum = lowest id
    best = float(x.max())
    floor = best - 40.0 * max(1.0, a.temp)
    keep = [i for i in range(len(x)) if float(x[i]) >= floor]  # id order
    rank = lambda i: (-float(x[i]), i)
    if a.top_k > 0 and len(keep) > a.top_k:
        keep = sorted(sorted(keep, key=rank)[: a.top_k])
    if a.top_p < 1:
        total = sum(math.exp(float(x[i]) - best) for i in keep)  # id order
        cum, n = 0.0, len(keep)
        ranked = sorted(keep, key=rank)
        for r, i in enumerate(ranked):
            cum += math.exp(float(x[i]) - best)
            if cum >= a.top_p * total:
                n = r + 1
                break
        keep = sorted(ranked[:n])
    if a.min_p > 0:
        cut = math.log(a.min_p)
        keep = [i for i in keep if float(x[i]) - best >= cut]
    w = [math.exp((float(x[i]) - best) / a.temp) for i in keep]
    u, cum = rng.unit() * sum(w), 0.0
    for i, wi in zip(keep, w):
        cum += wi
        if u < cum:
            return i
    return keep[-1]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--oracle", default=os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                      "../../../shared/oracle"))
    ap.add_argument("--prompt", required=True)
    ap.add_argument("--max", type=int, required=True)
    ap.add_argument("--stop", default="")
    ap.add_argument("--temp", type=float, default=0.0)
    ap.add_argument("--top-k", type=int, default=0)
    ap.add_argument("--top-p", type=float, default=1.0)
    ap.add_argument("--min-p", type=float, default=0.0)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    a.temp = float(np.float32(a.temp))  # the engine keeps these as float
    a.top_p = float(np.float32(a.top_p))
    a.min_p = float(np.float32(a.min_p))
    sys.path.insert(0, a.oracle)
    from k3_ref import K3

    m = K3(a.model)
    cache = m.new_cache()
    stops = {int(s) for s in a.stop.split(",") if s}
    logits = m.forward([int(t) for t in a.prompt.split(",")], cache)[-1]
    rng, out = Xoshiro(a.seed), []
    for _ in range(a.max):
        t = pick(logits, a, rng)
        out.append(t)
        if t in stops or len(out) == a.max:
            break
        logits = m.forward([t], cache)[-1]
    print(",".join(map(str, out)))


if __name__ == "__main__":
    main()
