"""`gpualign search`: patterns -> engine over the streamed text -> hits -> writer, with a summary. With --gpus
the engine's candidate scan runs on this host's GPUs (a search engine per device, devices.py), with a cluster
(--scheduler/--cpu-workers) on Dask workers, chunk by chunk; everything else stays here, in chunk order, so
the output is the same bytes."""

from __future__ import annotations

import itertools
import signal
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace

import numpy as np

from .. import interrupt, memory, trace
from ..config import SearchConfig
from ..devices import present
from ..errors import ConfigError
from ..progress import input_bases
from ..stages import Output, ReadAhead, WriteBehind, check_output, in_order
from ..workers import ENGINE_BASES, fork_pool, sized
from . import patterns as PT
from .engines import device_set, engine_class, remote_engine, scan_on
from .hits import Cands, Collector, FallbackAligner
from .output import HitWriter, infer_format
from .text import TextReader

CHUNK = 1 << 26  # text bases per chunk (either engine; a plain file read by workers: text_ranges.RANGE bytes at
# most): the last chunk's hits are aligned and written once the search is over, so a smaller chunk ends the
# run sooner (docs/notes/benchmark-history.md)
WARN_HITS = 1_000_000
STOP_WAIT = 10.0  # seconds a failing run waits for its reading, search and writing threads to stop (a chunk's work)


@dataclass
class SearchSummary:
    patterns: int = 0
    pattern_strands: int = 0
    records: int = 0
    bases: int = 0
    hits: int = 0
    engine: str = ""
    seconds: float = 0.0
    capped: list = field(default_factory=list)
    stage_seconds: dict = field(default_factory=lambda: {"read": 0.0, "search": 0.0, "align": 0.0, "write": 0.0})
    per_pattern: np.ndarray = None  # hits found per pattern (one over --max-hits-per-pattern: until it was)
    extra: list = field(default_factory=list)  # (key, value) rows of a cluster run: per worker, retried

    def rows(self) -> list[tuple[str, str]]:
        rate = self.patterns * self.bases / self.seconds if self.seconds > 0 else 0.0
        rows = [("patterns", str(self.patterns)), ("pattern_strands", str(self.pattern_strands)),
                ("records", str(self.records)), ("bases", str(self.bases)), ("hits", str(self.hits)),
                ("engine", self.engine), ("wall_seconds", f"{self.seconds:.3f}"),
                ("pattern_bases_per_second", f"{rate:.4g}")]
        rows += [(f"{k}_seconds", f"{v:.3f}") for k, v in self.stage_seconds.items()]
        rows += memory.peak_rows()
        rows += self.extra
        if self.capped:
            shown = ",".join(self.capped[:20]) + (f",... ({len(self.capped)} in all)" if len(self.capped) > 20 else "")
            rows.append(("capped_patterns", shown))
        return rows


def run_search(patterns_path: str, text_path: str, out: str, fmt: str | None, cfg: SearchConfig,
               command_line: str, notice=None, report=None, cluster=None) -> SearchSummary:
    """report(records, bases) after each chunk of text (progress), when given. cluster: a cluster.ClusterSpec
    (the candidate scan on this host's GPUs, --gpus, or on Dask workers) or None (this process)."""
    t0 = time.perf_counter()
    cfg.validate()
    if patterns_path == "-" and text_path == "-":  # (the patterns would take stdin, the text find it empty)
        raise ConfigError("only one of the two inputs can be '-' (stdin)")
    if cluster is not None and not (cluster.wanted or cluster.gpus):
        cluster = None
    if cluster is not None:
        cluster.validate(cfg.device)
    fmt = infer_format(fmt, out)
    here = cluster is None or not cluster.wanted  # (this process, or this host's GPUs from it)
    if cfg.threads == 0 and here:  # -t 0: worker processes as many as the text is worth
        cfg = replace(cfg, threads=sized(cfg.n_threads, input_bases(text_path), ENGINE_BASES))
    pats = PT.read(patterns_path, cfg.k, cfg.strand, cfg.force)
    if fmt in ("sam", "bam"):
        PT.check_sam_names(pats, patterns_path)
    TextReader.check(text_path)  # before any engine starts
    check_output(out)  # (its one line before the engine's notice)
    summary = SearchSummary(patterns=len(pats.names), pattern_strands=pats.n)
    pool = worker_pool(cfg.n_threads)  # forked now: before CUDA and any thread
    try:
        _search(pats, text_path, out, fmt, cfg, command_line, notice, summary, pool, report, cluster)
    finally:
        _shutdown(pool)  # (its workers would outlive an error: each holds the others' pipes open)
    if cfg.max_hits:
        summary.capped = [pats.names[i] for i in np.flatnonzero(summary.per_pattern > cfg.max_hits).tolist()]
        if summary.capped and notice:
            notice(f"{len(summary.capped)} pattern(s) reached --max-hits-per-pattern {cfg.max_hits}: "
                   f"{', '.join(summary.capped[:5])}{' ...' if len(summary.capped) > 5 else ''}")
    summary.seconds = time.perf_counter() - t0
    return summary


