#!/usr/bin/env python3
"""Where a GPU pairs engine's time goes, stage by stage (device machine).

Wraps the engine's stages with device synchronisation and wall clocks (inclusive times; the sync
makes the stages serial, so the sum is an upper bound on what overlap could save) and runs the
engine chain (route.run_chain) over in-memory batches as bench_pairs' "engine" column does.

  python scripts/profile_gpu_stages.py -n 1000000 -l 150 -e 0.02 [--distance-only] [--cprofile]
"""

from __future__ import annotations

import argparse
import collections
import cProfile
import os
import pstats
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import cupy  # noqa: E402
from simulate import simulate  # noqa: E402

from gpualign import route  # noqa: E402
from gpualign.config import AlignConfig  # noqa: E402
from gpualign.engines import _device, gpu_affine, gpu_edit, host_allocator, select_engines  # noqa: E402
from gpualign.records import AlignBatch, PairBatch  # noqa: E402

T: collections.Counter = collections.Counter()
CALLS: collections.Counter = collections.Counter()


def wrap(owner, name, label):
    f = getattr(owner, name)

    def timed(*a, **k):
        cupy.cuda.Device().synchronize()
        t0 = time.perf_counter()
        r = f(*a, **k)
        cupy.cuda.Device().synchronize()
        T[label] += time.perf_counter() - t0
        CALLS[label] += 1
        return r

    setattr(owner, name, timed)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-n", type=int, default=1_000_000)
    ap.add_argument("-l", type=int, default=150)
    ap.add_argument("-e", type=float, default=0.02)
    ap.add_argument("--distance-only", action="store_true")
    ap.add_argument("--metric", default="edit", choices=("edit", "affine"))
    ap.add_argument("--profile", default="uniform", choices=("uniform", "long"), help="simulate.py error profile")
    ap.add_argument("--pageable", action="store_true", help="batches in pageable memory (the staging copy path)")
    ap.add_argument("--no-prefetch", action="store_true", help="each batch uploaded when its turn comes")
    ap.add_argument("--cprofile", action="store_true", help="also a host profile of an unwrapped run")
    a = ap.parse_args()
    cfg = AlignConfig(device="gpu", distance_only=a.distance_only, metric=a.metric)
    chain, _ = select_engines(cfg)
    q, t = simulate(a.n, a.l, a.e, seed=3, profile=a.profile)
    step = cfg.batch_pairs
    alloc = None if a.pageable else host_allocator(chain)  # pinned, as the reader makes them for GPU engines
    batches = [PairBatch.from_sequences(q[i:i + step], t[i:i + step], alloc=alloc) for i in range(0, a.n, step)]
    route.run_chain(batches[0], chain, cfg)  # warm: compile, pools

    def run():
        cupy.cuda.Device().synchronize()
        t0 = time.perf_counter()
        for i, b in enumerate(batches):  # as pipeline.stream: the next batch's upload overlaps this one
            if i + 1 < len(batches) and not a.no_prefetch:
                route.prefetch(batches[i + 1], chain, cfg)
            route.run_chain(b, chain, cfg)
        cupy.cuda.Device().synchronize()
        return time.perf_counter() - t0

    plain = run()
    if a.cprofile:
        pr = cProfile.Profile()
        pr.enable()
        run()
        pr.disable()
        pstats.Stats(pr).sort_stats("tottime").print_stats(25)
    for owner, name, label in ((route, "run_chain", "run_chain"), (AlignBatch, "merge", "merge"),
                               (_device.Staging, "upload", "upload (copy+H2D+meta)"),
                               (gpu_edit.GpuEditEngine, "_upload", "upload+pack"),
                               (gpu_edit.GpuEditEngine, "_run_level", "eWFA level (kernel+cigar)"),
                               (gpu_affine.GpuAffineEngine, "_launch", "affine level (kernels)"),
                               (_device.Results, "record", "Results.record (affine)"),
                               (_device.Results, "finish", "Results.finish (affine)"),
                               (_device.SlotResults, "book", "SlotResults.book (eWFA)"),
                               (_device.SlotResults, "finish", "SlotResults.finish (eWFA)")):
        wrap(owner, name, label)
    staged = run()
    print(f"# {a.n} x {a.l} bp {a.e:.2f} {'distance' if a.distance_only else 'cigar'}: "
          f"{a.metric}, {plain:.3f} s = {a.n / plain / 1e6:.2f} M pairs/s unwrapped; {staged:.3f} s with stage syncs")
    for k, v in T.most_common():
        print(f"  {k:24s} {v:8.4f} s  {CALLS[k]:4d} calls")


if __name__ == "__main__":
    main()
