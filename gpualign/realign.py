"""`gpualign paf`: exact re-alignment of PAF candidates (minimap2 without -c, or any PAF).

Per candidate: query[qs:qe) (reverse-complemented for '-') against the target window. Mode
``ends-free`` (default) pads the window by ``pad`` on both sides (clamped to the target) and leaves
the target's ends free, so approximate candidate ends cost nothing; ``global`` aligns the box end to
end. Output coordinates are always on the forward target strand.
"""

from __future__ import annotations

import contextlib
import time

from . import devices, trace, workers
from .config import EDIT_PENALTIES, AlignConfig
from .errors import ConfigError
from .io import fastx
from .io import fastx_device, paf_device
from .io import paf as P
from .io.faidx import drop_scratch, spool
from .io.fastx import streamed
from .output import parallel
from .output.formats import infer_format, name_notice, named_format
from .output.realigned import RealignedBam, RealignedPaf, RealignedSam, sa_entries
from .output.sam import check_rnames
from .realign_primary import Primaries, count_reads, match_reward6
from .realign_readers import Readers, worker_count
from .records import Names, PairBatch
from .stages import (Output, ReadAhead, Summary, aborting, check_output, dispatcher_summary, running, start_engines,
                     stream)

# formatting processes of PAF output: one keeps up with the aligner; more compete with the readers
PAF_FORMATTERS = 2
MODES = ("ends-free", "global")
PAF_FORMATS = ("paf", "sam", "bam")  # what `paf` writes (its records have no TSV form)


def _candidates(paf_path, queries, targets, mode, pad, skip_bad, skipped: list, warn, paf_name=None):
    """(candidate, query part, target window, window start, full query, quality, free ends) per
    candidate of the PAF, bad lines handled (appended to skipped with --skip-bad)."""
    def bad(e):
        skipped.append(e)
        warn(f"skipped: {e}")

    return P.fetch(P.read_candidates(paf_path, bad if skip_bad else None, name=paf_name), queries, targets, mode,
                   pad, bad if skip_bad else None, name=paf_name)


def run_paf(paf_path: str, query_path: str, target_path: str, out: str, fmt: str | None, cfg: AlignConfig,
            command_line: str, mode: str = "ends-free", pad: int = 100, cs: bool = False, skip_bad: bool = False,
            on_notice=None, progress=None, readers: int | None = None, cluster=None) -> Summary:
    """readers: worker processes fetching candidates (realign_readers; None: chosen from the input,
    0: in the reader thread). cluster: a cluster.ClusterSpec (batches aligned by Dask workers) or None."""
    if mode not in MODES:
        raise ConfigError(f"--mode must be one of {', '.join(MODES)} (got {mode!r})")
    if not 0 <= pad < 1 << 31:
        raise ConfigError(f"--target-pad must be >= 0 and < 2^31 (got {pad})")
    if cfg.distance_only:
        raise ConfigError("gpualign paf reports alignments: --distance-only is not available here")
    if target_path == "-":
        raise ConfigError("gpualign paf reads the target FASTA by random access: it cannot be '-' (stdin)")
    if paf_path == "-" and query_path == "-":
        raise ConfigError("only one of the candidates and the queries can be '-' (stdin)")
    cfg = cfg.with_(ends_free_target=(mode == "ends-free")).validate()
    if (fmt or named_format(out) or "").lower() == "tsv":
        raise ConfigError("gpualign paf writes paf, sam or bam")
    given, fmt = fmt, infer_format(fmt, out, False, PAF_FORMATS)
    if cluster is not None:
        cluster.validate(cfg.device)
    P.check(paf_path, skip_bad)  # the inputs' common errors before anything starts (Targets, Queries: theirs)
    check_output(out)
    t0 = time.perf_counter()
    try:
        return _realign(paf_path, query_path, target_path, out, fmt, cfg, command_line, mode, pad, cs, skip_bad,
                        on_notice or (lambda text: None), progress, readers, cluster, t0,
                        name_notice(given, out, fmt))
    finally:
        drop_scratch()  # indexes and copies made for this run