def _search(pats, text_path: str, out: str, fmt: str, cfg: SearchConfig, command_line: str, notice,
            summary: SearchSummary, pool, report=None, cluster=None) -> None:
    """The text through the engine (here, or on cluster's workers), the collector and the writer (run_search's
    body)."""
    # the engine: its name and chunk geometry. Unless --device cpu, CuPy and the driver load in a thread while the
    # first chunk is read (the GPU engine's geometry serves the CPU one too)
    probe = engine = stream = threads = None
    if cluster is not None:
        kind = remote_engine(cfg, cluster)
    elif cfg.device == "cpu":
        kind = engine_class(cfg, notice)
        engine = kind.make(pats, cfg)
    else:
        from .gpu import GpuSearchEngine

        threads = ThreadPoolExecutor(1)
        kind, probe = GpuSearchEngine, threads.submit(engine_class, cfg, notice)
    context, gap = kind.geometry(pats, cfg.k)
    summary.engine = kind.name
    chunk = cfg.chunk_bases or CHUNK
    # (the pool reads a plain file too; record names unique for SAM/BAM's @SQ lines only)
    reader = TextReader(text_path, chunk, context, gap, pool, cfg.n_threads, unique=fmt in ("sam", "bam"))
    collector = Collector(pats, cfg.k, cfg.all_ends, cfg.rule, pool)
    output = Output(out, binary_via_path=(fmt == "bam"))
    writer = remote = ahead = scanned = behind = None
    per_pattern = np.zeros(len(pats.names), np.int64)
    warned = False
    try:
        if cluster is not None:
            from ..cluster import ClusterAligner

            remote = (device_set(pats, cfg, present(cluster.gpus)) if cluster.gpus
                      else ClusterAligner(cluster, cfg, units=("bases", "chunks")))
            started = remote.start()
            if notice:
                notice(f"engine: {kind.name}; {started}" if cluster.gpus else started)
            if cluster.gpus:  # the hits aligned here, on the first live device (the CPU once it fails)
                import cupy

                cupy.cuda.Device(remote.live()[0].device).use()
                collector.aligner = FallbackAligner(remote.engines.aligner())
        elif engine is not None:
            engine.start()
        interrupt.phase("pools")
        chunks = stream = iter(reader)
        if probe is not None:  # the first chunk read meanwhile (the ranges after it go on in the workers)
            t1 = time.perf_counter()
            first = list(itertools.islice(stream, 1))
            summary.stage_seconds["read"] += time.perf_counter() - t1
            kind = probe.result()
            threads.shutdown(wait=True)  # (no thread but the pool's own while the CPU engine forks)
            summary.engine = kind.name
            engine = _started(kind, pats, cfg)
            chunks = _after(first, stream)
        writer = HitWriter(fmt, output.target, pats, command_line)
        behind = WriteBehind(writer.write, summary.stage_seconds, "write")  # the writing of a chunk's hits
        ahead = ReadAhead(chunks, summary.stage_seconds, ahead=1)  # overlaps the next one's alignments
        if engine is not None:
            collector.aligner = engine.aligner()
        scanned = _scanned(ahead, engine, remote, pats, summary)
        for ch, cands in scanned:
            t1 = time.perf_counter()
            summary.bases += int(ch.length.sum())
            if cfg.max_hits:
                cands = _within_cap(cands, pats, per_pattern, cfg.max_hits)
            complete, hits = collector.add(ch, cands, cfg.max_hits + 1 - per_pattern if cfg.max_hits else None)
            if len(complete):
                if cfg.max_hits:
                    hits = _cap(hits, pats, per_pattern, cfg.max_hits)
                else:
                    np.add.at(per_pattern, pats.pattern[hits.ps], 1)
                summary.hits += hits.n
                done = (complete, *_named(reader.records, complete), hits)
                summary.stage_seconds["align"] += time.perf_counter() - t1
                interrupt.phase("write")
                behind.submit(done)  # (waits while the writer is two behind)
                t1 = time.perf_counter()
            if not cfg.max_hits and not warned and per_pattern.max(initial=0) > WARN_HITS and notice:
                worst = pats.names[int(per_pattern.argmax())]
                notice(f"warning: pattern {worst!r} has over {WARN_HITS:,} hits (see --max-hits-per-pattern)")
                warned = True
            reader.release(ch)  # (its buffer may now hold a later chunk: its scan is done)
            if report is not None:
                report(len(reader.records.names), summary.bases)
            summary.stage_seconds["align"] += time.perf_counter() - t1
        summary.records = len(reader.records.names)
        behind.close()
        writer.close()
        output.commit()
        if remote is not None:  # the search stage: the workers' busy time
            summary.extra = remote.rows()
            summary.stage_seconds["search"] = sum(w.busy for w in remote.stats.values())
    except BaseException:
        if behind is not None:
            behind.abort(wait=STOP_WAIT)  # (not writing while the output is dropped)
        if writer is not None:
            writer.abort()
        output.abort()
        raise
    finally:
        try:
            # the reading thread first (its scanner frees its slots), then the search thread, which may be
            # waiting for the next chunk, before the engine closes under it
            if interrupt.signalled() is None:  # (not waiting for slots the stopped consumers keep; after a signal
                reader.stop()  # the process ends now, the reading thread as it is: unwinding, it would race the
                # handler's end of multiprocessing's resource tracker, which then warns on stderr)
            if ahead is not None:
                ahead.close(wait=STOP_WAIT)
            elif stream is not None:  # (stopped before the reading thread started)
                stream.close()
            if scanned is not None:
                scanned.close()
            if threads is not None:  # (stopped early: CuPy's loading ends first)
                threads.shutdown(wait=True)
            if engine is not None:
                engine.close()
        finally:
            if remote is not None:
                remote.close()
    summary.per_pattern = per_pattern


