"""Progress of long runs on stderr: a live line (rich) on a terminal, else a line every INTERVAL_S like
minimap2's `[M::...]` lines; nothing with -q (the commands then pass no reporter).

pairs/paf/search: records and bases done and the rate, and where the input's size is known (a file, not
stdin) the share done and the time left (Total: the bases of the FASTA/FASTQ inputs from their .fai, or
their size times the density of their first MiB, compressed bytes for gzip; paf: the PAF file's lines,
so estimated). genome: the GPU kernels' own figures; the CPU kernel (one C call that reports nothing) as
elapsed time against the time expected from the sampled divergence; on a cluster, the record pairs done.
"""

from __future__ import annotations

import os
import stat
import sys
import threading
import time
import zlib
from contextlib import contextmanager
from dataclasses import dataclass

INTERVAL_S = 10.0  # between two lines off a terminal
SAMPLE = 1 << 20  # the bytes of an input read to estimate its size in bases (or lines)
STEP = 1 << 10  # compressed bytes inflated at a time for that sample


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


@dataclass(frozen=True)
class Total:
    """What a run's input holds, known or estimated before it starts: bases (FASTA/FASTQ) or records (PAF
    lines); None where it is not known (stdin)."""

    bases: float | None = None
    records: float | None = None

    def share(self, records: int, bases: int) -> float | None:
        """The share of the input done, below 1 (an estimate may fall short), or None."""
        if self.bases:
            return min(bases / self.bases, 0.99)
        if self.records:
            return min(records / self.records, 0.99)
        return None


def _sample(path: str):
    """(the first SAMPLE bytes of path, decompressed if gzip; the file bytes they came from; the file's
    size), or None for stdin, a pipe, an empty or unreadable file."""
    try:
        st = os.stat(path)
        if path == "-" or not stat.S_ISREG(st.st_mode) or st.st_size == 0:
            return None
        with open(path, "rb") as fh:
            raw = fh.read(SAMPLE)
        if raw[:2] != b"\x1f\x8b":
            return raw, len(raw), st.st_size
        # gzip members (bgzip writes many; the last one cut short), inflated STEP compressed bytes at a
        # time until SAMPLE bytes of text are out: bounded (1 MiB of Ns inflates to 1 GB), and the bytes
        # they came from counted
        text, out, pos = [], 0, 0
        while raw[pos:pos + 2] == b"\x1f\x8b" and out < SAMPLE:
            d = zlib.decompressobj(31)
            while not d.eof and pos < len(raw) and out < SAMPLE:
                chunk = raw[pos:pos + STEP]
                text.append(d.decompress(chunk))
                out += len(text[-1])
                pos += len(chunk) - len(d.unused_data)  # (the bytes after a member's end: the next one's)
        return b"".join(text), pos, st.st_size
    except (OSError, zlib.error):
        return None


def _fai_bases(data: bytes) -> int | None:
    """The sum of a .fai's second column (its records' lengths) at once with numpy (a read's .fai has a line a
    read); None where a line is not plain (no two tabs, not digits, blank, no line end last)."""
    import numpy as np

    raw = np.frombuffer(data, np.uint8)
    ends = np.flatnonzero(raw == 10)
    if not len(ends) or ends[-1] != len(raw) - 1:
        return None
    tabs = np.flatnonzero(raw == 9)
    first = np.searchsorted(tabs, np.r_[0, ends[:-1] + 1])
    if len(tabs) < 2 or first[-1] + 1 >= len(tabs):
        return None
    a, b = tabs[first], tabs[first + 1]
    width = b - a - 1
    if (b > ends).any() or (width < 1).any() or (width > 18).any():
        return None
    from .text import read_ints

    value = read_ints(raw, a + 1, width)
    return None if value is None else sum(value.tolist())  # (Python ints: no int64 wrap-around)