def _realign(paf_path, query_path, target_path, out, fmt, cfg, command_line, mode, pad, cs, skip_bad, say, progress,
             readers, cluster, t0, note: str | None) -> Summary:
    """note: -f against the output's name (formats.name_notice), said with the engines' notice."""
    # a pipe (a shell's <(...)) spooled to a file here, once: the reader processes forked below open the inputs
    # by name, and the pipe's bytes are gone (and its descriptor may be) by then (stdin: its copy, made below)
    query_path, target_path = (spool(p) if p != fastx.STDIN and streamed(p) else p for p in (query_path, target_path))
    targets = P.Targets(target_path)
    if fmt in ("sam", "bam"):  # (before anything is read or written)
        check_rnames(Names.of(list(targets.lengths)), fastx.display_name(target_path), "PAF")
    queries = P.Queries(query_path)
    paf_name = fastx.display_name(paf_path)
    if streamed(paf_path):  # stdin or a pipe, read twice (count_reads first): kept in the scratch directory
        paf_path = spool(paf_path)
    several, grouped = count_reads(paf_path)
    readers = worker_count(paf_path, readers)
    summary = Summary()
    skipped: list = []
    # the reader processes are forked first, then the PAF formatting processes (before the reader thread
    # and the GPU exist): lines formatted in the main thread compete with alignment for the interpreter;
    # few of them, as the readers need the cores (PAF_FORMATTERS)
    fmt_pool = ahead = dispatcher = None
    # PAF output on a GPU here: the readers send where the sequences are; their bytes are read into page-locked
    # memory here and laid out on the device (io/paf_device.py)
    raw = bool(readers) and fmt == "paf" and not cs and not cfg.n_mismatch and devices.batches_on_gpu(cfg, cluster)
    with Readers(readers, query_path, target_path, mode, pad, skip_bad, fmt != "paf", raw, (queries, targets)) \
            if readers else contextlib.nullcontext() as pool:
        # candidates are fetched from now on, in the reader thread (or by the worker processes it feeds),
        # while the engines start and then while the previous batch aligns (stages.stream)
        # else the batches' sequence bytes stay in pageable memory (the engines upload them from there, ahead
        # of their turn: Staging.prefetch): page-locking a new buffer per batch in flight is slow and holds
        # up the CUDA calls of the other threads meanwhile
        if pool is not None:
            def refetch(cands):  # a chunk the device refused, on the host: its error named, or bad ones skipped;
                # the chunks not yet sent go the host's way in the reader processes (a file with faults: each chunk
                # refused would be fetched again here, on one thread)
                pool.raw = False
                return P.fetch(cands, queries, targets, mode, pad, bad if skip_bad else None, False, paf_name)

            def bad(e):
                skipped.append(e)
                say(f"skipped: {e}")

            gather = paf_device.WindowGather((queries.fa.path, targets.fa.path)) if raw else None
            batches = _numbered(pool.item_lists(paf_path, cfg, skipped, say, paf_name), gather, refetch)
        else:
            items = _candidates(paf_path, queries, targets, mode, pad, skip_bad, skipped, say, paf_name)
            batches = _batches(items, cfg)
        try:
            # -t 0 (all cores): worker processes as many as the work is worth (about the query file's bases
            # twice, the targets' windows about as long as the reads: its index's lengths, read at its open);
            # -t N: N
            bases = 2 * sum(queries.fa.lengths.values()) if cfg.threads == 0 else None
            engine_threads, fmt_threads = workers.for_input(cfg.n_threads, bases)
            if fmt == "paf":
                fmt_pool = parallel.start_pool(fmt_threads, PAF_FORMATTERS)
            ahead = ReadAhead(batches, summary.stage_seconds)
            here = cluster is None or not cluster.wanted
            chain, summary.notice, dispatcher = start_engines(cfg.with_(threads=engine_threads) if here else cfg, cluster)
            if note:
                say(note)
            say(summary.notice)
            output = Output(out, binary_via_path=(fmt == "bam"))
            with running(chain, output, cfg):
                writer = {"paf": RealignedPaf, "sam": RealignedSam, "bam": RealignedBam}[fmt](
                    output.target, targets=targets, command_line=command_line, cs=cs, grouped=grouped,
                    paf_name=paf_name)
                sink = parallel.OrderedWriter(writer, fmt_pool, PAF_FORMATTERS) if fmt == "paf" else _WithMeta(writer)
                sink = Primaries(sink, several, skipped, keep_seq=(fmt == "paf" and cs),
                                 reward6=match_reward6(EDIT_PENALTIES if cfg.metric == "edit" else cfg.penalties),
                                 refetch=None if fmt == "paf" else lambda cands: [queries.get(c) for c in cands],
                                 sa_entries=None if fmt == "paf" else sa_entries)
                with aborting(writer):
                    stream(ahead, dispatcher, cfg, sink, summary, progress)
                    writer.close()
            dispatcher_summary(dispatcher, summary)
        finally:
            if dispatcher is not None:
                dispatcher.close()
            if ahead is not None:
                ahead.close()
            if fmt_pool is not None:
                fmt_pool.shutdown(wait=True, cancel_futures=True)
    summary.skipped += len(skipped)
    summary.seconds = time.perf_counter() - t0
    return summary


