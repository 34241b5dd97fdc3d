"""`gpualign genome`: exact edit distance, or an optimal alignment, of chromosome-scale strings.

Record i of A against record i of B (or the records named with --query-record/--target-record),
one pair in memory at a time (each computed by genome_pair.py: GPU engines/gpu_long.py for the distance
and genome_path.py for the alignment; CPU engines/cpu_long.py). Here: the records, the pairs in flight
(several on the CPU, on --gpus devices or Dask workers), their output.
"""

from __future__ import annotations

import collections
import itertools
import time
from dataclasses import dataclass

import numpy as np

from . import interrupt
from .config import AlignConfig
from .errors import ConfigError, InputError
from .genome_pair import apply_rule, compute_pair, device_set, on_slot, use_gpu
from .hirschberg import LEAF_SHORT, edits
from .io import faidx, fastx
from .progress import ticking
from .records import ENGINE_CODE, OK, AlignBatch, Names, PairBatch
from .stages import Output, check_output, in_order, timed

HEADER = ("query\ttarget\tquery_len\ttarget_len\tdistance\tidentity\tseconds\tcups\tcells_per_second\t"
          "engine\n")


@dataclass
class GenomeResult:
    query: str
    target: str
    query_len: int
    target_len: int
    distance: int
    seconds: float
    cells: int | None
    engine: str

    def tsv(self) -> str:
        longest = max(self.query_len, self.target_len)
        ident = 1.0 - self.distance / longest if longest else 1.0
        cups = self.query_len * self.target_len / self.seconds if self.seconds > 0 else 0.0
        cps = f"{self.cells / self.seconds:.4g}" if self.cells and self.seconds > 0 else "*"
        return (f"{self.query}\t{self.target}\t{self.query_len}\t{self.target_len}\t{self.distance}\t{ident:.6f}\t"
                f"{self.seconds:.3f}\t{cups:.4g}\t{cps}\t{self.engine}\n")


def _pick(path: str, name: str | None, held: tuple | None = None):
    """All records of path in order, or the one named (a missing name is an error); a malformed record's
    error (the reader's) names its number in the file. held: path's only record, read already (record_names)."""
    for rec in [held] if held is not None else fastx.records(path, chunk=1, fast=False):
        if name is None or rec[0] == name:
            yield rec
            if name is not None:
                return
    if name is not None:
        raise _no_record(path, name)


def _no_record(path: str, name: str) -> InputError:
    return InputError(f"{fastx.display_name(path)}: no record named {name!r}")


def _more_records(longer: str, shorter: str, common: int) -> InputError:
    longer, shorter = fastx.display_name(longer), fastx.display_name(shorter)
    records = f"{common} record{'s' * (common != 1)}"
    return InputError(f"{longer} has more records than {shorter} ({shorter} ends after {records})")


def record_names(path: str) -> tuple[list[str] | None, tuple | None]:
    """The names of path's records, in order: from its .fai where that lists every record the file holds
    (faidx.listed_names), else from a first pass by the strict reader (one record in memory at a time: ~15 ms
    per E. coli genome, gzip; ~0.1 s for 48 Mbp of plain FASTA on a 2-core machine), which also finds a
    malformed record before anything is written; None for stdin or a pipe (read once: checked as it is read).
    With them, the file's record as the reader gives it where the first pass read a file of one record (not
    read again: a chromosome's file), else None."""
    if fastx.streamed(path):
        return None, None
    names = faidx.listed_names(path)
    if names is not None:
        return names, None
    names, only = [], None
    for rec in fastx.records(path, chunk=1, fast=False):
        names.append(rec[0])
        only = rec if len(names) == 1 else None
    return names, only


def _once(path: str, names: list | None, name: str) -> None:
    """An InputError if the record `name`, chosen by name, is not the only one of that name in path."""
    if names is not None and names.count(name) > 1:
        first, second = [i + 1 for i, n in enumerate(names) if n == name][:2]
        raise InputError(f"{fastx.display_name(path)}: records {first} and {second} are both named {name!r}: "
                         "which one to align is not clear (rename one)")


