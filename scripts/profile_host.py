#!/usr/bin/env python3
"""The host side alone of `gpualign pairs` or `gpualign paf`: the real readers, pipeline and writers, with an
engine that answers at once (a single '=' run per pair: no alignment, the output is not meaningful). Its
wall time is the ceiling the GPU engines cannot beat end to end; the stage seconds and a profile show
where it goes.

  python scripts/profile_host.py pairs A.fa B.fa [--profile]
  python scripts/profile_host.py paf cands.paf reads.fa ref.fa [--profile]
"""

from __future__ import annotations

import argparse
import atexit
import cProfile
import os
import pstats
import shutil
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class Instant:
    """Accepts every pair; returns score 0 and the CIGAR '<query length>=' at once."""

    name = "gpu-edit"

    def accepts(self, batch, cfg):
        return np.ones(batch.n, dtype=bool)

    def available(self):
        return True

    def align(self, batch, cfg):
        from gpualign.records import AlignBatch

        n = batch.n
        res = AlignBatch(np.zeros(n, np.int32), np.zeros(n, np.uint8), np.zeros(n, np.uint8),
                         (batch.q_len.astype(np.uint32) << 4) | 7, np.arange(n, dtype=np.int64),
                         np.ones(n, np.int64), True)
        if cfg.ends_free_target:
            res.t_start, res.t_end = np.zeros(n, np.int64), batch.q_len.astype(np.int64)
        return res


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("command", choices=("pairs", "paf"))
    ap.add_argument("inputs", nargs="+")
    ap.add_argument("--profile", action="store_true", help="also print the top functions (cProfile)")
    ap.add_argument("-t", "--threads", type=int, default=os.cpu_count(), help="as gpualign's -t (text formatting workers)")
    a = ap.parse_args()
    from gpualign import pipeline, realign
    from gpualign.config import AlignConfig

    tmp = tempfile.mkdtemp(prefix="gpualign-host-")
    atexit.register(shutil.rmtree, tmp, True)  # the output is thrown away: nothing left in /tmp
    out = os.path.join(tmp, "out.paf")
    pipeline.select_engines = realign.select_engines = lambda cfg: ([Instant()], "instant engine")
    if a.command == "pairs":
        def run():
            return pipeline.run_pairs(*a.inputs[:2], out, "paf", AlignConfig(device="cpu", threads=a.threads),
                                      "profile_host")
    else:
        def run():
            return realign.run_paf(*a.inputs[:3], out, "paf", AlignConfig(device="cpu", metric="affine", threads=a.threads),
                                   "profile_host")
    t0 = time.perf_counter()
    s = run()
    wall = time.perf_counter() - t0
    print(f"{a.command}: {s.pairs} pairs, wall {wall:.3f} s ({s.pairs / wall:,.0f} pairs/s), busy seconds per stage "
          + ", ".join(f"{k} {v:.3f}" for k, v in s.stage_seconds.items()))
    if a.profile:
        prof = cProfile.Profile()
        prof.runcall(run)
        pstats.Stats(prof).sort_stats("tottime").print_stats(15)


if __name__ == "__main__":
    main()