def input_bases(*paths: str) -> float | None:
    """The bases of FASTA/FASTQ files: an index's (.fai) sum when there is one, else each file's size times
    the bases per byte of its first SAMPLE bytes (per compressed byte for gzip); None if any is stdin or
    cannot be read."""
    total = 0.0
    for path in paths:
        try:
            if os.path.getmtime(f"{path}.fai") < os.path.getmtime(path):  # stale: it tells another file
                raise OSError
            with open(f"{path}.fai", "rb") as fh:
                data = fh.read()
            bases = _fai_bases(data)
            total += bases if bases is not None else sum(int(line.split(b"\t")[1]) for line in data.split(b"\n")
                                                         if line.strip())
            continue
        except (OSError, ValueError, IndexError):
            pass
        head = _sample(path)
        if head is None or not head[1]:
            return None
        text, used, size = head
        whole = used == size
        if text[:1] == b"@":  # FASTQ: the second line of every four, in the whole records sampled
            lines = text.split(b"\n")
            lines = lines if whole else lines[:(len(lines) - 1) // 4 * 4]
            seqs, part = lines[1::4], sum(len(line) + 1 for line in lines)
        else:  # FASTA: the lines but headers, in the whole records sampled
            part = len(text) if whole or text.rfind(b"\n>") <= 0 else text.rfind(b"\n>") + 1
            seqs = [line for line in text[:part].split(b"\n") if line[:1] != b">"]
        bases = sum(len(line.rstrip(b"\r")) for line in seqs)
        total += size * (len(text) / used) * (bases / max(1, part))  # file bytes -> text bytes -> bases
    return total


def input_lines(path: str) -> float | None:
    """The lines of a text file (PAF): its size times the lines per byte of its first SAMPLE bytes; None
    for stdin or a file that cannot be read."""
    head = _sample(path)
    if head is None or not head[1]:
        return None
    text, used, size = head
    return max(1, text.count(b"\n")) * size / used


LEFT_FROM = 0.01  # the share done from which the time left is told (before it, the first small batches' pace
# told a million-read run "about 11.6 h left")


def _done(share: float | None, seconds: float) -> str:
    """'42% done, about 1.2 min left; ' (first: a narrow terminal cuts the line's end), or nothing when the
    share is not known."""
    if share is None:
        return ""
    left = f", about {duration(seconds * (1 - share) / share)} left" if LEFT_FROM <= share < 0.99 else ""
    return f"{100 * share:.0f}% done{left}; "


@contextmanager
def _reporter(console, tag: str, quiet: bool, first: str):
    """show(text) for a reporter: a rich live line on a terminal (first: its text at the start), else a line
    every INTERVAL_S; None with quiet."""
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
def records(console, tag: str, quiet: bool, total: Total = Total()):
    """report(records, bases) for stages.stream and search (called once per batch or chunk), or None
    with quiet. total: the input's size, for the share done and the time left."""
    t0 = time.monotonic()
    with _reporter(console, tag, quiet, "aligning") as show:
        def report(p: int, b: int) -> None:
            seconds = time.monotonic() - t0
            show(_done(total.share(p, b), seconds) + _rate(p, b, seconds))

        yield show and report


def describe_genome(p: dict) -> str:
    """One line for a genome progress report (the GPU kernels' dicts, or the CPU's: kernel 'cpu')."""
    if p["kernel"] == "cpu":
        left = p["expected"] - p["elapsed"]
        eta = f"about {duration(left)} left" if left > 0 else "longer than expected"
        return (f"cpu-{p['method']}  {p['pair']}  {duration(p['elapsed'])} of ~{duration(p['expected'])} "
                f"expected ({eta})")
    if p["kernel"] in ("cluster", "gpus"):  # record pairs on Dask workers, or on this host's GPUs (--gpus)
        where = "worker(s)" if p["kernel"] == "cluster" else "GPU slot(s)"
        return (f"record pairs: {p['done']:,} done, {p['running']:,} running on {p['workers']:,} {where}, "
                f"{duration(p['elapsed'])}")
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
