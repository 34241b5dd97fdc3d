"""Progress of long runs on stderr: a live line (rich) on a terminal, else a line every INTERVAL_S like
minimap2's `[M::...]` lines; nothing with -q (the commands then pass no reporter).

pairs/paf: records and bases done and the rate. genome: the GPU kernels' own figures; the CPU kernel (one
C call that reports nothing) as elapsed time against the time expected from the sampled divergence.
"""

from __future__ import annotations

import sys
import threading
import time
from contextlib import contextmanager

INTERVAL_S = 10.0  # between two lines off a terminal


def duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"


class _Lines:
    """A line on stream at most every interval seconds (the first after interval)."""

    def __init__(self, tag: str, stream=None, interval: float | None = None):
        self.tag, self.stream = tag, stream or sys.stderr
        self.interval = INTERVAL_S if interval is None else interval
        self.t0 = self.last = time.monotonic()

    def due(self) -> bool:
        now = time.monotonic()
        if now - self.last < self.interval:
            return False
        self.last = now
        return True

    def say(self, text: str) -> None:
        print(f"[M::{self.tag}::{time.monotonic() - self.t0:.1f}] {text}", file=self.stream, flush=True)


def _rate(pairs: int, bases: int, seconds: float) -> str:
    s = max(seconds, 1e-9)
    return f"{pairs:,} records, {bases / 1e6:,.1f} Mbp, {pairs / s:,.0f} records/s, {bases / s / 1e6:,.2f} Mbp/s"


@contextmanager
def _reporter(console, tag: str, quiet: bool, first: str):
    """show(text, due: bool) for a reporter: a rich live line on a terminal (first: its text at the start),
    else a line when due; None with quiet."""
    if quiet:
        yield None
    elif console.is_terminal:
        from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

        with Progress(SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(), console=console,
                      transient=True) as bar:
            task = bar.add_task(first)
            yield lambda text: bar.update(task, description=text)
    else:
        lines = _Lines(tag, console.file)
        yield lambda text: lines.due() and lines.say(text)


@contextmanager
def records(console, tag: str, quiet: bool):
    """report(records, bases) for pipeline.stream, or None with quiet."""
    t0 = time.monotonic()
    with _reporter(console, tag, quiet, "aligning") as show:
        yield show and (lambda p, b: show(_rate(p, b, time.monotonic() - t0)))


def describe_genome(p: dict) -> str:
    """One line for a genome progress report (the GPU kernels' dicts, or the CPU's: kernel 'cpu')."""
    if p["kernel"] == "cpu":
        left = p["expected"] - p["elapsed"]
        eta = f"about {duration(left)} left" if left > 0 else "longer than expected"
        return (f"cpu-{p['method']}  {p['pair']}  {duration(p['elapsed'])} of ~{duration(p['expected'])} "
                f"expected ({eta})")
    if p["kernel"] == "path":  # the alignment path: Hirschberg levels
        return f"alignment path  level {p['level']}  pieces {p['pieces']:,} ({p['splitting']:,} to split)"
    if p["kernel"] == "bp":  # banded bit-parallel: strips of 1024 rows taken so far
        done = 100.0 * p["strips_taken"] / max(1, p["strips"])
        return (f"bit-parallel  band {p['band']:,} (pass {p['band_pass']})  "
                f"strips {p['strips_taken']:,}/{p['strips']:,} {done:.1f}%")
    done = 100.0 * max(p["final_offset"], 0) / max(1, p["target_len"])
    return (f"score {p['score']:,}  bound {p['bound']:,}  diagonals {p['diagonals']:,}  "
            f"final diagonal {done:.1f}%")


@contextmanager
def genome(console, quiet: bool):
    """report(dict) for genome.run_genome, or None with quiet."""
    with _reporter(console, "genome", quiet, "computing") as show:
        yield show and (lambda p: show(describe_genome(p)))


@contextmanager
def ticking(report, info: dict, every: float = 1.0):
    """report(info + elapsed) every `every` seconds from a thread while the block runs (a C call that
    reports nothing); nothing when report is None."""
    if report is None:
        yield
        return
    stop = threading.Event()
    t0 = time.monotonic()

    def tick():
        while not stop.wait(every):
            report({**info, "elapsed": time.monotonic() - t0})

    thread = threading.Thread(target=tick, name="gpualign-progress", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
