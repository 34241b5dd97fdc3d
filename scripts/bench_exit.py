"""How long a process holding a CUDA context takes to end after os._exit, by what it holds.

Each case runs in a child: CuPy's context, then device memory and page-locked host memory (in blocks, each
touched), then os._exit(0); the child prints the time just before it exits and this script the time its
wait returned. With --free the child frees both pools first (the freeing timed apart); with --hand-off it
hands the driver's teardown to a child of its own first (gpualign.driver.hand_off, as every gpualign command
does at its end; the fork timed apart). Needs a GPU.

  python scripts/bench_exit.py                 # the cases below, two runs each
  python scripts/bench_exit.py --cases 0,0,0 0,500,20
  python scripts/bench_exit.py --hand-off
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

CASES = ("0,0,0", "2000,0,0", "0,500,1", "0,500,20", "0,1500,40", "2000,1500,40")  # device MB, pinned MB, blocks


def child(device_mb: int, pinned_mb: int, blocks: int, free: bool, hand_off: bool) -> None:
    import cupy
    import numpy as np

    cupy.zeros(1)
    keep = []
    if device_mb:
        keep.append(cupy.empty(device_mb << 20, dtype=cupy.uint8))
        keep[-1].fill(1)
    for _ in range(blocks):
        size = (pinned_mb << 20) // blocks
        mem = cupy.cuda.alloc_pinned_memory(size)
        np.frombuffer(mem, np.uint8, size)[::4096] = 1
        keep.append(mem)
    cupy.cuda.runtime.deviceSynchronize()
    freed = ""
    if free:
        t = time.time()
        del keep
        cupy.get_default_memory_pool().free_all_blocks()
        cupy.get_default_pinned_memory_pool().free_all_blocks()
        freed = f"freed in {time.time() - t:.3f} s "
    if hand_off:
        sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        from gpualign import driver

        t = time.time()
        took = driver.hand_off()
        freed += f"{'handed off' if took else 'not handed off'} in {time.time() - t:.3f} s "
    sys.stdout.write(f"{freed}{time.time():.6f}\n")
    sys.stdout.flush()
    os._exit(0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", nargs="+", default=list(CASES), help="device MB,pinned MB,blocks")
    ap.add_argument("--free", action="store_true", help="free the pools before exiting")
    ap.add_argument("--hand-off", action="store_true", help="hand the teardown to a child first (driver.hand_off)")
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--child", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        child(*map(int, a.child.split(",")), a.free, a.hand_off)
    print("device MB, pinned MB, blocks: seconds from os._exit to the wait's return")
    for case in a.cases:
        for _ in range(a.runs):
            flags = [f for f, on in (("--free", a.free), ("--hand-off", a.hand_off)) if on]
            p = subprocess.Popen([sys.executable, __file__, "--child", case, *flags], stdout=subprocess.PIPE, text=True)
            line = p.stdout.readline()
            p.wait()
            gone = time.time()
            if p.returncode:
                raise SystemExit(f"case {case}: the child failed (exit {p.returncode})")
            freed = line.strip().rsplit(" ", 1)[0] + ", " if " " in line.strip() else ""
            print(f"{case}: {freed}exit {gone - float(line.split()[-1]):.3f} s")


if __name__ == "__main__":
    main()
