#!/usr/bin/env python3
"""`gpualign paf`'s stages alone, then together, in one process (the CLI's defaults: affine 4/6/2,
ends-free, pad 100, batches of 2^27 bases).

Alone: read (every batch built and kept, in pageable memory as run_paf makes them),
align (the batches one after another, each upload started first), write (PAF to memory). Together: two
whole `run_paf` runs, with their stages' busy seconds. Use it to see which stage bounds a run.

  python scripts/profile_paf.py cands.paf reads.fa ref.fa --device gpu [--readers N] [--batch-bases N]
"""

from __future__ import annotations

import argparse
import atexit
import io
import os
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from gpualign import realign, route  # noqa: E402
from gpualign.config import AlignConfig, Penalties  # noqa: E402
from gpualign.engines import select_engines  # noqa: E402
from gpualign.io import paf as P  # noqa: E402
from gpualign.output.realigned import RealignedPaf  # noqa: E402
from gpualign.realign_readers import Readers, worker_count  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("paf")
    ap.add_argument("query")
    ap.add_argument("target")
    ap.add_argument("--device", default="gpu")
    ap.add_argument("--readers", type=int, default=None, help="worker processes (default: as run_paf chooses)")
    ap.add_argument("--batch-bases", type=int, default=1 << 27)
    a = ap.parse_args()
    base = AlignConfig(metric="affine", penalties=Penalties(4, 6, 2), device=a.device, batch_bases=a.batch_bases)
    cfg = base.with_(ends_free_target=True).validate()
    queries, targets = P.Queries(a.query), P.Targets(a.target)
    workers = worker_count(a.paf, queries.fa is not None, a.readers)
    pool = Readers(workers, a.query, a.target, "ends-free", 100, False, False) if workers else None
    chain, notice = select_engines(cfg)
    print(notice, f"| reader processes: {workers}", file=sys.stderr)
    for e in reversed(chain):  # as pipeline.running: the CPU engine's processes first
        getattr(e, "start", lambda: None)()
    getattr(chain[0], "warm", lambda c: None)(cfg)

    t0 = time.perf_counter()
    if pool is not None:
        batches = list(realign._numbered(pool.item_lists(a.paf, cfg, [], print)))
    else:
        items = realign._candidates(a.paf, queries, targets, "ends-free", 100, False, [], print)
        batches = list(realign._batches(items, cfg))
    t_read = time.perf_counter() - t0
    t0 = time.perf_counter()
    results = []
    for b in batches:
        route.prefetch(b, chain, cfg)
        results.append(route.run_chain(b, chain, cfg)[0])
    t_align = time.perf_counter() - t0  # results are on the host: every kernel has finished
    writer = RealignedPaf(io.BytesIO())
    t0 = time.perf_counter()
    for b, r in zip(batches, results):
        writer.write(b, r)
    t_write = time.perf_counter() - t0
    for e in chain:
        getattr(e, "close", lambda: None)()
    if pool is not None:
        pool.close()
    n = sum(b.n for b in batches)
    print(f"{n} candidates in {len(batches)} batches")
    print(f"alone: read {t_read:.2f} s, align {t_align:.2f} s, write {t_write:.2f} s (sum {t_read + t_align + t_write:.2f})")
    tmp = tempfile.mkdtemp(prefix="gpualign-profile-paf-")
    atexit.register(shutil.rmtree, tmp, True)  # the output is thrown away: nothing left in /tmp
    out = os.path.join(tmp, "out.paf")
    for run in range(2):
        t0 = time.perf_counter()
        s = realign.run_paf(a.paf, a.query, a.target, out, "paf", base, "profile_paf", readers=a.readers)
        busy = " / ".join(f"{s.stage_seconds[k]:.2f}" for k in ("read", "align", "write"))
        print(f"together, run {run + 1}: wall {time.perf_counter() - t0:.2f} s, busy read / align / write {busy} s, "
              f"routes {dict(sorted(s.counts.items()))}")


if __name__ == "__main__":
    main()
