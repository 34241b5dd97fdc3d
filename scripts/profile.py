#!/usr/bin/env python3
"""Where gpualign's time goes: one subcommand per view. Timings come from gpualign.trace (a recorder this
script installs: the code's own named spans), never from patching engine internals.

  python scripts/profile.py timeline paf cands.paf reads.fa ref.fa [--json tl.json] [-- extra gpualign paf options]
  python scripts/profile.py timeline pairs A.fa B.fa [-- --device gpu]
  python scripts/profile.py timeline search patterns.fa text.fa --events -- -k 3 --device gpu
  python scripts/profile.py stages -n 1000000 -l 150 -e 0.02 [--distance-only] [--cprofile] [--general local]
  python scripts/profile.py edit [N] [BATCH_BASES]
  python scripts/profile.py affine 1000000x1000x0.10 10000x10000x0.10 --batch-bases 67108864
  python scripts/profile.py genome --n 2000000 --rate 0.10 [--kernel tiled|step|bp] [--no-bound] [--band 64]
  python scripts/profile.py genome --real A.fa.gz B.fa.gz --kernel bp --guess --defines BP_MIN_BLOCKS=8
  ncu -k regex:wfa_long_tiled --section WarpStateStats python scripts/profile.py genome --n 1000000
  python scripts/profile.py paf cands.paf reads.fa ref.fa --device gpu [--readers N] [--batch-bases N]
  python scripts/profile.py host pairs A.fa B.fa [--profile]
  python scripts/profile.py host paf cands.paf reads.fa ref.fa [--profile]
  python scripts/profile.py spans -- pairs A.fa B.fa --device gpu -o out.paf
  python scripts/profile.py reader A.fa B.fa [--batch-bases N] [--cprofile]
  python scripts/profile.py targets B.fa [--beside-cupy] [--block-mb 8] [--switch-ms 0.2]

Every subcommand but host and targets (without --beside-cupy) needs a GPU (paf: with --device gpu); --help works
everywhere.
"""

from __future__ import annotations

import time

_STARTED = time.perf_counter()  # the timeline's "interpreter started"

import argparse  # noqa: E402
import collections  # noqa: E402
import contextlib  # noqa: E402
import io  # noqa: E402
import itertools  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402

import numpy as np  # noqa: E402

_NUMPY = time.perf_counter()  # the timeline's "numpy imported"

HERE = os.path.dirname(os.path.abspath(__file__))
# this file's name is the standard library's `profile` (which cProfile imports): its folder goes last
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != HERE] + [HERE]
sys.path.insert(0, os.path.dirname(HERE))

import cProfile  # noqa: E402
import pstats  # noqa: E402

from simulate import simulate  # noqa: E402

from gpualign import trace  # noqa: E402
from gpualign.engines.base import Engine  # noqa: E402

# ---------------------------------------------------------------------------------------------- timeline
T0_ENV, OUT_ENV = "GPUALIGN_TIMELINE_T0", "GPUALIGN_TIMELINE_OUT"


class TimedKernel:
    """A kernel function whose launches are bracketed by CUDA events on the current stream."""

    def __init__(self, fn, name, kernels):
        object.__setattr__(self, "fn", fn)
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "kernels", kernels)

    def __call__(self, *a, **k):
        import threading

        import cupy

        s = cupy.cuda.get_current_stream()
        e0 = cupy.cuda.Event()
        e0.record(s)
        self.fn(*a, **k)
        e1 = cupy.cuda.Event()
        e1.record(s)
        self.kernels.append((self.name, e0, e1, threading.current_thread().name))

    def __getattr__(self, k):
        return getattr(self.fn, k)

    def __setattr__(self, k, v):
        setattr(self.fn, k, v)


