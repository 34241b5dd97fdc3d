#!/usr/bin/env python3
"""Timeline of one `gpualign paf` command, from the moment its process was started: imports, reader
processes, engine start-up and warm-up, each batch read and aligned, each kernel on the GPU (CUDA events),
each batch written, and the process's end. Use it to see where a command's wall time goes beyond the
stages' busy seconds (start-up, idle GPU between kernels, exit).

The command runs in a child process (this script with --child) whose hooks wrap the pipeline's
functions; it prints the events, then a summary (start-up steps, GPU busy time, gaps). The hooks add a
CUDA event pair per kernel launch and nothing else. A kernel's span runs from when its stream reached
it to its end: with two streams, a kernel queued behind the other stream's blocks counts as busy.

  python scripts/timeline_paf.py cands.paf reads.fa ref.fa [--json tl.json] [-- extra gpualign paf options]
"""

from __future__ import annotations

import inspect
import json
import os
import sys
import time

T0_ENV, OUT_ENV = "GPUALIGN_TIMELINE_T0", "GPUALIGN_TIMELINE_OUT"


def child() -> None:
    """Install the hooks, run gpualign's main; the events go to $GPUALIGN_TIMELINE_OUT at quick_exit."""
    t0 = float(os.environ[T0_ENV])
    events: list = []
    kernels: list = []

    def mark(what: str, **kw) -> None:
        import threading

        events.append({"t": time.perf_counter() - t0, "what": what, "thread": threading.current_thread().name, **kw})

    mark("interpreter started")

    import numpy  # noqa: F401 - timed: its import is a start-up step of its own
    mark("numpy imported")
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from gpualign import cli, pipeline, realign
    from gpualign.engines import _cuda, _device, gpu_affine
    from gpualign.output import parallel
    mark("gpualign imported")

    def around(owner, name: str, label: str | None = None, gen: bool = False):
        """Mark the start and end of owner.name (each item of a generator function with gen)."""
        fn = getattr(owner, name)
        label = label or name

        if gen:
            def wrapped(*a, **k):
                it = iter(fn(*a, **k))
                i = 0
                while True:
                    mark(f"{label} next", i=i)
                    try:
                        item = next(it)
                    except StopIteration:
                        mark(f"{label} end", i=i)
                        return
                    mark(f"{label} item", i=i, n=getattr(item, "n", None))
                    i += 1
                    yield item
        else:
            def wrapped(*a, **k):
                mark(f"{label} begin")
                try:
                    return fn(*a, **k)
                finally:
                    mark(f"{label} end")
        setattr(owner, name, wrapped)

    class TimedKernel:
        """A kernel function whose launches are bracketed by CUDA events on the current stream."""

        def __init__(self, fn, name):
            object.__setattr__(self, "fn", fn)
            object.__setattr__(self, "name", name)

        def __call__(self, *a, **k):
            import threading

            import cupy

            s = cupy.cuda.get_current_stream()
            e0 = cupy.cuda.Event()
            e0.record(s)
            self.fn(*a, **k)
            e1 = cupy.cuda.Event()
            e1.record(s)
            kernels.append((self.name, e0, e1, threading.current_thread().name))

        def __getattr__(self, k):
            return getattr(self.fn, k)

        def __setattr__(self, k, v):
            setattr(self.fn, k, v)

    base: dict = {}
    get_function = _cuda.Module.get_function

    def timed_get_function(self, name):
        if not base:
            import cupy

            ev = cupy.cuda.Event()
            ev.record()
            ev.synchronize()
            base["event"], base["t"] = ev, time.perf_counter() - t0
        return TimedKernel(get_function(self, name), name.split("<")[0])

    _cuda.Module.get_function = timed_get_function

    def slow(owner, name: str, at_least: float = 0.002):
        """Mark calls of owner.name that take at least at_least seconds (begin time, duration)."""
        fn = getattr(owner, name)

        def wrapped(*a, **k):
            t = time.perf_counter()
            try:
                return fn(*a, **k)
            finally:
                d = time.perf_counter() - t
                if d >= at_least:
                    mark(f"slow {name}", dt=round(d, 4), at=round(t - t0, 4))
        static = isinstance(inspect.getattr_static(owner, name), staticmethod)
        setattr(owner, name, staticmethod(wrapped) if static else wrapped)

    from gpualign import shm

    for owner, name in ((_device, "pinned_empty"), (_device.Staging, "_send"),
                        (gpu_affine.GpuAffineEngine, "_estimated_level"),
                        (gpu_affine, "length_groups"), (gpu_affine, "longest_first"), (shm, "take"),
                        (parallel.OrderedWriter, "_write_one"), (realign, "_batch")):
        slow(owner, name)
    around(gpu_affine, "load_module")
    around(realign, "select_engines")
    around(_device.BatchEngine, "start", "engine start")
    around(gpu_affine.GpuAffineEngine, "warm", "engine warm")
    around(realign, "_numbered", "batch read", gen=True)
    around(realign, "_batches", "batch read", gen=True)
    around(pipeline, "run_chain", "align")
    around(_device.Staging, "upload")
    around(gpu_affine.GpuAffineEngine, "_launch", "level queued")
    around(_device.Results, "finish", "results")
    around(parallel.OrderedWriter, "submit", "write submit")
    around(parallel.OrderedWriter, "flush", "write flush")
    around(pipeline.Output, "commit")
    quick_exit = cli.quick_exit

    def dump_and_exit(code):
        mark("quick_exit")
        ks = []
        if kernels:
            import cupy

            cupy.cuda.Device().synchronize()
            b = base["event"]
            for name, e0, e1, thread in kernels:
                ks.append({"name": name, "thread": thread, "t0": base["t"] + cupy.cuda.get_elapsed_time(b, e0) / 1e3,
                           "t1": base["t"] + cupy.cuda.get_elapsed_time(b, e1) / 1e3})
        mark("dumped")
        with open(os.environ[OUT_ENV], "w") as fh:
            json.dump({"events": events, "kernels": ks, "scipy": "scipy" in sys.modules}, fh)
        quick_exit(code)

    cli.quick_exit = dump_and_exit
    sys.argv = ["gpualign", "paf", *sys.argv[2:]]
    cli.main()


