"""read -> route -> engines -> write, in input order, with per-stage timings.

Reading runs in a thread ahead of alignment (big inputs parsed by other
processes, or on the GPU); alignment of batch i+1 (and more, when the first engine
aligns several at once) runs in a thread while batch i is written (lines formatted
by worker processes, output/parallel.py, or, for PAF and TSV of inputs parsed on the
GPU, joined there: text_device.py). Output to a file goes to a temporary name that
is renamed only when everything was written.
"""

from __future__ import annotations

import contextlib
import time
from functools import partial

from . import devices, pack, scoring, text_device, workers
from .config import AlignConfig
from .engines import select_engines
from .engines.check import CheckEngine, judge
from .errors import ConfigError
from .io import fastx, fastx_device, pair_reader
from .io import targets as target_scan
from .io.faidx import drop_scratch, spool
from .output import parallel
from .output.formats import FORMATS, infer_format, name_notice
from .output.paf import PafWriter
from .output.sam import BamWriter, SamWriter, sq_lines
from .output.tsv import TsvWriter
from .progress import input_bases
from .stages import (
    Output,
    ReadAhead,
    Summary,
    aborting,
    check_output,
    dispatcher_summary,
    running,
    start_engines,
    stream,
    switching,
)

READ_WORKERS_MAX = 4  # parsing processes per plain or bgzip input (one per 4 threads: parts from -t 8 on)


