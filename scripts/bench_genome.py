#!/usr/bin/env python3
"""Benchmark `gpualign genome` (exact edit distance of long strings) against WFA2-lib and edlib.

Sets (generated with numpy, seeded, as in the long-string paper's generator: uniform edits):
  G1 5 Mbp at 1%, G2 5 Mbp at 10%, G3 48 Mbp at 8.4% (chr21-like), G4 3.2 Mbp at 47%,
plus a real pair given with --real A.fa B.fa (e.g. the two E. coli genomes). The GPU distance is
timed (upload included) with the dynamic diamond and, with --check-plain, checked against the
plain kernel; WFA2-lib and edlib run in subprocesses that are stopped after --cpu-timeout seconds.

  python scripts/bench_genome.py --sets G1,G2,G4 --real a.fa.gz b.fa.gz --cpu-sets G1
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from simulate import simulate  # noqa: E402

SETS = {"G1": (5_000_000, 0.01), "G2": (5_000_000, 0.10), "G3": (48_000_000, 0.084), "G4": (3_200_000, 0.47)}


def _cpu(method, q, t, conn):
    from gpualign.engines import cpu_long

    t0 = time.perf_counter()
    d, _ = cpu_long.distance(q, t, method)
    conn.send((d, time.perf_counter() - t0))


def cpu_run(method, q, t, timeout):
    a, b = mp.Pipe()
    p = mp.get_context("fork").Process(target=_cpu, args=(method, q, t, b))
    p.start()
    p.join(timeout)
    if p.is_alive():
        p.kill()
        return None, None
    return a.recv()


def load_real(path):
    import pysam

    with pysam.FastxFile(path) as fh:
        return next(iter(fh)).sequence.upper().encode()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sets", default="G1,G2,G4")
    ap.add_argument("--real", nargs=2, metavar=("A", "B"))
    ap.add_argument("--cpu-sets", default="G1", help="sets on which WFA2-lib and edlib also run")
    ap.add_argument("--cpu-timeout", type=float, default=120)
    ap.add_argument("--check-plain", default="G1", help="sets also run with the plain (unpruned) kernel")
    ap.add_argument("--json")
    a = ap.parse_args()
    from gpualign.engines import gpu_long

    jobs = []
    for name in [s for s in a.sets.split(",") if s]:
        n, rate = SETS[name]
        t0 = time.perf_counter()
        q, t = simulate(1, n, rate, seed=21)
        jobs.append((name, q[0], t[0]))
        print(f"# generated {name} in {time.perf_counter() - t0:.1f}s", file=sys.stderr)
    if a.real:
        jobs.append(("real:" + os.path.basename(a.real[0]).split(".")[0], load_real(a.real[0]), load_real(a.real[1])))
    warm = np.frombuffer(b"ACGT" * 1000, np.uint8)
    gpu_long.distance(warm, warm[::-1].copy())  # compile + warm up
    rows = []
    for name, q, t in jobs:
        row = {"set": name, "n": len(q), "m": len(t)}
        r = gpu_long.distance(np.frombuffer(q, np.uint8), np.frombuffer(t, np.uint8))
        row.update(gpu_s=r["seconds"], distance=r["distance"], cells=r["cells"])
        if name in a.check_plain.split(","):
            p = gpu_long.distance(np.frombuffer(q, np.uint8), np.frombuffer(t, np.uint8), prune=False)
            row.update(plain_s=p["seconds"], plain_distance=p["distance"], plain_cells=p["cells"])
            assert p["distance"] == r["distance"], "pruned and plain kernels disagree"
        if name in a.cpu_sets.split(","):
            for method in ("wfa", "edlib"):
                d, s = cpu_run(method, q, t, a.cpu_timeout)
                row[f"{method}_s"] = s
                if d is not None:
                    assert d == r["distance"], f"{method} gives {d}, GPU {r['distance']}"
        rows.append(row)
        print(json.dumps(row), file=sys.stderr, flush=True)
        if a.json:
            with open(a.json, "a") as fh:
                fh.write(json.dumps(row) + "\n")
    print("set\tn\tm\tdistance\tgpu_s\tcells/s\tplain_s\twfa_s\tedlib_s")
    f = lambda v: f"{v:.3f}" if isinstance(v, float) else "-"  # noqa: E731
    for r in rows:
        print(f"{r['set']}\t{r['n']}\t{r['m']}\t{r['distance']}\t{r['gpu_s']:.3f}\t{r['cells'] / r['gpu_s']:.3g}\t"
              f"{f(r.get('plain_s'))}\t{f(r.get('wfa_s'))}\t{f(r.get('edlib_s'))}")


if __name__ == "__main__":
    main()