class TimelineRecorder:
    """Events since the process started: begin/end of the AROUND spans, the SLOW spans that took at least
    2 ms, each batch read, and each kernel launch (CUDA events)."""

    AROUND = ("load_module", "select_engines", "engine start", "engine warm", "align", "upload",
              "affine level queued", "results", "write submit", "write flush", "commit", "device read",
              "target scan", "sam header", "search submit", "search collect", "tsv render", "paf render",
              "device lines", "device paf", "device sam", "sink out")
    SLOW = ("pinned_empty", "send", "estimated level", "length_groups", "longest_first", "shm take", "write one",
            "batch build")

    def __init__(self, t0: float):
        self.t0, self.events, self.kernels, self.base = t0, [], [], {}

    def mark(self, what: str, at: float | None = None, **kw) -> None:
        import threading

        self.events.append({"t": (time.perf_counter() if at is None else at) - self.t0, "what": what,
                            "thread": threading.current_thread().name, **kw})

    @contextlib.contextmanager
    def span(self, name: str):
        if name in self.SLOW:
            t = time.perf_counter()
            try:
                yield
            finally:
                d = time.perf_counter() - t
                if d >= 0.002:
                    self.mark(f"slow {name}", dt=round(d, 4), start=round(t - self.t0, 4))
        elif name in self.AROUND:
            self.mark(f"{name} begin")
            try:
                yield
            finally:
                self.mark(f"{name} end")
        else:
            yield

    def item(self, name: str, event: str, i: int, item) -> None:
        if event == "item":
            self.mark(f"{name} item", i=i, n=getattr(item, "n", None))
        else:
            self.mark(f"{name} {event}", i=i)

    def kernel(self, name: str, fn):
        if not self.base:
            import cupy

            ev = cupy.cuda.Event()
            ev.record()
            ev.synchronize()
            self.base["event"], self.base["t"] = ev, time.perf_counter() - self.t0
        return TimedKernel(fn, name.split("<")[0], self.kernels)

    def dump(self, path: str) -> None:
        ks = []
        if self.kernels:
            import cupy

            cupy.cuda.Device().synchronize()
            b = self.base["event"]
            for name, e0, e1, thread in self.kernels:
                ks.append({"name": name, "thread": thread,
                           "t0": self.base["t"] + cupy.cuda.get_elapsed_time(b, e0) / 1e3,
                           "t1": self.base["t"] + cupy.cuda.get_elapsed_time(b, e1) / 1e3})
        self.mark("dumped")
        with open(path, "w") as fh:
            json.dump({"events": self.events, "kernels": ks, "scipy": "scipy" in sys.modules}, fh)



def _scratch(prefix: str) -> str:
    """A temporary directory for output that is thrown away, removed at exit: nothing left in /tmp."""
    import atexit
    import shutil

    d = tempfile.mkdtemp(prefix=prefix)
    atexit.register(shutil.rmtree, d, True)
    return d

def timeline_child(argv: list) -> None:
    """Install the recorder, run `gpualign <argv>` as main() does; the events go to $GPUALIGN_TIMELINE_OUT."""
    rec = TimelineRecorder(float(os.environ[T0_ENV]))
    rec.mark("interpreter started", _STARTED)
    rec.mark("numpy imported", _NUMPY)
    from gpualign import cli

    rec.mark("gpualign imported")
    trace.install(rec)
    sys.argv = ["gpualign", *argv]
    try:
        cli.app(prog_name="gpualign")
        code = 0
    except SystemExit as e:
        code = e.code
    rec.mark("quick_exit")
    rec.dump(os.environ[OUT_ENV])
    cli.quick_exit(code)


def cprofiled(fn, top: int = 25) -> None:
    """One call of fn under cProfile; its top functions by own time printed."""
    pr = cProfile.Profile()
    pr.enable()
    fn()
    pr.disable()
    pstats.Stats(pr).sort_stats("tottime").print_stats(top)


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
                 "engine start end", "engine warm begin", "engine warm end", "batch read item", "device read end",
                 "target scan begin", "target scan end", "sam header begin", "sam header end", "align begin"):
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
    reads = ([e["t"] for e in ev if e["what"] == "batch read item"]
             or [e["t"] for e in ev if e["what"] == "device read end"])  # pairs read on the device
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
    if spans:  # what the run did once its last batch was aligned (writing, the commit), every thread's
        last = max(b for _, b in spans)
        tail = sorted((e for e in ev if e["t"] >= last and e["what"] not in ("quick_exit", "dumped")),
                      key=lambda e: e["t"])
        more = ", the first 40" if len(tail) > 40 else ""
        print(f"after the last alignment ({last:.3f} s): {len(tail)} events{more}")
        for e in tail[:40]:
            took = f" ({e['dt']:.3f} s from {e['start']:.3f})" if "dt" in e else ""
            print(f"  {e['t']:7.3f} {e['thread'][:18]:<18} {e['what']}{took}")
    print("SciPy imported (by CuPy's own kernels) by the end:", tl.get("scipy"))
    print(f"last align end -> quick_exit {end.get('quick_exit', 0) - (spans[-1][1] if spans else 0):.3f} s; "
          f"quick_exit at {end.get('quick_exit', 0):.3f} s; process gone at {wall:.3f} s "
          f"(exit {wall - end.get('dumped', wall):.3f} s)")


