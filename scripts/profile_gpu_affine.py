#!/usr/bin/env python3
"""Affine WFA engine alone on in-memory batches (device machine): pairs/s per setting, CIGAR and
distance-only (each with and without the estimated-cap level), and the pairs each level took.

  python scripts/profile_gpu_affine.py 1000000x1000x0.10 10000x10000x0.10 --batch-bases 67108864
"""

import argparse
import itertools
import os
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import cupy  # noqa: E402
import numpy as np  # noqa: E402
from simulate import simulate  # noqa: E402

from gpualign.config import AlignConfig, Penalties  # noqa: E402
from gpualign.engines.gpu_affine import GpuAffineEngine  # noqa: E402
from gpualign.records import PairBatch  # noqa: E402


ESTIMATE = {"on": (True,), "off": (False,), "both": (False, True)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("sets", nargs="+", help="NxLENxRATE[xlong]")
    ap.add_argument("--batch-bases", type=int, default=1 << 26)
    ap.add_argument("--penalties", default="4,6,2")
    ap.add_argument("--metric", default="affine")
    ap.add_argument("--threads", type=int, help="override the plan's block size")
    ap.add_argument("--per-sm", type=int, help="override the plan's resident blocks per SM")
    ap.add_argument("--min-blocks", type=int, help="register cap: WFA_AFFINE_MIN_BLOCKS")
    ap.add_argument("--timing", action="store_true", help="kernel seconds (synchronises after each kernel)")
    ap.add_argument("--estimate", default="both", choices=("on", "off", "both"),
                    help="the estimated-cap level (gpu_affine module doc): with, without, or a row each")
    a = ap.parse_args()
    x, o, e = map(int, a.penalties.split(","))
    eng = GpuAffineEngine()
    eng.tune = {k: v for k, v in (("threads", a.threads), ("per_sm", a.per_sm)) if v}
    eng.tune["timing"] = a.timing
    if a.min_blocks:
        eng.tune["min_blocks"] = a.min_blocks
    print(f"{'set':>22} {'mode':>8} {'seconds':>8} {'pairs/s':>10}  levels")
    for spec in a.sets:
        parts = spec.split("x")
        n, ln, rate = int(parts[0]), int(parts[1]), float(parts[2])
        q, t = simulate(n, ln, rate, seed=5, profile=parts[3] if len(parts) > 3 else "uniform")
        per = max(1, a.batch_bases // (2 * ln))
        batches = [PairBatch.from_sequences(q[i:i + per], t[i:i + per]) for i in range(0, n, per)]
        for do, est in itertools.product((False, True), ESTIMATE[a.estimate]):
            eng.tune["estimate"] = est
            cfg = AlignConfig(metric=a.metric, penalties=Penalties(x, o, e), distance_only=do)
            eng.align(batches[0], cfg)  # warm: compile, pinned staging and device pool at full size
            cupy.cuda.Device().synchronize()
            t0 = time.perf_counter()
            counts = {}
            eng.timings = {}
            for b in batches:
                eng.align(b, cfg)
                for k, v in eng.last_counts.items():
                    counts[k] = counts.get(k, 0) + v
            dt = time.perf_counter() - t0
            mode = ("dist" if do else "cigar") + ("+E" if est else "")
            print(f"{spec:>22} {mode:>8} {dt:8.3f} {n / dt:10,.0f}  {counts}"
                  + "".join(f" {k}={v:.3f}s" for k, v in eng.timings.items()), flush=True)


if __name__ == "__main__":
    main()
