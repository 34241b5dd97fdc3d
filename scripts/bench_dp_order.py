#!/usr/bin/env python3
"""gpu-dp's dp_fill launch order (gpu_dp.LONGEST_FIRST) against ascending, on the GPU: bench_dp's protein set and
two sets of five length classes (protein 50-350 aa, DNA 40 x 80 to 350 x 360), scores only and with CIGARs; the
engine's time (bench_dp.engine_time, median of 5), the two orders alternated twice. docs/benchmarks.md quotes it."""

import os
import statistics
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_dp as B  # noqa: E402
from gpualign.engines import gpu_dp  # noqa: E402


def varied(name: str, shapes: list, n_each: int, seed: int = 3) -> tuple[list, list]:
    """n_each pairs of each (query, target) length of shapes, bench_dp's set `name` otherwise, shuffled."""
    qs, ts = [], []
    for i, (ql, tl) in enumerate(shapes):
        q, t = B.simulate(dict(B.SETS[name], qlen=ql, tlen=tl), n_each, seed + i)
        qs += q
        ts += t
    order = np.random.default_rng(seed).permutation(len(qs))
    return [qs[i] for i in order], [ts[i] for i in order]


def main() -> None:
    sets = {
        "protein uniform": ("protein", B.simulate(B.SETS["protein"], 100_000)),
        "protein varied": ("protein", varied("protein", [(50, 60), (100, 120), (175, 200), (250, 260), (350, 350)],
                                             20_000)),
        "dna varied": ("dna", varied("dna", [(40, 80), (80, 160), (150, 300), (250, 400), (350, 360)], 200_000)),
    }
    for label, (name, (qs, ts)) in sets.items():
        cells = sum(len(q) * len(t) for q, t in zip(qs, ts))
        for trace in (False, True):
            row = []
            for first in (True, False, True, False):
                gpu_dp.LONGEST_FIRST = first
                secs, _ = B.engine_time(B.SETS[name], qs, ts, 16, trace, device="gpu", repeats=5)
                row.append((first, statistics.median(secs)))
            txt = "  ".join(f"{'desc' if f else 'asc'} {s * 1e3:.1f} ms ({cells / s / 1e9:.0f} GCUPS)" for f, s in row)
            print(f"{label:16} {'cigar' if trace else 'score'}  {txt}", flush=True)


if __name__ == "__main__":
    main()