def timeline_args(ap) -> None:
    ap.description = ("Timeline of one `gpualign paf`, `pairs` or `search` command from its process start: imports, "
                      "reader processes, "
                      "engine start-up and warm-up, each batch read and aligned, each kernel on the GPU (CUDA events), "
                      "each batch written, and the process's end. The command runs in a child process with a "
                      "trace recorder installed; a kernel's span runs from when its stream reached it to its end. "
                      "Options after -- go to the command.")
    ap.add_argument("command", choices=("paf", "pairs", "search"))
    ap.add_argument("inputs", nargs="+", help="the command's inputs (paf: cands.paf reads.fa ref.fa; pairs: A.fa B.fa; "
                    "search: patterns.fa text.fa)")
    ap.add_argument("-o", "--output", help="the command's output (default: a temporary .paf)")
    ap.add_argument("--json", help="write the events and kernels here too")
    ap.add_argument("--events", action="store_true", help="print every event")


def timeline(a, extra: list) -> None:
    import subprocess

    out = a.output or os.path.join(_scratch("gpualign-timeline-"), "out.paf")
    fd, tl_path = tempfile.mkstemp(suffix=".json")
    os.close(fd)
    t0 = time.perf_counter()
    env = dict(os.environ, **{T0_ENV: repr(t0), OUT_ENV: tl_path})
    p = subprocess.run([sys.executable, os.path.abspath(__file__), "timeline-child", a.command, *a.inputs,
                        "-o", out, "-q", *extra], env=env)
    wall = time.perf_counter() - t0
    if p.returncode:
        sys.exit(f"gpualign {a.command} exited with {p.returncode}")
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


# ------------------------------------------------------------------------------------------------ stages
class StageRecorder:
    """Inclusive seconds per engine stage, the device synchronised before and after each (the stages run
    serially, so the sum is an upper bound on what overlap could save)."""

    LABELS = {"align": "run_chain", "merge": "merge", "upload": "upload (copy+H2D+meta)", "edit upload": "upload+pack",
              "edit level": "eWFA level (kernel+cigar)", "affine level queued": "affine level (kernels)",
              "results record": "Results.record (affine)", "results": "Results.finish (affine)",
              "slot results book": "SlotResults.book (eWFA)",
              "slot results settle": "SlotResults.settle (eWFA)", "slot results": "SlotResults.finish (eWFA)",
              "dp fill": "dp_fill or dp_long (gpu-dp)", "dp trace": "dp_trace (gpu-dp)", "dp gather": "dp_gather (gpu-dp)"}

    def __init__(self):
        self.seconds: collections.Counter = collections.Counter()
        self.calls: collections.Counter = collections.Counter()

    @contextlib.contextmanager
    def span(self, name: str):
        label = self.LABELS.get(name)
        if label is None:
            yield
            return
        import cupy

        cupy.cuda.Device().synchronize()
        t0 = time.perf_counter()
        yield
        cupy.cuda.Device().synchronize()
        self.seconds[label] += time.perf_counter() - t0
        self.calls[label] += 1


def stages_args(ap) -> None:
    ap.description = ("Where a GPU pairs engine's time goes, stage by stage: the engine chain (route.run_chain) "
                      "over in-memory batches as bench_pairs' \"engine\" column runs it, then again with each "
                      "stage timed between device synchronisations (StageRecorder).")
    ap.add_argument("-n", type=int, default=1_000_000)
    ap.add_argument("-l", type=int, default=150)
    ap.add_argument("-e", type=float, default=0.02)
    ap.add_argument("--distance-only", action="store_true")
    ap.add_argument("--metric", default="edit", choices=("edit", "affine"))
    ap.add_argument("--general", choices=("global", "local", "semi-global"),
                    help="general scoring in this mode (gpu-dp): +2 -3 -(5 + 2L), bench_dp's DNA scoring")
    ap.add_argument("--profile", default="uniform", choices=("uniform", "long"), help="simulate.py error profile")
    ap.add_argument("--pageable", action="store_true", help="batches in pageable memory (the staging copy path)")
    ap.add_argument("--no-prefetch", action="store_true", help="each batch uploaded when its turn comes")
    ap.add_argument("--cprofile", action="store_true", help="also a host profile of an unwrapped run")