def _reader(path_a: str, path_b: str, cfg: AlignConfig, cluster, quals: bool):
    """The batches of the two inputs: parsed on the GPU (io/fastx_device.py) when this process aligns on
    one and both are regular files (plain, gzip, bgzip) whose first records keep the fast path's rules;
    else by pair_reader, whose parsing processes for big inputs are forked now, before threads, engines and
    the GPU."""
    symbols = pack.symbols(cfg.general)
    if devices.batches_on_gpu(cfg, cluster) and all(fastx_device.usable(p, symbols) for p in (path_a, path_b)):
        return fastx_device.DevicePairReader(path_a, path_b, cfg.batch_bases, cfg.batch_pairs, symbols, quals,
                                             scoring.allowed_bytes(cfg))
    return pair_reader.read_pairs(path_a, path_b, cfg.batch_bases, cfg.batch_pairs,
                                  workers=min(READ_WORKERS_MAX, cfg.n_threads // 4), symbols=symbols)


WRITERS = {"paf": PafWriter, "sam": SamWriter, "tsv": TsvWriter, "bam": BamWriter}


def _writer(fmt: str, output: Output, targets, cfg: AlignConfig, command_line: str, protein, query_name: str):
    """The run's writer for fmt on output.target (targets: SAM's @SQ lines, {} for none)."""
    return WRITERS[fmt](output.target, targets=targets, command_line=command_line, metric=cfg.metric,
                        scored=cfg.general, residues=protein, query_name=query_name)


def _no_pairs(out: str, fmt: str, cfg: AlignConfig, command_line: str, query_name: str, protein, verify: float,
              cluster, note: str | None, on_notice) -> Summary:
    """The output of two empty inputs: SAM's and BAM's header (@HD, @PG), nothing in PAF and TSV. The devices
    asked for are checked as a run with pairs checks them (--device gpu, --gpus; a --scheduler is not asked);
    note: the notice of -f against the output's name (said by on_notice), or None."""
    t0 = time.perf_counter()
    select_engines(cfg)
    if cluster is not None and cluster.gpus:
        devices.present(cluster.gpus)
    if note:
        on_notice(note)
    output = Output(out, binary_via_path=(fmt == "bam"))
    with running([], output, cfg):
        writer = _writer(fmt, output, {}, cfg, command_line, protein, query_name)
        with aborting(writer):
            writer.close()
    summary = Summary()
    summary.verified_by = judge(cfg) if verify > 0 else ""  # (its rows in the summary: recall '-')
    summary.seconds = time.perf_counter() - t0
    return summary


def run_pairs(path_a: str, path_b: str, out: str, fmt: str | None, cfg: AlignConfig, command_line: str,
              progress=None, on_notice=None, verify: float = 0.0, cluster=None) -> Summary:
    """cluster: a cluster.ClusterSpec (batches aligned by Dask workers) or None (this process)."""
    cfg.validate()
    given, fmt = fmt, infer_format(fmt, out, cfg.distance_only)
    protein = scoring.residues(cfg)  # (the matrix loaded: its errors first)
    if fmt == "bam" and protein:
        raise ConfigError("BAM cannot hold protein sequences (its SEQ is a 4-bit nucleotide code): "
                          "write SAM, PAF or TSV")
    if path_a == "-" and path_b == "-":
        raise ConfigError("only one of the two inputs can be '-' (stdin)")
    if cluster is not None:
        cluster.validate(cfg.device)
    if cfg.general:  # --matrix and --unknown checked (the table loaded) before anything starts
        scoring.substitution(cfg)
    # missing, unreadable or not FASTA/FASTQ: before anything starts; two empty files are no pairs (as minimap2
    # takes an empty reads file: the output's header alone, exit 0), one empty file an error
    empty = [fastx.sniff(path, empty_ok=True) for path in (path_a, path_b)]
    for path, other, e in zip((path_a, path_b), (path_b, path_a), empty):
        if e and not all(empty):
            raise fastx.empty_file(fastx.display_name(path), "two empty inputs are no pairs only as files, not "
                                   "stdin or a pipe" if fastx.streamed(other) else "")
    check_output(out)
    note = name_notice(given, out, fmt) if on_notice else None  # (said with the engines' notice, after the checks)
    if all(empty):
        return _no_pairs(out, fmt, cfg, command_line, fastx.display_name(path_a), protein, verify, cluster,
                         note, on_notice)
    t0 = time.perf_counter()
    spooled = reader = fmt_pool = ahead = dispatcher = scanner = None
    try:
        sam = fmt in ("sam", "bam")
        target_name = fastx.display_name(path_b)
        if sam and fastx.streamed(path_b):  # stdin or a pipe: read twice (the @SQ lines first)
            spooled = path_b = spool(path_b)
        # SAM's @SQ lines (the target file's names and lengths): a big file's made by a child process forked
        # now, before the reader's threads (once driver.py's thread has made the CUDA context: every fork
        # waits for it), beside the start-up and the first batches (the writer waits for them with its
        # first lines)
        targets = target_scan.scan_beside(path_b, pack.symbols(cfg.general), partial(sq_lines, source=target_name)) \
            if sam else {}
        if isinstance(targets, workers.Forked):
            scanner = targets
        reader = _reader(path_a, path_b, cfg, cluster, quals=sam)
        # -t 0 (all cores): worker processes as many as the input is worth; -t N: N
        bases = input_bases(path_a, path_b) if cfg.threads == 0 else None
        engine_threads, fmt_threads = workers.for_input(cfg.n_threads, bases)
        # PAF and TSV lines of inputs parsed on the GPU are formatted there (text_device.py), and SAM's (BAM's
        # text) where they hold CIGARs of edit or gap-affine alignments; others in worker processes, forked
        # now too
        gpu_read = isinstance(reader, fastx_device.DevicePairReader)
        on_device = gpu_read and (fmt in ("paf", "tsv") or (fmt in ("sam", "bam") and not cfg.distance_only
                                                              and not cfg.general and not protein))
        if gpu_read:  # every batch's sequences read on the host too: copied back as they are read
            reader.host_seq = (fmt == "bam" or (sam and not on_device) or cfg.n_mismatch or verify > 0
                               or (cfg.general and cfg.scoring.unknown is not None))
        if fmt in FORMATS and not on_device:
            fmt_pool = parallel.start_pool(fmt_threads)
        summary = Summary()
        # batches are made while the engines start (cupy, the CUDA context, kernels): the first ones in
        # pageable memory, then, once a GPU engine runs, in page-locked memory (host_allocator)
        batches = scoring.checked(reader, cfg, path_a, path_b, done=lambda b: b.device is not None) \
            if cfg.general else reader  # (the device reader's batches checked by its kernels)
        ahead = ReadAhead(batches, summary.stage_seconds)
        here = cluster is None or not cluster.wanted
        pool_cfg = cfg.with_(threads=engine_threads) if here else cfg
        chain, notice, dispatcher = start_engines(pool_cfg, cluster)
        checker = CheckEngine(pool_cfg.n_threads) if verify > 0 else None  # its processes forked with the engines'
        summary.verified_by = judge(cfg) if checker else ""
        if dispatcher.in_process:  # (not a Dask cluster's)
            reader.alloc = dispatcher.host_allocator()
        summary.notice = notice
        if note:
            on_notice(note)
        if on_notice:
            on_notice(notice)
        output = Output(out, binary_via_path=(fmt == "bam"))
        with running(chain + [checker] * (checker is not None), output, cfg):
            writer = _writer(fmt, output, targets, cfg, command_line, protein, fastx.display_name(path_a))
            lines = text_device.DeviceLines() if on_device else None
            if lines is not None and lines.ready():  # (else joined here by numpy: CuPy unusable after all)
                writer.fmt.lines = lines
            # the switch interval shortened where three threads share the interpreter (reading on the GPU,
            # aligning, writing)
            with aborting(writer), switching() if gpu_read else contextlib.nullcontext():
                stream(ahead, dispatcher, cfg, parallel.OrderedWriter(writer, fmt_pool), summary, progress, verify,
                       checker)
                writer.close()
        dispatcher_summary(dispatcher, summary)
    finally:
        if dispatcher is not None:
            dispatcher.close()
        if ahead is not None:
            ahead.close()
        if reader is not None:
            reader.abort()
        if fmt_pool is not None:
            fmt_pool.shutdown(wait=True, cancel_futures=True)
        if scanner is not None:
            scanner.close()
        if spooled:
            drop_scratch()
    summary.seconds = time.perf_counter() - t0
    return summary