def select_records(path_a: str, path_b: str, qname: str | None, tname: str | None):
    """The (query, target) record names to compare, checked against both files before anything is
    written: neither named, (None, None): record i with record i, the counts equal; both named, those;
    one named, that record with the other file's record of the same name, else with its only record,
    else an error. Names on stdin or a pipe are checked as it is read. Also returns the number of record
    pairs (None when not known before reading: stdin or a pipe), the query records' names with their
    record numbers (None when not known: stdin or a pipe), and the files' records read already (record_names:
    path -> its only record, for _pairs)."""
    (names_a, only_a), (names_b, only_b) = record_names(path_a), record_names(path_b)
    held = {path: rec for path, rec in ((path_a, only_a), (path_b, only_b)) if rec is not None}
    for path, names, name in ((path_a, names_a, qname), (path_b, names_b, tname)):
        if name is not None and names is not None and name not in names:
            raise _no_record(path, name)
    if qname is None and tname is None:
        if names_a is not None and names_b is not None and len(names_a) != len(names_b):
            longer, shorter = (path_a, path_b) if len(names_a) > len(names_b) else (path_b, path_a)
            raise _more_records(longer, shorter, min(len(names_a), len(names_b)))
        known = names_a if names_a is not None else names_b
        queries = None if names_a is None else (names_a, list(range(1, len(names_a) + 1)))
        return None, None, (len(known) if known is not None else None), queries, held
    if qname is not None and tname is not None:
        _once(path_a, names_a, qname)
        _once(path_b, names_b, tname)
        return qname, tname, 1, _named(names_a, qname), held
    name, given, other, names, option = ((qname, "--query-record", path_b, names_b, "--target-record")
                                         if tname is None else
                                         (tname, "--target-record", path_a, names_a, "--query-record"))
    if names is None:
        raise ConfigError(f"{given} alone needs the other file's record names: give it as a file, or name "
                          f"its record with {option}")
    if name in names:
        partner = name
    elif len(names) == 1:
        partner = names[0]
    else:
        raise ConfigError(f"{given} {name!r}: {other} has {len(names)} records and none named {name!r}: "
                          f"name one with {option}")
    pair = (name, partner) if tname is None else (partner, name)
    _once(path_a, names_a, pair[0])
    _once(path_b, names_b, pair[1])
    return pair + (1, _named(names_a, pair[0]), held)


def _named(names: list | None, name: str) -> tuple | None:
    """([name], [its record number in names]), or None where names are not known."""
    return None if names is None else ([name], [names.index(name) + 1])


def _pairs(path_a, path_b, qname, tname, quals=None, held=None):
    """(query name, target name, query codes, target codes) per record pair, in order; quals (a deque): each
    query's FASTQ quality (None for FASTA) appended as its pair is read, for SAM/BAM's QUAL; held: select_records'
    records read already (given out, not read again)."""
    held = held if held is not None else {}
    a = held.pop(path_a, None)  # (given out, not kept: the pair's bases are held by the run only)
    ra, rb = _pick(path_a, qname, a), _pick(path_b, tname, held.pop(path_b, a if path_b == path_a else None))
    pairs = 0
    while True:
        a, b = next(ra, None), next(rb, None)
        if a is None or b is None:
            if a is not None or b is not None:
                raise _more_records(*((path_a, path_b) if b is None else (path_b, path_a)), pairs)
            return
        pairs += 1
        qa, tb = fastx.folded_letters(a[1]), fastx.folded_letters(b[1])
        if quals is not None:
            quals.append(a[2])
        yield a[0], b[0], qa, tb


IN_FLIGHT_BYTES = 2 << 30  # record pairs held at once (-t, a cluster's workers) beyond one: their bases
WRITE_RECORDS = 4096  # records of pairs aligned in a batch written together at most
BATCHED_MAX = LEAF_SHORT  # record pairs no longer than this on both sides are aligned together by the
# batched engines, which align the path's leaves of that size anyway (one at a time: ~7 ms a pair)


def _sam_targets(fmt: str | None, target_path: str, tname, held: tuple | None = None) -> dict:
    """The target records' names -> lengths for SAM/BAM's @SQ lines (tname: that record alone; else each name
    once: a name twice is an error, as the records are paired by number), {} for the other formats. held: the
    target file's only record, read already (record_names: not read again for its length)."""
    if fmt not in ("sam", "bam"):
        return {}
    if fastx.streamed(target_path):
        raise ConfigError("SAM/BAM output needs the target records' names and lengths first: give the "
                          "target as a file, or write PAF or TSV")
    from .output.sam import check_rnames

    targets = ({held[0]: len(held[1])} if held is not None else
               fastx.target_lengths(target_path, unique=tname is None, sequences=False))
    if tname is not None:
        targets = {tname: targets[tname]} if tname in targets else {}  # (not there: _pick's error, before any output)
    check_rnames(Names.of(list(targets)), fastx.display_name(target_path))
    return targets