def stages(a) -> None:
    import cupy

    from gpualign import route
    from gpualign.config import AlignConfig, Penalties, Scoring
    from gpualign.engines import host_allocator, select_engines
    from gpualign.records import PairBatch

    cfg = AlignConfig(device="gpu", distance_only=a.distance_only, metric=a.metric)
    if a.general:
        cfg = AlignConfig(device="gpu", distance_only=a.distance_only, metric="affine", penalties=Penalties(3, 5, 2),
                          scoring=Scoring(mode=a.general, match=2))
    chain, _ = select_engines(cfg)
    q, t = simulate(a.n, a.l, a.e, seed=3, profile=a.profile)
    step = cfg.batch_pairs
    alloc = None if a.pageable else host_allocator(chain)  # pinned, as the reader makes them for GPU engines
    batches = [PairBatch.from_sequences(q[i:i + step], t[i:i + step], alloc=alloc) for i in range(0, a.n, step)]
    route.run_chain(batches[0], chain, cfg)  # warm: compile, pools

    def run():
        cupy.cuda.Device().synchronize()
        t0 = time.perf_counter()
        for i, b in enumerate(batches):  # as stages.stream: the next batch's upload overlaps this one
            if i + 1 < len(batches) and not a.no_prefetch:
                route.prefetch(batches[i + 1], chain, cfg)
            route.run_chain(b, chain, cfg)
        cupy.cuda.Device().synchronize()
        return time.perf_counter() - t0

    plain = run()
    if a.cprofile:
        cprofiled(run)
    rec = StageRecorder()
    trace.install(rec)
    staged = run()
    trace.install(None)
    print(f"# {a.n} x {a.l} bp {a.e:.2f} {'distance' if a.distance_only else 'cigar'}: "
          f"{a.general or a.metric}, {plain:.3f} s = {a.n / plain / 1e6:.2f} M pairs/s unwrapped; {staged:.3f} s with stage syncs")
    for k, v in rec.seconds.most_common():
        print(f"  {k:24s} {v:8.4f} s  {rec.calls[k]:4d} calls")


# -------------------------------------------------------------------------------------------------- edit
def edit_args(ap) -> None:
    ap.description = "Where the eWFA engine's time goes: upload, kernels, host work, per setting."
    ap.add_argument("n", nargs="?", type=int, default=1_000_000, help="pairs per set")
    ap.add_argument("batch_bases", nargs="?", type=int, default=1 << 26)


