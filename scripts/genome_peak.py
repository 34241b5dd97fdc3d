#!/usr/bin/env python3
"""Where `gpualign genome`'s device memory peak is, stage by stage (GPU): the alignment path of one long pair
(genome_path.gpu_path, as `gpualign genome A B -o out.paf` runs it) with the CuPy pool's size read, then its
cached blocks released, after the anchored bound, after the distance (the first pass), after each Hirschberg
level's splits and after the leaves; for each ring cap given (gpu_long.BP_RING_BYTES and genome_path.SPLIT_RINGS:
'default' = as shipped, 'none' = a quarter of the free memory, else GiB), --repeats runs (the first on a fresh
machine compiles the kernels).

  python scripts/genome_peak.py W3110.fa.gz EC590.fa.gz --caps none,4,2,1
  python scripts/genome_peak.py W3110.fa.gz EC590.fa.gz --caps none --leaf-caps none,4,3,2,1 --repeats 3

--leaf-caps: then runs as `gpualign genome` does (no stage's blocks released) per cap on the leaves' workspace
(genome_path.LEAF_WORKSPACE), the pool's high-water mark read every millisecond (bench_genome.HighWater).
Prints per run the path's seconds (first pass / split levels / leaves, as gpu_path counts them; the reads of the
pool add a synchronisation per stage) and the stage of the peak, then each stage's size of the last run."""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("query")
    ap.add_argument("target")
    ap.add_argument("--caps", default="default", help="ring caps, comma-separated: default (as shipped), none or "
                    "GiB (e.g. default,none,4,2,1)")
    ap.add_argument("--leaf-caps", default="", help="then, per ring cap, leaf workspace caps (genome_path."
                    "LEAF_WORKSPACE): none or GiB, the pool's peak polled over whole runs (no release)")
    ap.add_argument("--repeats", type=int, default=2)
    a = ap.parse_args()

    import cupy

    from bench_genome import HighWater, load_real
    from gpualign import genome_path, hirschberg
    from gpualign.config import AlignConfig
    from gpualign.engines import gpu_long
    from gpualign.genome_pair import gpu_bound, kernel_options

    q, t = (np.frombuffer(load_real(p), np.uint8) for p in (a.query, a.target))
    pool = cupy.get_default_memory_pool()
    marks: list = []

    def mark(what: str) -> None:
        cupy.cuda.Device().synchronize()
        marks.append((what, pool.total_bytes() / 2**30))
        pool.free_all_blocks()

    align_path = hirschberg.align_path

    def marked(q, t, pieces, split, leaves, report):
        mark("first pass")

        def level(info):
            mark(f"after {info['level']} splits ({info['pieces']} pieces)")
            report(info)

        def marked_leaves(*args):
            out = leaves(*args)
            mark("leaves")
            return out

        return align_path(q, t, pieces, split, marked_leaves, level)

    plan = kernel_options(q, t)
    shipped = gpu_long.BP_RING_BYTES, genome_path.SPLIT_RINGS
    for cap in a.caps.split(","):
        gpu_long.BP_RING_BYTES, genome_path.SPLIT_RINGS = shipped
        if cap != "default":
            gpu_long.BP_RING_BYTES = None if cap == "none" else int(float(cap) * 2**30)
            genome_path.SPLIT_RINGS = gpu_long.BP_RING_BYTES  # the levels' own cap too
        hirschberg.align_path = marked  # (genome_path looks it up at each call)
        for run in range(a.repeats):
            marks.clear()
            pool.free_all_blocks()
            t0 = time.perf_counter()
            bound = gpu_bound(q, t, AlignConfig(), detail=True) if plan.anchored else None
            mark("bound")
            d, ops, st = genome_path.gpu_path(q, t, AlignConfig(device="gpu"), plan, bound)
            seconds = time.perf_counter() - t0
            if hirschberg.edits(ops) != d:
                raise SystemExit(f"the path costs {hirschberg.edits(ops)}, the distance is {d}")
            top = max(marks, key=lambda x: x[1])
            print(f"cap {cap}: run {run + 1}: distance {d}, {seconds:.3f} s (first {st['first_s']:.3f}, split "
                  f"{st['split_s']:.3f}, leaves {st['leaves_s']:.3f}), peak {top[1]:.2f} GB ({top[0]})", flush=True)
        print("    " + "; ".join(f"{w} {g:.2f} GB" for w, g in marks), flush=True)
        hirschberg.align_path = align_path
        for leaf_cap in [c for c in a.leaf_caps.split(",") if c]:
            genome_path.LEAF_WORKSPACE = None if leaf_cap == "none" else int(float(leaf_cap) * 2**30)
            for run in range(a.repeats):
                pool.free_all_blocks()
                with HighWater(pool) as hw:
                    t0 = time.perf_counter()
                    bound = gpu_bound(q, t, AlignConfig(), detail=True) if plan.anchored else None
                    d, ops, st = genome_path.gpu_path(q, t, AlignConfig(device="gpu"), plan, bound)
                    seconds = time.perf_counter() - t0
                if hirschberg.edits(ops) != d:
                    raise SystemExit(f"the path costs {hirschberg.edits(ops)}, the distance is {d}")
                print(f"cap {cap}, leaf cap {leaf_cap}: run {run + 1}: {seconds:.3f} s (first {st['first_s']:.3f}, "
                      f"split {st['split_s']:.3f}, leaves {st['leaves_s']:.3f}), peak {hw.peak / 2**30:.2f} GB "
                      "(polled)", flush=True)


if __name__ == "__main__":
    main()
