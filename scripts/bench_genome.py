#!/usr/bin/env python3
"""Benchmark `gpualign genome` (exact edit distance and alignment path of long strings) against WFA2-lib and edlib.

Sets (generated with numpy, seeded, as in the long-string paper's generator: uniform edits):
  G1 5 Mbp at 1%, G2 5 Mbp at 10%, G3 48 Mbp at 8.4% (chr21-like), G4 3.2 Mbp at 47%,
plus a real pair given with --real A.fa B.fa (e.g. the two E. coli genomes). Per set, in one run:
  e2e_s    `gpualign genome` in this process (run_genome: both FASTA files read, upload, kernel, TSV out;
           the kernels compiled beforehand, as the disk cache does for every run after the first): the
           median of --e2e-repeats runs (sets up to 10 Mbp; every run in the JSON), one run above
  bound_s  the anchored upper bound (long_bound.py: k-mer anchors with cupy, gaps on the GPU eWFA engine)
  gpu_s    the tiled kernel seeded with that bound (upload included), band --band, warp-wide extend as
           `gpualign genome` chooses it (close strings), 2-bit codes when the strings are ACGT-only;
           bound_s + gpu_s is the GPU work of `gpualign genome` when it picks this kernel
  bytes_s  the same comparing bytes (--bytes-sets)
  nobound_s  the tiled kernel without the bound (--nobound-sets)
  bp_s     the banded bit-parallel kernel, band from the anchored bound (upload included): two halves
           of the target at once, met in the middle; bp1_s the same in one piece
  bpg_s    the same with the band `gpualign genome` guesses when it skips the bound (widened if too narrow)
  kernel   the kernel `gpualign genome` picks for the set (e2e_s used it)
  step_s   the one-step-per-barrier kernel (--step-sets), which must give the same distance
  plain_s  the unpruned one-step kernel (--check-plain)
  wfa_s, edlib_s  WFA2-lib and edlib in subprocesses stopped after --cpu-timeout seconds (--cpu-sets).
The alignment path (--path-sets; --path-only skips the distance kernels' columns above):
  path_s   `gpualign genome -o out.paf` in this process (the CIGAR written), median of --path-repeats;
           every CIGAR re-checked (check_cigar: lengths, =/X against the strings) and its cost = distance
  engine_s the estimate, the anchored bound and genome_path.gpu_path alone (strings in memory; the pool
           emptied between them, untimed); how:
           "anchors" (the bound's path was optimal) or "split" (Hirschberg from the whole pair); first_s the distance and first split,
           split_s the other levels' splits, leaves_s the leaves' CIGARs (batched engines); levels, leaves
  peak_gb  the CuPy memory pool's high-water mark during the path run (its blocks are freed first; the pool's
           size read every millisecond: HighWater);
           bound_gb, engine_gb: the same for the anchored bound and for gpu_path (distance, splits, leaves)
           in the engine run (the pool emptied before each)
  wfa_path_s, edlib_path_s  WFA2-lib BiWFA (one thread) and edlib's path mode (--cpu-path-sets)

  python scripts/bench_genome.py --sets G1,G2,G4 --real a.fa.gz b.fa.gz --cpu-sets G1
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import sys
import tempfile
import threading
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from simulate import simulate  # noqa: E402

os.environ.pop("PYTHONDONTWRITEBYTECODE", None)  # commands timed with their bytecode cached (docs/benchmarks.md)

SETS = {"G1": (5_000_000, 0.01), "G2": (5_000_000, 0.10), "G3": (48_000_000, 0.084), "G4": (3_200_000, 0.47)}


def _cpu(method, q, t, conn):
    from gpualign.engines import cpu_long

    t0 = time.perf_counter()
    d, _ = cpu_long.distance(q, t, method)
    conn.send((d, time.perf_counter() - t0))


def _cpu_path(method, q, t, conn):
    from gpualign.engines import cpu_long
    from gpualign.hirschberg import edits

    t0 = time.perf_counter()
    ops, _ = cpu_long.path(q, t, method)
    conn.send((edits(ops), time.perf_counter() - t0))


def cpu_run(method, q, t, timeout, fn=_cpu):
    a, b = mp.Pipe()
    p = mp.get_context("fork").Process(target=fn, args=(method, q, t, b))
    p.start()
    p.join(timeout)
    if p.is_alive():
        p.kill()
        return None, None
    return a.recv()


def end_to_end(tmp, q, t, repeats=1):
    """`gpualign genome` in this process on FASTA files of q and t: (seconds, distance, stages, all runs' seconds)
    where seconds is the median of `repeats` runs and stages the host steps: reading both files (run_genome's
    read stage, the median), the divergence estimate (timed alone afterwards)."""
    from gpualign.config import AlignConfig
    from gpualign.genome import _pairs, run_genome
    from gpualign.genome_pair import kernel_options

    paths = []
    for name, seq in (("a", q), ("b", t)):
        paths.append(os.path.join(tmp, name + ".fa"))
        with open(paths[-1], "wb") as fh:
            fh.write(b">" + name.encode() + b"\n" + seq + b"\n")
    runs, reads = [], []
    for _ in range(max(1, repeats)):
        t0 = time.perf_counter()
        stages: dict = {}
        res = run_genome(*paths, os.path.join(tmp, "out.tsv"), AlignConfig(distance_only=True, device="gpu"),
                         stages=stages)
        runs.append(time.perf_counter() - t0)
        reads.append(stages["read"])
    _, _, qa, ta = next(_pairs(*paths, None, None))
    t1 = time.perf_counter()
    kernel_options(qa, ta)
    return (float(np.median(runs)), res[0].distance,
            dict(read_s=float(np.median(reads)), estimate_s=time.perf_counter() - t1), runs)


class HighWater:
    """The CuPy pool's high-water mark over a with-block: its size read every millisecond by a thread (gpu_path
    gives cached blocks back between its stages, so the size at the end is not the peak)."""

    def __init__(self, pool):
        self.pool, self.peak, self._stop = pool, 0, threading.Event()

    def _poll(self) -> None:
        while not self._stop.wait(0.001):
            self.peak = max(self.peak, self.pool.total_bytes())

    def __enter__(self):
        self.peak = self.pool.total_bytes()
        self._stop.clear()
        self._thread = threading.Thread(target=self._poll, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, self.pool.total_bytes())


def path_run(tmp, q, t, distance, repeats=1):
    """`gpualign genome -o out.paf` in this process on FASTA files of q and t (written by end_to_end): the
    median seconds, every run's seconds, the pool's high-water mark; the CIGAR checked and its cost =
    distance. Then genome_path.gpu_path alone: its seconds and stats."""
    import cupy

    from gpualign import cigar as C
    from gpualign.config import AlignConfig
    from gpualign.genome_pair import gpu_bound, kernel_options
    from gpualign.genome_path import gpu_path
    from gpualign.hirschberg import edits

    paths = [os.path.join(tmp, "a.fa"), os.path.join(tmp, "b.fa")]
    out = os.path.join(tmp, "out.paf")
    pool = cupy.get_default_memory_pool()
    runs, peak = [], 0
    from gpualign.genome import run_genome

    for _ in range(max(1, repeats)):
        pool.free_all_blocks()
        with HighWater(pool) as hw:
            t0 = time.perf_counter()
            run_genome(*paths, out, AlignConfig(device="gpu"))
            runs.append(time.perf_counter() - t0)
        peak = max(peak, hw.peak)
    with open(out) as fh:
        row = fh.readline().rstrip("\n").split("\t")
    ops = C.from_text(next(f for f in row if f.startswith("cg:Z:"))[5:])
    C.check_cigar(q, t, ops)
    assert edits(ops) == distance, f"the path costs {edits(ops)}, the distance is {distance}"
    qa, ta = np.frombuffer(q, np.uint8), np.frombuffer(t, np.uint8)
    pool.free_all_blocks()
    with HighWater(pool) as bound_hw:
        t0 = time.perf_counter()
        plan = kernel_options(qa, ta)  # as gpualign genome: the anchored bound where anchors can be found
        bound = gpu_bound(qa, ta, AlignConfig(), detail=True) if plan.anchored else None
        bound_s = time.perf_counter() - t0
    pool.free_all_blocks()  # (not timed)
    with HighWater(pool) as engine_hw:
        t0 = time.perf_counter()
        d, _, stats = gpu_path(qa, ta, AlignConfig(device="gpu"), plan, bound)
        engine_s = bound_s + time.perf_counter() - t0
    assert d == distance
    return dict(path_s=float(np.median(runs)), path_runs=runs, peak_gb=peak / 2**30, path_ops=len(ops),
                bound_gb=bound_hw.peak / 2**30, engine_gb=engine_hw.peak / 2**30,
                engine_s=engine_s, levels=stats["levels"], leaves=stats["leaves"], first_s=stats["first_s"],
                split_s=stats["split_s"], leaves_s=stats["leaves_s"], how=stats["how"])


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
    ap.add_argument("--step-sets", default="G1,G2", help="sets also run with the one-step kernel")
    ap.add_argument("--nobound-sets", default="G1,G2,G4", help="sets also run with the tiled kernel unbounded")
    ap.add_argument("--bytes-sets", default="G1,G2", help="sets also run with the tiled kernel comparing bytes")
    ap.add_argument("--e2e-repeats", type=int, default=5,
                    help="end-to-end runs per set up to 10 Mbp (the median is reported; one run above)")
    ap.add_argument("--band", type=int, default=None, help="steps per round of the tiled kernel")
    ap.add_argument("--bands", default="", help="also time the tiled kernel with these bands (e.g. 16,32,128)")
    ap.add_argument("--path-sets", default="all", help="sets also aligned (the CIGAR): names, 'real', or all")
    ap.add_argument("--path-only", action="store_true", help="only e2e distance and the path columns")
    ap.add_argument("--path-repeats", type=int, default=3, help="path_s: median of this many runs (sets <= 10 Mbp)")
    ap.add_argument("--cpu-path-sets", default="G1", help="sets on which WFA2-lib BiWFA and edlib also align")
    ap.add_argument("--json")
    a = ap.parse_args()
    from gpualign.config import AlignConfig
    from gpualign.engines import gpu_long
    from gpualign.genome_pair import gpu_bound, kernel_options

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
    for kernel in ("tiled", "step"):
        gpu_long.distance(warm, warm[::-1].copy(), kernel=kernel)  # compile + warm up
    gpu_long.bp_distance(warm, warm[::-1].copy())
    wq, wt = simulate(1, 200_000, 0.05, seed=1)
    gpu_bound(np.frombuffer(wq[0], np.uint8), np.frombuffer(wt[0], np.uint8), AlignConfig(distance_only=True))
    kw = dict(band=a.band) if a.band else {}  # kernel options, as gpualign genome sets them
    tmp = tempfile.mkdtemp(prefix="bench_genome_")
    rows = []
    for name, q, t in jobs:
        row = {"set": name, "n": len(q), "m": len(t)}
        reps = a.e2e_repeats if len(q) <= 10_000_000 else 1
        row["e2e_s"], e2e_d, stages, row["e2e_runs"] = end_to_end(tmp, q, t, reps)
        row.update(stages)
        qa, ta = np.frombuffer(q, np.uint8), np.frombuffer(t, np.uint8)
        want_path = a.path_sets == "all" or name in a.path_sets.split(",") or (
            name.startswith("real:") and "real" in a.path_sets.split(","))
        if want_path:
            row.update(path_run(tmp, q, t, e2e_d, a.path_repeats if len(q) <= 10_000_000 else 1))
        if name in a.cpu_path_sets.split(","):
            for method in ("wfa", "edlib"):
                d, sec = cpu_run(method, q, t, a.cpu_timeout, _cpu_path)
                row[f"{method}_path_s"] = sec
                if d is not None:
                    assert d == e2e_d, f"{method} path costs {d}, the distance is {e2e_d}"
        if a.path_only:
            row["distance"] = e2e_d
            rows.append(row)
            print(json.dumps(row), file=sys.stderr, flush=True)
            continue
        plan = kernel_options(qa, ta)  # as gpualign genome chooses
        kw["warp_extend"] = row["warp_extend"] = plan.warp_extend
        row.update(kernel=plan.kernel, guess=plan.guess)
        t0 = time.perf_counter()
        upper = gpu_bound(qa, ta, AlignConfig(distance_only=True))
        row.update(bound_s=time.perf_counter() - t0, bound=upper)
        r = gpu_long.distance(qa, ta, upper=upper, **kw)
        row.update(gpu_s=r["seconds"], distance=r["distance"], cells=r["cells"], bits=r["bits"])
        if r["bits"] == 2 and name in a.bytes_sets.split(","):
            rb = gpu_long.distance(qa, ta, upper=upper, **kw, bits=8)
            row["bytes_s"] = rb["seconds"]
            assert rb["distance"] == r["distance"], "2-bit and byte compares disagree"
        assert upper >= r["distance"]
        if name in a.nobound_sets.split(","):
            nb = gpu_long.distance(qa, ta, **kw)
            row.update(nobound_s=nb["seconds"], nobound_cells=nb["cells"])
            assert nb["distance"] == r["distance"]
        bp = gpu_long.bp_distance(qa, ta, upper=upper)
        row.update(bp_s=bp["seconds"], bp_cells=bp["cells"])
        assert bp["distance"] == r["distance"], f"bit-parallel gives {bp['distance']}"
        bp = gpu_long.bp_distance(qa, ta, upper=upper, split=False)
        row.update(bp1_s=bp["seconds"])
        assert bp["distance"] == r["distance"], f"bit-parallel (one piece) gives {bp['distance']}"
        bp = gpu_long.bp_distance(qa, ta, guess=plan.band_guess)
        row.update(bpg_s=bp["seconds"], bpg_passes=bp["passes"])
        assert bp["distance"] == r["distance"], f"bit-parallel (guessed band) gives {bp['distance']}"
        assert e2e_d == r["distance"], "gpualign genome and the kernel disagree"
        for b in [int(x) for x in a.bands.split(",") if x]:
            rb = gpu_long.distance(qa, ta, **{**kw, "band": b}, upper=upper)
            row[f"band{b}_s"] = rb["seconds"]
            assert rb["distance"] == r["distance"], f"band {b} gives {rb['distance']}"
        if name in a.step_sets.split(","):
            p = gpu_long.distance(qa, ta, kernel="step")
            row.update(step_s=p["seconds"], step_cells=p["cells"])
            assert p["distance"] == r["distance"], "tiled and one-step kernels disagree"
        if name in a.check_plain.split(","):
            p = gpu_long.distance(qa, ta, prune=False, kernel="step")
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
    f = lambda v: f"{v:.3f}" if isinstance(v, float) else "-"  # noqa: E731
    if a.json:
        with open(a.json, "a") as fh:
            fh.writelines(json.dumps(r) + "\n" for r in rows if "gpu_s" not in r)
    print("\t".join(["set", "n", "m", "distance", "e2e_s", "path_s", "path/e2e", "how", "engine_s", "first_s", "split_s",
                     "leaves_s", "levels", "leaves",
                     "cigar_ops", "peak_gb", "bound_gb", "engine_gb", "wfa_path_s", "edlib_path_s"]))
    for r in rows:
        if "path_s" in r:
            print("\t".join([r["set"], str(r["n"]), str(r["m"]), str(r["distance"]), f(r["e2e_s"]), f(r["path_s"]),
                             f"{r['path_s'] / r['e2e_s']:.2f}", r["how"], f(r["engine_s"]), f(r["first_s"]),
                             f(r["split_s"]),
                             f(r["leaves_s"]), str(r["levels"]), str(r["leaves"]),
                             str(r["path_ops"]), f"{r['peak_gb']:.2f}", f"{r['bound_gb']:.2f}",
                             f"{r['engine_gb']:.2f}", f(r.get("wfa_path_s")),
                             f(r.get("edlib_path_s"))]))
    if a.path_only:
        return
    extra = sorted({k for r in rows for k in r if k.startswith("band")})
    print("\t".join(["set", "n", "m", "distance", "bound/d", "kernel", "e2e_s", "read_s", "estimate_s", "bound_s",
                     "gpu_s", "cells", "cells/s", "bp_s", "bp1_s", "bp_cells/s", "bpg_s", "bpg_passes",
                     "bytes_s", "nobound_s", "step_s", "plain_s", "wfa_s", "edlib_s", *extra]))
    for r in rows:
        print(f"# {r['set']}: e2e runs " + ", ".join(f"{x:.3f}" for x in r["e2e_runs"]) + " s")
    for r in rows:
        print("\t".join([r["set"], str(r["n"]), str(r["m"]), str(r["distance"]),
                         f"{r['bound'] / max(1, r['distance']):.3f}", r["kernel"], f(r["e2e_s"]), f(r["read_s"]),
                         f(r["estimate_s"]), f(r["bound_s"]), f(r["gpu_s"]),
                         f"{r['cells']:.3g}", f"{r['cells'] / r['gpu_s']:.3g}", f(r["bp_s"]), f(r["bp1_s"]),
                         f"{r['bp_cells'] / r['bp_s']:.3g}", f(r["bpg_s"]), str(r["bpg_passes"]),
                         *(f(r.get(k)) for k in ("bytes_s", "nobound_s", "step_s", "plain_s", "wfa_s", "edlib_s",
                                                 *extra))]))


if __name__ == "__main__":
    main()
