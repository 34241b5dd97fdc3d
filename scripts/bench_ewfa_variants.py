"""Constants as template parameters or as arguments (issue 49): the eWFA kernel of this tree (the level E and
the backtrace flag as arguments, one kernel) against the eight template instances ewfa_align<E, BT> it
replaced (kernels/ewfa.cu of --rev, copied beside it for the run). Same engine, same launches, same batches:
GpuEditEngine.align (upload included) timed, best of --reps; scores and CIGARs compared. Needs a GPU.

    python scripts/bench_ewfa_variants.py            # --rev 9dd2b37: the last tree with the templates
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "scripts"))

from simulate import simulate  # noqa: E402

from gpualign.config import AlignConfig  # noqa: E402
from gpualign.records import PairBatch  # noqa: E402

OLD = "ewfa_templated.cu"


class Instances:
    """The templated module behind the current engine's call: ewfa_align(E, BT, ...) -> ewfa_align<E, BT>(...)."""

    def __init__(self, current, templated):
        self.current, self.templated = current, templated
        self.max_dynamic_shared_size_bytes = 48 * 1024

    def get_function(self, name):
        if name != "ewfa_align":
            return self.current.get_function(name)
        outer = self

        def call(grid, block, args, shared_mem=0):
            e, bt = int(args[0]), bool(args[1])
            fn = outer.templated.get_function(f"ewfa_align<{e}, {'true' if bt else 'false'}>")
            if shared_mem > 48 * 1024:
                fn.max_dynamic_shared_size_bytes = shared_mem
            fn(grid, block, args[2:], shared_mem=shared_mem)

        call.max_dynamic_shared_size_bytes = 0
        return call


def timed(engine, batch, cfg, reps):
    import cupy

    best, out = float("inf"), None
    for _ in range(reps):
        cupy.cuda.Device().synchronize()
        t0 = time.perf_counter()
        out = engine.align(batch, cfg)
        cupy.cuda.Device().synchronize()
        best = min(best, time.perf_counter() - t0)
    return best, out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rev", default="9dd2b37", help="a tree whose kernels/ewfa.cu has the template instances")
    ap.add_argument("--reps", type=int, default=5)
    a = ap.parse_args()
    from gpualign.gpu import kernels
    from gpualign.engines.gpu_edit import GpuEditEngine

    old = os.path.join(ROOT, "kernels", OLD)
    with open(old, "wb") as fh:
        fh.write(subprocess.run(["git", "-C", ROOT, "show", f"{a.rev}:kernels/ewfa.cu"], check=True,
                                capture_output=True).stdout)
    try:
        names = [f"ewfa_align<{e}, {bt}>" for e in (32, 64, 128) for bt in ("true", "false")] + ["ewfa_align<512, false>"]
        templated = kernels.load_module(OLD, tuple(names), ())
    finally:
        os.unlink(old)
    rows = []
    for n, length, rate in ((1_000_000, 150, 0.02), (200_000, 1000, 0.02), (100_000, 1000, 0.10)):
        q, t = simulate(n, length, rate, seed=3)
        batch = PairBatch.from_sequences(q, t)
        for distance_only in (False, True):
            cfg = AlignConfig(metric="edit", device="gpu", distance_only=distance_only, batch_bases=1 << 30)
            engine = GpuEditEngine()
            engine.start()
            engine.warm(cfg)
            s_arg, r_arg = timed(engine, batch, cfg, a.reps)
            engine._mod = Instances(engine._mod, templated)
            engine.warm(cfg)
            s_tpl, r_tpl = timed(engine, batch, cfg, a.reps)
            same = np.array_equal(r_arg.score, r_tpl.score) and (distance_only or (
                np.array_equal(r_arg.cigar_len, r_tpl.cigar_len) and np.array_equal(r_arg.cigar, r_tpl.cigar)))
            rows.append((f"{n:,} x {length} bp {rate:.0%}", "scores" if distance_only else "CIGARs", s_tpl, s_arg, same))
            print(rows[-1], flush=True)
    print("\n| set | output | templates (8 instances) | arguments (1 kernel) | arguments / templates | same |")
    print("|---|---|---|---|---|---|")
    for name, out, tpl, arg, same in rows:
        print(f"| {name} | {out} | {tpl * 1e3:.1f} ms | {arg * 1e3:.1f} ms | {arg / tpl:.2f} | {same} |")


if __name__ == "__main__":
    main()