def _path_writer(fmt: str, output: Output, targets: dict, command_line: str, query_name: str = ""):
    """The pairs writer of fmt for alignment-path records (it writes the format's header); query_name: the query
    file as messages name it."""
    from .output.paf import PafWriter
    from .output.sam import BamWriter, SamWriter
    from .output.tsv import TsvWriter

    cls = {"paf": PafWriter, "sam": SamWriter, "tsv": TsvWriter, "bam": BamWriter}[fmt]
    return cls(output.target, targets=targets, command_line=command_line, metric="edit", query_name=query_name)


def _path_records(records, first: int = 0, gpu: bool = False):
    """The batch and result the writers take for records [(qn, tn, q, t, distance, ops, engine name, query's
    quality or None)] (q, t: the folded input, before the rule); first: the first record pair's index in the
    run (0-based: messages number the pairs); gpu: one record's CIGAR of text_device.LONG_CIGAR_MIN ops or more
    has its text and counts made on the current device (the one the pairs ran on: not with --gpus), else, and
    where that device is out of memory or fails, by the writer, on the host."""
    qn, tn, q, t, d, ops, engine, quals = zip(*records)
    batch = PairBatch.from_joined(np.concatenate([*q, *t]), [len(x) for x in q], [len(x) for x in t], first, qn,
                                  tn, quals)  # (the bases copied once: 96 MB for a chromosome pair)
    ln = np.array([len(x) for x in ops], np.int64)
    res = AlignBatch(np.array(d, np.int32), np.full(len(d), OK, np.uint8),
                     np.array([ENGINE_CODE[e] for e in engine], np.uint8),
                     np.concatenate([np.asarray(x, np.uint32) for x in ops]), np.cumsum(ln) - ln, ln)
    from . import text_device

    if gpu and len(ln) == 1 and ln[0] >= text_device.LONG_CIGAR_MIN:
        from .devices import is_device_failure
        from .gpu.kernels import is_out_of_memory

        try:
            res.cigar_text, res.cigar_stats = text_device.long_cigar_text(res.cigar)
        except Exception as err:  # noqa: BLE001 - no room on the device, or it failed: the writer's numpy text
            if not (is_out_of_memory(err) or is_device_failure(err)):
                raise
    return batch, res