def edit(a) -> None:
    import cupy

    from gpualign.config import AlignConfig
    from gpualign.engines.gpu_edit import GpuEditEngine
    from gpualign.records import PairBatch

    N, BATCH_BASES = a.n, a.batch_bases
    e = GpuEditEngine()
    e._module()
    print(f"{'set':>14} {'mode':>8} {'align_s':>8} {'Mpairs/s':>9} {'kernel_s':>9} {'upload_s':>9}")
    for ln, rate in ((150, 0.02), (150, 0.10), (1000, 0.02), (1000, 0.10)):
        q, t = simulate(N, ln, rate, seed=5)
        per = max(1, BATCH_BASES // (2 * ln))
        batches = [PairBatch.from_sequences(q[i:i + per], t[i:i + per]) for i in range(0, N, per)]
        for cfg in (AlignConfig(), AlignConfig(distance_only=True)):
            e.align(batches[0].take(np.arange(min(2000, batches[0].n))), cfg)  # warm
            cupy.cuda.Device().synchronize()
            t0 = time.perf_counter()
            for b in batches:
                e.align(b, cfg)
            cupy.cuda.Device().synchronize()
            dt = time.perf_counter() - t0
            # kernel only: the main level on resident data, timed with events
            b = batches[0]
            dev_t0 = time.perf_counter()
            d_packed, d_raw, d_meta = e._upload(b, cfg)
            cupy.cuda.Device().synchronize()
            up = (time.perf_counter() - dev_t0) * len(batches)
            dev = (d_packed, d_raw, d_meta[0], d_meta[1], d_meta[2], d_meta[3])
            ids = cupy.arange(b.n, dtype=cupy.int32)
            lvl = e.levels(cfg)
            start, end = cupy.cuda.Event(), cupy.cuda.Event()
            best = None
            for lv in lvl:
                start.record()
                s = e._run_level(lv, dev, ids, b.n, not cfg.distance_only)[0]
                end.record()
                end.synchronize()
                if float((s >= 0).mean()) > 0.99:
                    best = cupy.cuda.get_elapsed_time(start, end) / 1000 * len(batches)
                    break
            mode = "dist" if cfg.distance_only else "cigar"
            print(f"{ln:>6}bp {rate:.2f} {mode:>8} {dt:8.3f} {N / dt / 1e6:9.2f} {best or float('nan'):9.3f} {up:9.3f}",
                  flush=True)


# ------------------------------------------------------------------------------------------------ affine
ESTIMATE = {"on": (True,), "off": (False,), "both": (False, True)}


def affine_args(ap) -> None:
    ap.description = ("Affine WFA engine alone on in-memory batches: pairs/s per setting, CIGAR and distance-only "
                      "(each with and without the estimated-cap level), and the pairs each level took.")
    ap.add_argument("sets", nargs="+", help="NxLENxRATE[xlong]")
    ap.add_argument("--batch-bases", type=int, default=1 << 26)
    ap.add_argument("--penalties", default="4,6,2")
    ap.add_argument("--metric", default="affine")
    ap.add_argument("--threads", type=int, help="override the plan's block size")
    ap.add_argument("--per-sm", type=int, help="override the plan's resident blocks per SM")
    ap.add_argument("--min-blocks", type=int, help="register cap: WFA_AFFINE_MIN_BLOCKS")
    ap.add_argument("--timing", action="store_true", help="kernel seconds (synchronises after each kernel)")
    ap.add_argument("--estimate", default="both", choices=("on", "off", "both"),
                    help="the estimated-cap level (docs/engines.md): with, without, or a row each")


def affine(a) -> None:
    import cupy

    from gpualign.config import AlignConfig, Penalties
    from gpualign.engines.gpu_affine import GpuAffineEngine
    from gpualign.records import PairBatch

    x, o, e = map(int, a.penalties.split(","))
    eng = GpuAffineEngine()
    eng.tune = {k: v for k, v in (("threads", a.threads), ("per_sm", a.per_sm)) if v}
    eng.tune["timing"] = a.timing
    if a.min_blocks:
        eng.tune["min_blocks"] = a.min_blocks
    print(f"{'set':>22} {'mode':>8} {'seconds':>8} {'pairs/s':>10}  levels")
    for spec in a.sets:
        parts = spec.split("x")
        n, ln, rate = int(parts[0]), int(parts[1]), float(parts[2])
        q, t = simulate(n, ln, rate, seed=5, profile=parts[3] if len(parts) > 3 else "uniform")
        per = max(1, a.batch_bases // (2 * ln))
        batches = [PairBatch.from_sequences(q[i:i + per], t[i:i + per]) for i in range(0, n, per)]
        for do, est in itertools.product((False, True), ESTIMATE[a.estimate]):
            eng.tune["estimate"] = est
            cfg = AlignConfig(metric=a.metric, penalties=Penalties(x, o, e), distance_only=do)
            eng.align(batches[0], cfg)  # warm: compile, pinned staging and device pool at full size
            cupy.cuda.Device().synchronize()
            t0 = time.perf_counter()
            counts = {}
            eng.timings = {}
            for b in batches:
                eng.align(b, cfg)
                for k, v in eng.last_counts.items():
                    counts[k] = counts.get(k, 0) + v
            dt = time.perf_counter() - t0
            mode = ("dist" if do else "cigar") + ("+E" if est else "")
            print(f"{spec:>22} {mode:>8} {dt:8.3f} {n / dt:10,.0f}  {counts}"
                  + "".join(f" {k}={v:.3f}s" for k, v in eng.timings.items()), flush=True)


# ------------------------------------------------------------------------------------------------ genome
def genome_args(ap) -> None:
    ap.description = "One run of the long-string kernel on a simulated pair, for profilers (ncu) and quick timing."
    ap.add_argument("--n", type=int, default=2_000_000)
    ap.add_argument("--rate", type=float, default=0.10)
    ap.add_argument("--kernel", default="tiled", choices=("tiled", "step", "bp"))
    ap.add_argument("--band", type=int, default=64)
    ap.add_argument("--tile-min", type=int, default=128)
    ap.add_argument("--no-bound", action="store_true")
    ap.add_argument("--warp-extend", type=int, choices=(0, 1), help="default: as gpualign genome chooses")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--real", nargs=2, metavar=("A", "B"), help="the first records of two FASTA files instead")
    ap.add_argument("--guess", action="store_true", help="bp: the band gpualign genome guesses (no bound)")
    ap.add_argument("--defines", default="", help="bp: comma list of kernel defines (NAME=VALUE)")
    ap.add_argument("--warps-per-sm", type=int, help="bp: strips in flight per SM at most")
    ap.add_argument("--bits", type=int, choices=(2, 8), help="tiled: 2-bit codes or bytes (default: auto)")


def genome(a) -> None:
    from gpualign.config import AlignConfig
    from gpualign.engines import gpu_long
    from gpualign.genome import _pairs
    from gpualign.genome_pair import gpu_bound, kernel_options

    if a.real:
        _, _, q, t = next(_pairs(*a.real, None, None))
        a.n, a.rate = len(q), float("nan")
    else:
        q, t = simulate(1, a.n, a.rate, seed=5)
        q, t = np.frombuffer(q[0], np.uint8), np.frombuffer(t[0], np.uint8)
    gpu_long.BP_DEFINES = tuple(x for x in a.defines.split(",") if x)  # tuning overrides, not timing hooks
    if a.warps_per_sm:
        gpu_long.BP_WARPS_PER_SM = a.warps_per_sm
    upper = None if a.no_bound or a.guess else gpu_bound(q, t, AlignConfig(distance_only=True))
    plan = kernel_options(q, t)
    warp = plan.warp_extend if a.warp_extend is None else bool(a.warp_extend)
    guess = plan.band_guess if a.guess else None
    for _ in range(a.repeat):
        if a.kernel == "bp":
            r = gpu_long.bp_distance(q, t, upper=upper, guess=guess)
        else:
            r = gpu_long.distance(q, t, kernel=a.kernel, band=a.band, tile_min=a.tile_min, upper=upper,
                                  warp_extend=warp, bits=a.bits)
        print(f"{a.kernel} {a.defines or '-'} wps={gpu_long.BP_WARPS_PER_SM} n={a.n} rate={a.rate} band={a.band} tile_min={a.tile_min} warp={int(warp)} bits={r.get('bits', '-')} d={r['distance']} upper={upper} cells={r['cells']:.3g} "
              f"s={r['seconds']:.4f} cells/s={r['cells'] / r['seconds']:.3g}")


# --------------------------------------------------------------------------------------------------- paf
def paf_args(ap) -> None:
    ap.description = ("`gpualign paf`'s stages alone, then together, in one process (the CLI's defaults: affine "
                      "4/6/2, ends-free, pad 100, batches of 2^27 bases). Alone: read (every batch built and kept, "
                      "in pageable memory as run_paf makes them), align (the batches one after another, each upload "
                      "started first), write (PAF to memory). Together: two whole run_paf runs, with their stages' "
                      "busy seconds. Use it to see which stage bounds a run.")
    ap.add_argument("paf")
    ap.add_argument("query")
    ap.add_argument("target")
    ap.add_argument("--device", default="gpu")
    ap.add_argument("--readers", type=int, default=None, help="worker processes (default: as run_paf chooses)")
    ap.add_argument("--batch-bases", type=int, default=1 << 27)


def paf(a) -> None:
    from gpualign import realign, route
    from gpualign.config import AlignConfig, Penalties
    from gpualign.engines import select_engines
    from gpualign.io import paf as P
    from gpualign.output.realigned import RealignedPaf
    from gpualign.realign_readers import Readers, worker_count

    base = AlignConfig(metric="affine", penalties=Penalties(4, 6, 2), device=a.device, batch_bases=a.batch_bases)
    cfg = base.with_(ends_free_target=True).validate()
    queries, targets = P.Queries(a.query), P.Targets(a.target)
    workers = worker_count(a.paf, a.readers)
    pool = Readers(workers, a.query, a.target, "ends-free", 100, False, False) if workers else None
    chain, notice = select_engines(cfg)
    print(notice, f"| reader processes: {workers}", file=sys.stderr)
    for e in reversed(chain):  # as stages.running: the CPU engine's processes first
        e.start()
    chain[0].warm(cfg)

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
        e.close()
    if pool is not None:
        pool.close()
    n = sum(b.n for b in batches)
    print(f"{n} candidates in {len(batches)} batches")
    print(f"alone: read {t_read:.2f} s, align {t_align:.2f} s, write {t_write:.2f} s (sum {t_read + t_align + t_write:.2f})")
    out = os.path.join(_scratch("gpualign-profile-paf-"), "out.paf")
    for run in range(2):
        t0 = time.perf_counter()
        s = realign.run_paf(a.paf, a.query, a.target, out, "paf", base, "profile_paf", readers=a.readers)
        busy = " / ".join(f"{s.stage_seconds[k]:.2f}" for k in ("read", "align", "write"))
        print(f"together, run {run + 1}: wall {time.perf_counter() - t0:.2f} s, busy read / align / write {busy} s, "
              f"routes {dict(sorted(s.counts.items()))}")


# -------------------------------------------------------------------------------------------------- host
class Instant(Engine):
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


def host_args(ap) -> None:
    ap.description = ("The host side alone of `gpualign pairs` or `gpualign paf`: the real readers, pipeline and "
                      "writers, with an engine that answers at once (Instant: no alignment, the output is not "
                      "meaningful). Its wall time is the ceiling the GPU engines cannot beat end to end; the stage "
                      "seconds and a profile show where it goes. Runs on the CPU.")
    ap.add_argument("command", choices=("pairs", "paf"))
    ap.add_argument("inputs", nargs="+")
    ap.add_argument("--profile", action="store_true", help="also print the top functions (cProfile)")
    ap.add_argument("-t", "--threads", type=int, default=os.cpu_count(), help="as gpualign's -t (text formatting workers)")


def host(a) -> None:
    from gpualign import pipeline, realign, stages
    from gpualign.config import AlignConfig

    out = os.path.join(_scratch("gpualign-host-"), "out.paf")
    # the engine chain replaced by a stand-in (a substitution, not a timing hook)
    stages.select_engines = lambda cfg: ([Instant()], "instant engine")
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
          + ", ".join(f"{k} {v:.3f}" for k, v in s.stage_seconds.items()) + f"; {s.notice}")
    if a.profile:
        prof = cProfile.Profile()
        prof.runcall(run)
        pstats.Stats(prof).sort_stats("tottime").print_stats(15)


# ------------------------------------------------------------------------------------------------- spans
class SpanRecorder:
    """Inclusive seconds and calls of every traced span, per thread (named without its number: the reader's
    pool threads are one row)."""

    def __init__(self):
        self.seconds: collections.Counter = collections.Counter()
        self.calls: collections.Counter = collections.Counter()

    @contextlib.contextmanager
    def span(self, name: str):
        import re
        import threading

        t0 = time.perf_counter()
        try:
            yield
        finally:
            key = (re.sub(r"[-_ ]?\d+$", "", threading.current_thread().name), name)
            self.seconds[key] += time.perf_counter() - t0
            self.calls[key] += 1


def spans_args(ap) -> None:
    ap.description = ("Busy seconds of every traced span (gpualign.trace: reading, aligning, formatting, writing), per "
                      "thread, of one gpualign command run in this process, given after --. Spans nest (a "
                      "span's seconds include those of the spans it calls), and threads overlap: compare rows, "
                      "not sums. Runs wherever the command does.")
    ap.add_argument("--top", type=int, default=40, help="rows printed")


def spans(a, extra: list) -> None:
    from gpualign import cli

    if not extra:
        sys.exit("spans: give the gpualign command after --, e.g. -- pairs A.fa B.fa -o out.paf")
    rec = SpanRecorder()
    trace.install(rec)
    sys.argv = ["gpualign", *extra]
    t0 = time.perf_counter()
    try:
        cli.app(prog_name="gpualign")
        code = 0
    except SystemExit as e:
        code = e.code or 0
    wall = time.perf_counter() - t0
    trace.install(None)
    print(f"gpualign {' '.join(extra)}: exit {code}, {wall:.3f} s in this process", file=sys.stderr)
    print(f"{'thread':<22} {'span':<26} {'seconds':>8} {'calls':>7}", file=sys.stderr)
    for (thread, name), sec in rec.seconds.most_common(a.top):
        print(f"{thread:<22} {name:<26} {sec:8.3f} {rec.calls[thread, name]:7d}", file=sys.stderr)
    sys.stderr.flush()
    cli.quick_exit(code)


# ------------------------------------------------------------------------------------------------ reader
def reader_args(ap) -> None:
    ap.description = ("The GPU reader of `gpualign pairs` alone (io/fastx_device.DevicePairReader): its batches of two "
                      "files, nothing aligned or written; one warm-up pass, then the timed ones (--cprofile: one "
                      "more under cProfile, its top functions by own time).")
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("--batch-bases", type=int, default=1 << 25)
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--cprofile", action="store_true")


def reader(a) -> None:
    from gpualign.io.fastx_device import DevicePairReader

    def one():
        t, n, k = time.perf_counter(), 0, 0
        for batch in DevicePairReader(a.a, a.b, a.batch_bases, 1 << 18):
            n, k = n + batch.n, k + 1
        return time.perf_counter() - t, n, k

    one()
    for _ in range(a.runs):
        dt, n, k = one()
        print(f"reader alone, batches of {a.batch_bases} bases: {dt:.3f} s, {n} pairs, {k} batches "
              f"({dt / max(k, 1) * 1e3:.2f} ms each)")
    if a.cprofile:
        cprofiled(one)


# ----------------------------------------------------------------------------------------------- targets
def targets_args(ap) -> None:
    ap.description = ("SAM's @SQ scan of a target file (io/targets.py) alone, or in a thread beside CuPy's import "
                      "and first device call (--beside-cupy: as `pairs -f sam` runs it on the GPU reader); each run "
                      "in this process, so run it once per setting for the figures beside CuPy.")
    ap.add_argument("path")
    ap.add_argument("--block-mb", type=int, default=0, help="the scan's block (0: its own)")
    ap.add_argument("--switch-ms", type=float, default=0.0, help="the interpreter's switch interval (0: as it is)")
    ap.add_argument("--beside-cupy", action="store_true")


def targets(a) -> None:
    import threading

    from gpualign.io import targets as T

    if a.block_mb:
        T.BLOCK = a.block_mb << 20
    if a.switch_ms:
        sys.setswitchinterval(a.switch_ms / 1e3)
    took: dict = {}

    def scan():
        t = time.perf_counter()
        found = T.scan(a.path)
        took["scan"], took["targets"] = time.perf_counter() - t, len(found)

    if not a.beside_cupy:
        scan()
    else:
        th = threading.Thread(target=scan)
        th.start()
        t = time.perf_counter()
        import cupy

        cupy.zeros(1).sum().item()
        took["cupy"] = time.perf_counter() - t
        th.join()
    print(", ".join(f"{k} {v:.3f} s" if isinstance(v, float) else f"{k} {v}" for k, v in took.items()))


# -------------------------------------------------------------------------------------------------- main
COMMANDS = {  # view: (its options, its run, one line for --help)
    "timeline": (timeline_args, timeline, "a gpualign paf or pairs command's events and kernels from its start (GPU)"),
    "stages": (stages_args, stages, "the pairs engine chain, each stage timed between device syncs (GPU)"),
    "edit": (edit_args, edit, "the eWFA engine: upload, kernels, host work per setting (GPU)"),
    "affine": (affine_args, affine, "the affine WFA engine alone: pairs/s and pairs per level (GPU)"),
    "genome": (genome_args, genome, "one long-string kernel run, for ncu and quick timing (GPU)"),
    "paf": (paf_args, paf, "gpualign paf's stages alone, then together (GPU with --device gpu)"),
    "host": (host_args, host, "the host side alone of pairs or paf, with an engine that answers at once"),
    "spans": (spans_args, spans, "busy seconds per traced span and thread of any gpualign command"),
    "reader": (reader_args, reader, "pairs' GPU reader alone: its batches of two files, timed (GPU)"),
    "targets": (targets_args, targets, "SAM's @SQ scan of a target file, alone or beside CuPy's start"),
}


def main() -> None:
    argv = sys.argv[1:]
    if argv[:1] == ["timeline-child"]:
        timeline_child(argv[1:])
        return
    extra = argv[argv.index("--") + 1:] if "--" in argv else []
    argv = argv[:argv.index("--")] if "--" in argv else argv
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="view", required=True)
    for name, (add_args, _, line) in COMMANDS.items():
        add_args(sub.add_parser(name, help=line))
    a = ap.parse_args(argv)
    run = COMMANDS[a.view][1]
    if a.view in ("timeline", "spans"):
        run(a, extra)
    elif extra:
        ap.error("options after -- are for the timeline and spans views only")
    else:
        run(a)


if __name__ == "__main__":
    main()