@trace.traced("engine start")
def _started(kind, pats, cfg: SearchConfig):
    engine = kind.make(pats, cfg)
    engine.start()
    return engine


def _named(records, complete: np.ndarray) -> tuple[list, list]:
    """The names and lengths of these records (indices, ascending: as a rule consecutive, a slice)."""
    a, b = int(complete[0]), int(complete[-1]) + 1
    if b - a == len(complete):
        return records.names[a:b], records.lengths[a:b]
    return [records.names[r] for r in complete.tolist()], [records.lengths[r] for r in complete.tolist()]


def _after(first: list, rest):
    """The items of first, then those of the generator rest, which is closed when this one is."""
    try:
        yield from first
        yield from rest
    finally:
        rest.close()


def _scanned(chunks, engine, remote, pats, summary: SearchSummary):
    """(chunk, its Cands) per chunk of text, in order: from this process's engine, or with remote (a started
    cluster.ClusterAligner, or devices.DeviceSet for this host's GPUs) from its workers, at most remote.window
    chunks in flight (summary.engine: the engines they ran)."""
    if remote is None:
        def scan():
            pending = None  # the chunk submitted before, collected once the next one is submitted
            for ch in itertools.chain(chunks, [None]):  # None: the end
                t = time.perf_counter()
                interrupt.phase("search")
                now = (ch, engine.submit(ch)) if ch is not None else None
                cands = engine.collect(pending[1]) if pending is not None else None
                summary.stage_seconds["search"] += time.perf_counter() - t
                if pending is not None:
                    yield pending[0], cands
                pending = now

        # a thread searches the next chunks (one submitted while the one before runs) while this one's hits
        # are aligned and written
        ahead = ReadAhead(scan(), summary.stage_seconds, ahead=1, stage=None)
        try:
            yield from ahead
        finally:
            ahead.close(wait=STOP_WAIT)
        return
    bare = PT.Patterns([], pats.codes, pats.pattern, pats.minus)  # what the engines use, sent with each chunk
    ran = set()

    def submit(ch):
        bases = int(ch.length.sum())
        if remote.in_process:
            return remote.submit_task(scan_on, ch, pairs=bases)
        from ..cluster_worker import search_chunk  # (Dask's, imported with it)

        return remote.submit_task(search_chunk, bare, ch, remote.cfg, pairs=bases)

    for done, fut, _ in in_order(chunks, submit, lambda pending: len(pending) >= remote.window):
        interrupt.phase("search")
        cands, counts = fut.result()
        ran.update(counts)
        summary.engine = ",".join(sorted(ran))
        yield done, cands