def run_genome(path_a: str, path_b: str, out: str, cfg: AlignConfig, qname=None, tname=None, on_notice=None,
               progress=None, prune: bool = True, cpu_method: str = "auto", fmt: str | None = None,
               command_line: str = "gpualign genome", cluster=None, extra: list | None = None,
               stages: dict | None = None) -> list[GenomeResult]:
    """Each record pair's exact edit distance (TSV, with cfg.distance_only) or an optimal alignment
    (PAF/SAM/BAM/TSV with the CIGAR, format from fmt or the output name). Options and inputs (record
    names and counts: select_records) are checked before any notice, and the output's header waits for
    the first pair. cluster: a cluster.ClusterSpec (record pairs on Dask workers, one per worker at a
    time, or on this host's devices: --gpus) or None; extra: a list given the devices' or workers' summary
    rows; stages: a dict given the seconds this thread spent reading the inputs ("read") and writing the
    output ("write"). On the CPU, up to cfg.n_threads pairs at once."""
    from .output.formats import infer_format, name_notice, named_format

    cfg.validate()
    if cfg.metric != "edit":
        raise ConfigError("gpualign genome supports --metric edit only")
    if path_a == fastx.STDIN and path_b == fastx.STDIN:
        raise ConfigError("only one of the two inputs can be '-' (stdin)")
    with_path = not cfg.distance_only
    given = fmt = fmt.lower() if fmt else fmt  # (as infer_format reads it: -f TSV is tsv)
    if with_path:
        fmt = infer_format(fmt, out, False)
    elif fmt not in (None, "tsv"):
        raise ConfigError(f"gpualign genome --distance-only writes TSV only (got -f {fmt!r})")
    elif fmt is None and named_format(out) not in (None, "tsv"):  # (TSV named .bam: not what its name says)
        raise ConfigError(f"{out}: gpualign genome --distance-only writes TSV only: name the output otherwise "
                          "(.tsv, .txt), or give -f tsv")
    stages = stages if stages is not None else {}
    stages.update(read=0.0, write=0.0)
    start = time.perf_counter()
    qname, tname, count, queries, held = select_records(path_a, path_b, qname, tname)
    targets = _sam_targets(fmt if with_path else None, path_b, tname, held.get(path_b))
    stages["read"] += time.perf_counter() - start
    if with_path and fmt in ("sam", "bam") and queries is not None:  # (before hours of aligning; else the writer's)
        from .output.sam import refuse_qnames

        refuse_qnames(Names.of(queries[0]), lambda k: f"record {queries[1][k]}", "PAF or TSV",
                      fastx.display_name(path_a))
    check_output(out)
    distributed = cluster is not None and cluster.wanted
    ids = None  # with --gpus: the devices (checked now) of a devices.DeviceSet computing the record pairs
    if cluster is not None and cluster.gpus and not distributed:
        from .devices import present

        cluster.validate(cfg.device)
        ids = present(cluster.gpus)
    gpu = False if distributed else use_gpu(cfg.device)
    if on_notice and (note := name_notice(given, out, fmt or "tsv")):
        on_notice(note)
    if on_notice and not distributed:
        on_notice(("engine: gpu-long (bit-parallel Hirschberg splits, leaves by the batched engines)" if with_path
                   else "engine: gpu-long (wfa: tiled wavefront, dynamic diamond; bp: banded bit-parallel DP; "
                        "chosen per pair by a divergence estimate)") if gpu else
                  "warning: no GPU in use; the CPU path (WFA2-lib BiWFA or edlib) can take minutes to hours "
                  "on distant chromosome-scale strings")
    results = []
    output = Output(out, binary_via_path=(fmt == "bam"))
    writer = remote = None
    try:
        if distributed:  # record pairs on Dask workers, several at once
            from .stages import start_engines

            _, notice, remote = start_engines(cfg, cluster)
            if on_notice:
                on_notice(notice)
        elif ids is not None:  # record pairs on this host's GPUs, side by side
            remote = device_set(cfg, ids)
            started = remote.start()
            if on_notice:
                on_notice(started)
        pending = []  # records of pairs aligned in a batch not written yet: written together (~1 ms each alone)
        quals = collections.deque()  # (the queries' qualities as _pairs reads them, taken in the same order)

        def write() -> None:
            nonlocal writer
            start = time.perf_counter()
            if with_path:
                writer = writer or _path_writer(fmt, output, targets, command_line, fastx.display_name(path_a))
                writer.write(*_path_records(pending, len(results) - len(pending), gpu and ids is None))
            else:
                output.target.write("".join(pending).encode())
            output.flush()  # out now: a reader sees each batch, a closed pipe stops the run here
            pending.clear()
            stages["write"] += time.perf_counter() - start

        for qn, tn, q0, t0, (d, ops, cells, engine, code, seconds) in _computed(
                timed(_pairs(path_a, path_b, qname, tname, quals, held), stages, "read"), cfg, gpu, prune,
                cpu_method, progress, on_notice, remote, count):
            res = GenomeResult(qn, tn, len(q0), len(t0), d, seconds, cells, engine)
            qual = quals.popleft()
            if with_path:
                pending.append((qn, tn, q0, t0, d, ops, code, qual if fmt in ("sam", "bam") else None))
                if on_notice:
                    ops_word = "operation" if len(ops) == 1 else "operations"
                    on_notice(f"{qn} vs {tn}: distance {d:,}, {len(ops):,} CIGAR {ops_word}, {res.seconds:.3f} s "
                              f"({engine})")
            else:
                pending.append(res.tsv() if results else HEADER + res.tsv())
            results.append(res)
            if not engine.endswith(":batched") or len(pending) >= WRITE_RECORDS:  # the others' at once
                write()
        if pending:
            write()
        start = time.perf_counter()
        if writer is not None:
            writer.close()
        output.commit()
        stages["write"] += time.perf_counter() - start
    except BaseException:
        if writer is not None and hasattr(writer, "abort"):
            writer.abort()
        output.abort()
        raise
    finally:
        if remote is not None:
            try:
                if extra is not None:
                    extra.extend(remote.rows())
            except Exception:  # noqa: BLE001 - a cluster gone: no rows, closed all the same
                pass
            remote.close()
    return results


