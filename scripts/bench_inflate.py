#!/usr/bin/env python3
"""Inflating gzip and bgzip inputs, as the device reader does (readinto 8 MB pieces), one file and two at
once (pairs reads two): ISA-L's threaded stream (fastx_fast.open_gz, what plain gzip uses), rapidgzip with N
threads (bgzf.ParallelInflated, what a whole bgzip file uses; on plain gzip it decodes speculatively), and
what bgzf.open_inflated picks. Rates are inflated GB/s.

  python scripts/bench_inflate.py reads.fq.gz reads.bgz.fq.gz --threads 1,2,4,8,16
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from gpualign.io import bgzf  # noqa: E402
from gpualign.io.fastx_fast import open_gz  # noqa: E402

PIECE = 8 << 20


def drain(fh) -> int:
    buf, n = bytearray(PIECE), 0
    with fh:
        while True:
            k = fh.readinto(buf)
            if not k:
                return n
            n += k


def timed(opener, paths: list) -> tuple[float, int]:
    """Seconds to inflate every path at once (a thread each), and the bytes inflated."""
    got: list = []
    threads = [threading.Thread(target=lambda p=p: got.append(drain(opener(p)))) for p in paths]
    t = time.perf_counter()
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    return time.perf_counter() - t, sum(got)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("files", nargs="+", help="gzip or bgzip files")
    ap.add_argument("--threads", default="1,2,4,8,16", help="rapidgzip threads to try")
    ap.add_argument("--repeats", type=int, default=3, help="best of this many")
    a = ap.parse_args()
    print("file\tinflater\tfiles at once\tseconds\tGB/s")
    for path in a.files:
        openers = [("open_gz", open_gz)] + [
            (f"rapidgzip x{t}", lambda p, t=int(t): bgzf.ParallelInflated(p, t)) for t in a.threads.split(",")]
        openers.append((f"open_inflated ({'rapidgzip' if bgzf.whole_bgzf(path) else 'open_gz'})",
                        bgzf.open_inflated))
        for name, opener in openers:
            for k in (1, 2):
                dt, n = min(timed(opener, [path] * k) for _ in range(a.repeats))
                print(f"{os.path.basename(path)}\t{name}\t{k}\t{dt:.3f}\t{n / dt / 1e9:.2f}", flush=True)


if __name__ == "__main__":
    main()
