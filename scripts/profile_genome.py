#!/usr/bin/env python3
"""One run of the long-string kernel on a simulated pair, for profilers (ncu) and quick timing.

  python scripts/profile_genome.py --n 2000000 --rate 0.10 [--kernel tiled|step|bp] [--no-bound] [--band 64]
  python scripts/profile_genome.py --real A.fa.gz B.fa.gz --kernel bp --guess --defines BP_MIN_BLOCKS=8
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
    ap.add_argument("--real", nargs=2, metavar=("A", "B"), help="the first records of two FASTA files instead")
    ap.add_argument("--guess", action="store_true", help="bp: the band gpualign genome guesses (no bound)")
    ap.add_argument("--defines", default="", help="bp: comma list of kernel defines (NAME=VALUE)")
    ap.add_argument("--warps-per-sm", type=int, help="bp: strips in flight per SM at most")
    ap.add_argument("--bits", type=int, choices=(2, 8), help="tiled: 2-bit codes or bytes (default: auto)")
    a = ap.parse_args()
    from gpualign.config import AlignConfig
    from gpualign.engines import gpu_long
    from gpualign.genome import _pairs, gpu_bound, kernel_options

    if a.real:
        _, _, q, t = next(_pairs(*a.real, None, None))
        a.n, a.rate = len(q), float("nan")
    else:
        q, t = simulate(1, a.n, a.rate, seed=5)
        q, t = np.frombuffer(q[0], np.uint8), np.frombuffer(t[0], np.uint8)
    gpu_long.BP_DEFINES = tuple(x for x in a.defines.split(",") if x)
    if a.warps_per_sm:
        gpu_long.BP_WARPS_PER_SM = a.warps_per_sm
    upper = None if a.no_bound or a.guess else gpu_bound(q, t, AlignConfig(distance_only=True))
    plan = kernel_options(q, t)
    warp = plan.warp_extend if a.warp_extend is None else bool(a.warp_extend)
    guess = plan.band_guess if a.guess else None
    for _ in range(a.repeat):
        if a.kernel == "bp":
            r = gpu_long.bp_distance(q, t, upper=upper, guess=guess)
        else:
            r = gpu_long.distance(q, t, kernel=a.kernel, band=a.band, tile_min=a.tile_min, upper=upper,
                                  warp_extend=warp, bits=a.bits)
        print(f"{a.kernel} {a.defines or '-'} wps={gpu_long.BP_WARPS_PER_SM} n={a.n} rate={a.rate} band={a.band} tile_min={a.tile_min} warp={int(warp)} bits={r.get('bits', '-')} d={r['distance']} upper={upper} cells={r['cells']:.3g} "
              f"s={r['seconds']:.4f} cells/s={r['cells'] / r['seconds']:.3g}")


if __name__ == "__main__":
    main()