def summary(results: list[GenomeResult], seconds: float, extra: list | None = None, stages: dict | None = None):
    """The run's summary (stages.Summary's rows): pairs, bases, records written, the engines that ran
    (route:<engine>), the wall time, the pairs' own compute time (align_seconds) and, from stages (run_genome's),
    the time spent reading the inputs and writing the output; extra: more rows (the devices' or workers':
    run_genome's)."""
    from collections import Counter

    from .stages import Summary

    stages = stages or {}
    return Summary(pairs=len(results), bases=sum(r.query_len + r.target_len for r in results),
                   written=len(results), seconds=seconds, counts=dict(Counter(r.engine for r in results)),
                   stage_seconds={"read": stages.get("read", 0.0), "align": sum(r.seconds for r in results),
                                  "write": stages.get("write", 0.0)}, extra=list(extra or []))


def _computed(pairs, cfg, gpu, prune, cpu_method, progress, on_notice, remote, count=None):
    """(qn, tn, q, t, compute_pair's tuple) per record pair, in order: with remote (a started
    cluster.ClusterAligner) on its workers, one pair in flight per worker (chromosomes are large); with
    this host's devices (a devices.DeviceSet), pairs side by side on them, or, with fewer pairs (count, when
    known) than devices, one at a time, each shared by them (genome_pair.on_slot's peers: the bit-parallel
    distance's halves on two, the path's levels and leaves on all); on the
    CPU, up to cfg.n_threads pairs at once (each in a child process of its own: interrupt.killable), else
    one at a time here."""
    if remote is not None and remote.in_process:  # this host's GPUs: each pair on a device's own chain
        share = count is not None and count < len(remote.live())
        peers = remote if share else None
        if share and on_notice:
            on_notice(f"{count} record pair(s) on {len(remote.live())} device slots: each pair shared by them all")

        def on_device(qn, tn, q, t):
            fut = remote.submit_task(on_slot, qn, tn, q, t, cfg, prune, cpu_method, on_notice, peers)
            return lambda: fut.result()[0]

        yield from _in_flight(pairs, cfg, 1 if share else remote.window, on_device, progress,
                              {"kernel": "gpus", "workers": len(remote.live())})
        return
    if remote is not None:
        from .cluster_worker import genome_pair

        def on_worker(qn, tn, q, t):
            fut = remote.submit_task(genome_pair, qn, tn, q, t, prune, cpu_method, remote.cfg)
            return lambda: fut.result()[0]

        yield from _in_flight(pairs, cfg, remote.workers + 1, on_worker, progress,
                              {"kernel": "cluster", "workers": remote.workers})
        return
    if gpu or cfg.n_threads == 1:
        yield from _here(pairs, cfg, gpu, prune, cpu_method, progress, on_notice)
        return
    from concurrent.futures import ThreadPoolExecutor, wait

    pool = ThreadPoolExecutor(cfg.n_threads, thread_name_prefix="gpualign-genome")
    started = []

    def start(qn, tn, q, t):
        started.append(pool.submit(compute_pair, qn, tn, q, t, cfg, False, prune, cpu_method, progress, on_notice))
        return started[-1].result

    finished = False
    try:
        yield from _in_flight(pairs, cfg, cfg.n_threads, start)
        finished = True
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
        while not finished and not all(f.done() for f in started):  # an error: the pairs still running end
            interrupt.end_children(wait=True)  # now (their child processes), not when they are done
            wait(started, timeout=0.5)
        pool.shutdown(wait=True)


