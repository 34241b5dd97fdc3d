"""The anchored bound's 16-mer anchors of a long pair on the GPU: this tree's kernels (engines/gpu_anchors.py)
against an older tree's anchors (`git archive REV gpualign kernels | tar -x -C DIR`), same strings, three
calls each (the first pays any compiling), and whether both give the same anchors.

    python scripts/bench_anchors.py --old prof/old --mbp 48 --rate 0.08
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def timed(fn, reps: int = 3):
    import cupy

    out, secs = None, []
    for _ in range(reps):
        cupy.cuda.Device().synchronize()
        t0 = time.perf_counter()
        out = fn()
        cupy.cuda.Device().synchronize()
        secs.append(time.perf_counter() - t0)
    return out, secs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--old", help="an older tree (its long_bound.anchors(q, t, cupy))")
    ap.add_argument("--mbp", type=float, default=48.0)
    ap.add_argument("--rate", type=float, default=0.08, help="substitutions (default 0.08)")
    a = ap.parse_args()
    rng = np.random.default_rng(1)
    n = int(a.mbp * 1e6)
    q = np.frombuffer(b"ACGT", np.uint8)[rng.integers(0, 4, n)]
    t = q.copy()
    pos = rng.choice(n, int(a.rate * n), replace=False)
    t[pos] = np.frombuffer(b"ACGT", np.uint8)[rng.integers(0, 4, len(pos))]
    sys.path.insert(0, ROOT)
    from gpualign import long_bound
    from gpualign.engines import gpu_anchors

    new, new_s = timed(lambda: long_bound.anchors(q, t, gpu_anchors.anchors))
    print(f"{a.mbp:g} Mbp, {a.rate:.0%} substitutions: {len(new[0]):,} anchors; this tree "
          + ", ".join(f"{s:.3f}" for s in new_s) + " s")
    if a.old:
        import cupy

        sys.path.insert(0, os.path.abspath(a.old))
        for name in [k for k in sys.modules if k.startswith("gpualign")]:
            del sys.modules[name]
        old_lb = importlib.import_module("gpualign.long_bound")
        old, old_s = timed(lambda: old_lb.anchors(q, t, cupy))
        same = all(np.array_equal(x, y) for x, y in zip(new, old))
        print(f"older tree {', '.join(f'{s:.3f}' for s in old_s)} s; same anchors: {same}")


if __name__ == "__main__":
    main()
