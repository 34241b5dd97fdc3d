#!/usr/bin/env python3
"""One run of the long-string kernel on a simulated pair, for profilers (ncu) and quick timing.

  python scripts/profile_genome.py --n 2000000 --rate 0.10 [--kernel tiled|step|bp] [--no-bound] [--band 64]
  ncu -k regex:wfa_long_tiled --section WarpStateStats python scripts/profile_genome.py --n 1000000
"""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from simulate import simulate  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=2_000_000)
    ap.add_argument("--rate", type=float, default=0.10)
    ap.add_argument("--kernel", default="tiled", choices=("tiled", "step", "bp"))
    ap.add_argument("--band", type=int, default=64)
    ap.add_argument("--tile-min", type=int, default=128)
    ap.add_argument("--no-bound", action="store_true")
    ap.add_argument("--warp-extend", type=int, choices=(0, 1), help="default: as gpualign genome chooses")
    ap.add_argument("--repeat", type=int, default=1)
    a = ap.parse_args()
    from gpualign.config import AlignConfig
    from gpualign.engines import gpu_long
    from gpualign.genome import gpu_bound, kernel_options

    q, t = simulate(1, a.n, a.rate, seed=5)
    q, t = np.frombuffer(q[0], np.uint8), np.frombuffer(t[0], np.uint8)
    upper = None if a.no_bound else gpu_bound(q, t, AlignConfig(distance_only=True))
    warp = kernel_options(q, t).warp_extend if a.warp_extend is None else bool(a.warp_extend)
    for _ in range(a.repeat):
        if a.kernel == "bp":
            r = gpu_long.bp_distance(q, t, upper=upper)
        else:
            r = gpu_long.distance(q, t, kernel=a.kernel, band=a.band, tile_min=a.tile_min, upper=upper,
                                  warp_extend=warp)
        print(f"n={a.n} rate={a.rate} band={a.band} tile_min={a.tile_min} warp={int(warp)} d={r['distance']} upper={upper} cells={r['cells']:.3g} "
              f"s={r['seconds']:.4f} cells/s={r['cells'] / r['seconds']:.3g}")


if __name__ == "__main__":
    main()