def _init_worker() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent ends the workers
    _keep_heap()


M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3  # glibc's mallopt parameters
KEEP_BELOW = 64 << 20  # blocks under this many bytes come from the heap (a range's 32 MiB and its codes)
TRIM_ABOVE = 256 << 20  # free bytes at the heap's top past which they go back to the kernel


def _keep_heap() -> None:
    """Blocks of a range's size from the heap, kept there once freed (glibc's mallopt; elsewhere nothing). A
    range's bytes (32 MiB) pass glibc's default largest mmap threshold, so each read and each translation got
    fresh pages from the kernel and faulted them all in: on the dev machine a 32 MiB range took 57 ms to read
    and translate, 25 ms with the heap kept (docs/notes/benchmark-history.md). Larger blocks (the hits' DP) are still
    mapped and given back."""
    import ctypes

    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (AttributeError, OSError):  # (not glibc)
        return
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    if mallopt(M_MMAP_THRESHOLD, KEEP_BELOW) == 1:  # (a glibc that refuses it keeps its own thresholds)
        mallopt(M_TRIM_THRESHOLD, TRIM_ABOVE)


def worker_pool(threads: int):
    """Worker processes, all forked at once, that read a plain text file's ranges (text.py) and align the
    hits (hits.trace); None for one thread."""
    if threads <= 1:
        return None
    return fork_pool(threads, _init_worker)


def _shutdown(pool) -> None:
    if pool is not None:
        pool.shutdown(wait=True, cancel_futures=True)


def _within_cap(cands: Cands, pats, per_pattern: np.ndarray, cap: int) -> Cands:
    """The candidates of the patterns not yet over cap: a pattern whose hits in the records written so far
    passed it has none left to write (every later record comes after them in the output), so its candidates
    are not traced (a repeat's hits in every chunk of a genome)."""
    keep = per_pattern[pats.pattern[cands.ps]] <= cap
    if keep.all():
        return cands
    idx = np.flatnonzero(keep)
    return Cands(cands.ps[idx], cands.piece[idx], cands.pos[idx], cands.d[idx])


def _cap(hits, pats, per_pattern: np.ndarray, cap: int):
    """The hits that keep each pattern within cap (in output order); per_pattern counts every hit found (of a
    pattern over the cap: those traced, at least one past the cap, as Collector._within and _within_cap let
    through), so that a pattern over the cap shows as count > cap."""
    pat = pats.pattern[hits.ps]
    order = np.argsort(pat, kind="stable")
    sp = pat[order]
    first = np.searchsorted(sp, sp, side="left")
    rank = np.empty(len(pat), np.int64)
    rank[order] = np.arange(len(pat)) - first + per_pattern[sp]
    np.add.at(per_pattern, pat, 1)
    return hits.take(np.flatnonzero(rank < cap))