def union(intervals) -> float:
    total, end = 0.0, -1e9
    for a, b in sorted(intervals):
        if b > end:
            total += b - max(a, end)
            end = b
    return total


def summarise(tl: dict, wall: float) -> None:
    ev, ks = tl["events"], tl["kernels"]
    first = {}
    for e in ev:
        first.setdefault(e["what"], e["t"])
    print("start-up (s from process start):")
    for what in ("interpreter started", "numpy imported", "gpualign imported", "select_engines end", "load_module end",
                 "engine start end", "engine warm begin", "engine warm end", "batch read item", "align begin"):
        if what in first:
            print(f"  {what:<22} {first[what]:7.3f}")
    open_at: dict = {}  # per aligning thread (batches align in several at once)
    spans = []
    for e in ev:
        if e["what"] == "align begin":
            open_at[e["thread"]] = e["t"]
        elif e["what"] == "align end":
            spans.append((open_at.pop(e["thread"]), e["t"]))
    spans.sort()
    reads = [e["t"] for e in ev if e["what"] == "batch read item"]
    print("batches (read ready / align begin-end / GPU busy inside; batches aligning at once share it):")
    for i, (a, b) in enumerate(spans):
        inside = union((max(k["t0"], a), min(k["t1"], b)) for k in ks if k["t1"] > a and k["t0"] < b)
        r = reads[i] if i < len(reads) else float("nan")
        print(f"  {i:3d} {r:7.3f}  {a:7.3f}-{b:7.3f} ({b - a:5.3f})  gpu {inside:5.3f}")
    by_name: dict = {}
    for k in ks:
        by_name[k["name"]] = by_name.get(k["name"], 0.0) + k["t1"] - k["t0"]
    print("kernel seconds:", {k: round(v, 3) for k, v in sorted(by_name.items(), key=lambda kv: -kv[1])})
    busy = union((k["t0"], k["t1"]) for k in ks)
    if spans:
        a0, b1 = spans[0][0], max(b for _, b in spans)
        print(f"aligning from {a0:.3f} to {b1:.3f} s ({b1 - a0:.3f} s): GPU busy {busy:.3f} s, "
              f"idle {b1 - a0 - busy:.3f} s")
    end = {e["what"]: e["t"] for e in ev}
    print("SciPy imported (by CuPy's own kernels) by the end:", tl.get("scipy"))
    print(f"last align end -> quick_exit {end.get('quick_exit', 0) - (spans[-1][1] if spans else 0):.3f} s; "
          f"quick_exit at {end.get('quick_exit', 0):.3f} s; process gone at {wall:.3f} s "
          f"(exit {wall - end.get('dumped', wall):.3f} s)")


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child()
        return
    import argparse
    import subprocess
    import tempfile

    argv = sys.argv[1:]
    extra = argv[argv.index("--") + 1:] if "--" in argv else []
    argv = argv[:argv.index("--")] if "--" in argv else argv
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("paf")
    ap.add_argument("query")
    ap.add_argument("target")
    ap.add_argument("-o", "--output", help="the command's output (default: a temporary .paf)")
    ap.add_argument("--json", help="write the events and kernels here too")
    ap.add_argument("--events", action="store_true", help="print every event")
    a = ap.parse_args(argv)
    out = a.output or os.path.join(tempfile.mkdtemp(prefix="gpualign-timeline-"), "out.paf")
    fd, tl_path = tempfile.mkstemp(suffix=".json")
    os.close(fd)
    t0 = time.perf_counter()
    env = dict(os.environ, **{T0_ENV: repr(t0), OUT_ENV: tl_path})
    p = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", a.paf, a.query, a.target, "-o", out,
                        "-q", *extra], env=env)
    wall = time.perf_counter() - t0
    if p.returncode:
        sys.exit(f"gpualign paf exited with {p.returncode}")
    with open(tl_path) as fh:
        tl = json.load(fh)
    os.unlink(tl_path)
    if a.json:
        with open(a.json, "w") as fh:
            json.dump({"wall": wall, **tl}, fh)
    if a.events:
        for e in tl["events"]:
            print(f"{e['t']:8.3f} {e['thread']:<24} {e['what']} {e.get('i', '')} {e.get('dt', '')}")
    summarise(tl, wall)


if __name__ == "__main__":
    main()