@trace.traced_items("batch read")
def _batches(items, cfg: AlignConfig):
    """PairBatches of candidates (cfg's batch bounds), each with its candidates' meta."""
    buf, bases, done = [], 0, 0
    for item in items:
        buf.append(item)
        bases += len(item[1]) + len(item[2])
        if bases >= cfg.batch_bases or len(buf) >= cfg.batch_pairs:
            yield _fetched_batch(buf, done)
            done += len(buf)
            buf, bases = [], 0
    if buf:
        yield _fetched_batch(buf, done)


def _fetched_batch(items: list, start: int) -> PairBatch:
    """The batch of io.paf.fetch's items (their sequences' bytes joined)."""
    return _batch(P.Fetched.of(items), start, parts=([it[1] for it in items], [it[2] for it in items]))


@trace.traced_items("batch read")
def _numbered(lists, gather=None, refetch=None):
    """PairBatches of Readers.item_lists' (fetched, joined sequences or None, segments), numbered on from 0: the
    segments' bytes laid out by gather (a paf_device.WindowGather), or where it refuses them fetched again by
    refetch(candidates) (io.paf.fetch's items). gather is closed at the end, in the thread that runs this (ReadAhead's,
    which closes the generator there when the run stops early)."""
    try:
        yield from _numbered_batches(lists, gather, refetch)
    finally:
        if gather is not None:
            gather.close()


def _numbered_batches(lists, gather, refetch):
    done = 0
    for fetched, seq, segs in lists:
        if segs is None:
            batch = _batch(fetched, done, seq)
        else:
            total = fetched.bases
            d_seq = gather.gather(*segs, total)
            if d_seq is None:
                items = list(refetch(list(fetched.cands)))
                if not items:
                    continue
                batch = _fetched_batch(items, done)
            else:
                batch = _batch(fetched, done, fastx_device.NO_SEQ)
                batch.defer_seq(fastx_device.host_copy(d_seq, total), total)
                batch.device = d_seq
        yield batch
        done += batch.n


@trace.traced("batch build")
def _batch(f: P.Fetched, start: int, joined=None, parts=None) -> PairBatch:
    """f's batch: its sequences already joined (joined), or as bytes (parts: the query parts', the windows')."""
    names = f.cands.qname, f.cands.tname
    if joined is None:
        batch = PairBatch.from_sequences(*parts, start, *names)
    else:
        batch = PairBatch.from_joined(joined, f.q_len, f.t_len, start, *names)
    batch.t_free = f.free
    batch.meta = {"cands": f.cands, "win_start": f.win_start, "full_query": f.full_query, "full_qual": f.full_qual}
    return batch


class _WithMeta:
    """The realigned writers behind stages.stream's writer interface (submit, flush): each batch
    carries its candidates' meta."""

    def __init__(self, writer):
        self.writer = writer

    def submit(self, batch, res, done) -> None:
        done(self.writer.write(batch, res, batch.meta))

    def flush(self) -> None:
        pass