def _here(pairs, cfg, gpu, prune, cpu_method, progress, on_notice):
    """_computed's items computed in this process, in order: one record pair at a time, except that with a
    GPU each run of consecutive pairs no longer than BATCHED_MAX on both sides is aligned together by the
    batched engines (the path's leaves' chain: one chain for the run, started at its first need), in
    batches of at most cfg.batch_bases bases and cfg.batch_pairs pairs."""
    from . import genome_path

    chain: list = []

    def engines() -> list:
        if not chain:
            chain.extend(genome_path.leaf_chain(cfg))
        return chain

    group, bases = [], 0
    try:
        for item in itertools.chain(pairs, [None]):
            small = gpu and item is not None and max(len(item[2]), len(item[3])) <= BATCHED_MAX
            size = len(item[2]) + len(item[3]) if small else 0
            if group and (not small or len(group) >= cfg.batch_pairs or bases + size > cfg.batch_bases):
                yield from _batched(group, engines(), cfg, prune, cpu_method, progress, on_notice)
                group, bases = [], 0
            if small:
                group.append(item)
                bases += size
            elif item is not None:
                qn, tn, q0, t0 = item
                q, t = apply_rule(q0, t0, cfg.n_mismatch)
                leaves = engines() if gpu and not cfg.distance_only else None
                yield qn, tn, q0, t0, compute_pair(qn, tn, q, t, cfg, gpu, prune, cpu_method, progress, on_notice,
                                                   leaves)
    finally:
        genome_path.close_chain(chain)


def _batched(group, chain, cfg, prune, cpu_method, progress, on_notice):
    """_computed's items for record pairs aligned together in one batch through chain (the batched edit
    engines, the character rule already in the bytes); each pair's seconds are the batch's shared equally.
    A pair the chain could not align takes compute_pair's way; each CIGAR is checked to cost the distance
    and to span both strings before it is given out."""
    from .cigar import consumed
    from .route import run_chain

    start = time.perf_counter()
    ruled = [apply_rule(q0, t0, cfg.n_mismatch) for _, _, q0, t0 in group]
    ql = np.array([len(q) for q, _ in ruled], np.int64)
    tl = np.array([len(t) for _, t in ruled], np.int64)
    seq = np.concatenate([q for q, _ in ruled] + [t for _, t in ruled])
    batch_cfg = AlignConfig(metric="edit", device="gpu", threads=cfg.threads, distance_only=cfg.distance_only,
                            batch_bases=cfg.batch_bases, batch_pairs=cfg.batch_pairs)
    res, _ = run_chain(PairBatch.from_joined(seq, ql, tl), chain, batch_cfg)
    each = (time.perf_counter() - start) / len(group)
    label = "gpu-long:batched" if cfg.distance_only else "gpu-long:path:batched"
    for k, (qn, tn, q0, t0) in enumerate(group):
        if res.status[k] != OK:
            q, t = ruled[k]
            out = compute_pair(qn, tn, q, t, cfg, True, prune, cpu_method, progress, on_notice,
                               None if cfg.distance_only else chain)
        else:
            d, ops = int(res.score[k]), None
            if not cfg.distance_only:
                at = int(res.cigar_off[k])
                ops = res.cigar[at:at + int(res.cigar_len[k])]
                if edits(ops) != d or consumed(ops) != (len(q0), len(t0)):
                    raise RuntimeError(f"{qn} vs {tn}: the batched engines' CIGAR costs {edits(ops)} and spans "
                                       f"{consumed(ops)} bases, the distance is {d} and the strings "
                                       f"{len(q0)} x {len(t0)}")
            out = (d, ops, None, label, "gpu-long", each)
        yield qn, tn, q0, t0, out


def _in_flight(pairs, cfg, width: int, submit, progress=None, info=None):
    """_computed's items with up to width pairs submitted at once, in input order: submit(qn, tn, q, t)
    starts a pair and returns a function that waits for compute_pair's tuple; fewer pairs while those held
    pass IN_FLIGHT_BYTES (chromosomes: -t 64 would hold 64 pairs). info: what progress is told every second
    while a pair is awaited (the pairs done and running added), for engines that report nothing meanwhile
    (a cluster's workers)."""
    def start(item):
        qn, tn, q0, t0 = item
        return submit(qn, tn, *apply_rule(q0, t0, cfg.n_mismatch))

    def full(pending) -> bool:
        return len(pending) >= width or sum(len(p[0][2]) + len(p[0][3]) for p in pending) > IN_FLIGHT_BYTES

    for done, ((qn, tn, q0, t0), wait, waiting) in enumerate(in_order(pairs, start, full)):
        if info is None:
            out = wait()
        else:
            with ticking(progress, dict(info, done=done, running=waiting + 1)):
                out = wait()
        yield qn, tn, q0, t0, out
