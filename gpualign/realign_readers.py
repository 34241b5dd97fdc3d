"""`gpualign paf`'s candidates fetched by worker processes.

In one process, the thread that parses candidates and slices their sequences competes with the
aligner thread for the interpreter lock; worker processes take that work off it.

Here the main process only reads the PAF's raw lines, in chunks. Worker processes (forked before the
GPU is set up; they share the indexed query and target FASTA the main process opened) parse a chunk, check
it and fetch its sequences into a shared-memory block, which becomes the batch's sequence bytes as it is
(mapped: the block goes when the batch does). The candidates come back in order, as columns
(io.paf.Fetched), and become the same PairBatches as the in-thread path makes (realign._batch). The first
chunk is small and the next ones grow fourfold, so the GPU starts early; later chunks are sized to
cfg.batch_bases from the candidates seen so far, and to SHARES chunks a worker or more. At most
`workers + 2` chunks are in flight, beside the batches the pipeline holds (read ahead, aligning,
writing: a few), so shared memory stays bounded (realign_primary copies out a batch it holds longer).
"""

from __future__ import annotations

import os
from collections import deque

import numpy as np

from . import pack, shm
from .config import AlignConfig
from .errors import InputError
from .io import faidx, fastx
from .io import paf as P
from .io import paf_bulk, paf_device
from .progress import input_lines
from .workers import can_fork, fork_pool

FIRST_CHUNK = 256  # lines in the first chunk (the GPU starts on it while the next ones are read)
RAMP = 4  # each chunk after it at most this many times larger, up to cfg.batch_bases (item_lists)
SHARES = 2  # chunks a worker reads at least (item_lists: a PAF's chunks no larger than its lines / (SHARES x workers))
# ... unless that cuts a chunk below this many lines: a chunk of long reads is read in a fraction of its alignment's
# time, and cut smaller it only made smaller batches, which the GPU aligns less well (15,000 ONT reads on an H100:
# 1.92-1.94 s whole uncut, 2.10-2.13 s cut; a million short reads: 5.2 s uncut, 3.8 s cut into 62,500-line chunks)
SPREAD_FLOOR = 1 << 13
MIN_PAF_BYTES = 1 << 18  # smaller PAFs (~1,300 candidates) are read in-thread
# raw mode: the first chunks fetched as always, so that the first batches are ready while the engines start (laid
# out on the device, the first waited for the CUDA context and the kernels' load, which slowed the engines' start)
RAW_AFTER = 2

_STATE: dict = {}  # per worker: the indexed files and the fetch settings


def worker_count(paf_path: str, readers: int | None) -> int:
    """How many worker processes to read with: readers if given (0 = in-thread); by default in-thread for
    small PAFs (stdin and pipes come spooled to a file: run_paf), else a share of the cores."""
    if readers is not None:
        return max(0, readers)
    if not os.path.isfile(paf_path) or os.path.getsize(paf_path) < MIN_PAF_BYTES:
        return 0
    return max(2, min(8, (os.cpu_count() or 2) // 2))


def _init(query_path: str, target_path: str, mode: str, pad: int, skip_bad: bool, keep_full: bool,
          opened: tuple | None = None) -> None:
    """opened: (io.paf.Queries, io.paf.Targets) of the process that forked this one, their indexes read there
    (shared: a read's .fai of a million rows takes a second or more to open and read), else None (opened here)."""
    if opened is not None:
        queries, targets = opened
        queries.fa.forked()
        targets.fa.forked()
    else:
        queries, targets = P.Queries(query_path), P.Targets(target_path)
    _STATE.update(queries=queries, targets=targets, mode=mode, pad=pad, skip_bad=skip_bad, keep_full=keep_full)


def _chunk(name: str, first: int, lines: list, raw: bool = False):
    """One chunk in a worker: (io.paf.Fetched of its candidates or None, the shared-memory block holding the
    sequences joined (queries, then targets) or None, its size, errors skipped, the error that stops the run or
    None, the segments or None). The parent
    maps the block and unlinks its name (shm.view: no copy on the parent's thread): the sequences never go
    through a pipe. raw: segments where they can be (_raw), and no block: the parent reads the files' bytes
    they name (io/paf_device.py)."""
    st, skipped, items = _STATE, [], []
    on_bad = skipped.append if st["skip_bad"] else None
    err = None
    try:
        bulk = paf_bulk.parse(lines, first)  # (None: a line parse_lines must judge)
        if raw:  # (a chunk with a malformed line goes the host's way: its errors come in line order there)
            if bulk is None:
                faults: list = []
                listed = list(P.read_candidates(name, faults.append, P.parse_lines(name, enumerate(lines, first))))
                raw = None if faults or not listed else _raw(listed)
            else:
                raw = _raw(bulk)
            if raw is not None:
                return raw[0], None, 0, skipped, None, raw[1]
        laid = _laid_out(bulk, st["keep_full"]) if bulk is not None else None
        if laid is not None:
            return laid[0], shm.put(laid[1]), laid[0].bases, skipped, None, None
        cands = bulk if bulk is not None else \
            P.read_candidates(name, on_bad, P.parse_lines(name, enumerate(lines, first)))
        items.extend(P.fetch(cands, st["queries"], st["targets"], st["mode"], st["pad"], on_bad, st["keep_full"],
                             name))
    except InputError as e:
        err = e
    if err is not None or not items:
        return None, None, 0, skipped, err, None
    fetched = P.Fetched.of(items)
    block = shm.put([it[1] for it in items] + [it[2] for it in items])  # the parent unlinks it (shm.view)
    return fetched, block, fetched.bases, skipped, None, None


def _placed(cands):
    """(io.paf.Candidates, window starts, ends, free ends, the query and target records' .fai rows) of cands
    (Candidates or a list of Candidate) read in place from the mapped files, with what fetch checks first
    checked for the whole chunk at once; None where a candidate is not as the host path takes it at once (a name
    or length that does not match, a file not read in place): the host path then fetches the chunk, and names
    the error or skips the candidate as it does."""
    st = _STATE
    q, t = st["queries"].fa, st["targets"].fa
    try:
        c = cands if isinstance(cands, P.Candidates) else P.Candidates(cands)
    except OverflowError:  # (a number past int64: the host path names it)
        return None
    for fa, names, lengths in ((q, c.qname, c.qlen), (t, c.tname, c.tlen)):
        got = fa.lengths.get
        if not np.array_equal(np.fromiter((got(x, -1) for x in names), np.int64, len(c)), lengths):
            return None
    ws, we, free = P.windows(c, st["mode"], st["pad"])
    try:
        q_rows, t_rows = q.rows(c.qname), t.rows(c.tname)
        if q_rows is None or t_rows is None:
            return None
        for i in np.flatnonzero(q_rows[:, 1] < c.qlen).tolist():  # a FASTQ record's quality lines checked as the
            q.quality(c.qname[i])  # host's fetch checks them (lines: one line has none to check)
    except InputError:
        return None
    return c, ws, we, free, q_rows, t_rows


def _laid_out(cands, keep_full: bool = False):
    """(io.paf.Fetched, the chunk's sequence bytes: the query parts joined, the target windows joined) of cands, as
    fetch's items give them (keep_full: with the whole queries and their qualities, for SAM/BAM), made from
    _placed's rows with a few operations a candidate (fetch runs a dozen functions for each), or None where
    _placed refuses the chunk, a slice does not match its index or a base is not a letter: the host path then
    names the fault or skips the candidate."""
    placed = _placed(cands)
    if placed is None:
        return None
    c, ws, we, free, q_rows, t_rows = placed
    q = _STATE["queries"].fa
    queries = q.slices(q_rows, np.zeros(len(c), dtype=np.int64), c.qlen)
    windows = _STATE["targets"].fa.slices(t_rows, ws, we)
    if queries is None or windows is None:
        return None
    (whole, bad_q), (target, bad_t) = (pack.fold_checked(b"".join(x)) for x in (queries, windows))
    if bad_q >= 0 or bad_t >= 0:
        return None
    at = np.cumsum(c.qlen) - c.qlen
    parts = [P.revcomp(whole[a:b]) if s == "-" else whole[a:b]
             for a, b, s in zip((at + c.qs).tolist(), (at + c.qe).tolist(), c.strand)]
    full_query, full_qual = [None] * len(c), [None] * len(c)
    if keep_full:
        try:
            full_qual = [q.quality(name) for name in c.qname]
        except InputError:
            return None
        full_query = [whole[a:b] for a, b in zip(at.tolist(), (at + c.qlen).tolist())]
    fetched = P.Fetched(c, c.qe - c.qs, we - ws, ws, free, full_query, full_qual)
    return fetched, [b"".join(parts), target]


def _raw(cands):
    """(io.paf.Fetched, segments) of cands (io.paf.Candidates or a list of Candidate) for io/paf_device.py
    (WindowGather.gather's segs, rc and sizes), or None where a candidate is not as the host path takes it at once
    (_placed; line ends the kernel cannot place): the host path then fetches the chunk, and names the error or
    skips the candidate as it does. Made for the whole chunk at once (columns, not a loop a candidate)."""
    placed = _placed(cands)
    if placed is None:
        return None
    c, ws, we, free, q_rows, t_rows = placed
    zero = np.zeros(len(c), dtype=np.int64)
    q_part, t_part = c.qe - c.qs, we - ws
    segs, sizes = [], []
    for rows, start, end, keep_from, keep_to, out_at in (
            (q_rows, zero, c.qlen, c.qs, c.qe, np.cumsum(q_part) - q_part),
            (t_rows, ws, we, zero, t_part, np.cumsum(t_part) - t_part + int(q_part.sum()))):
        per_line, width = rows[:, 1], rows[:, 2]
        p0 = np.where(per_line > 0, start % np.maximum(per_line, 1), 0)
        if not paf_device.line_ends_placed(end - start, p0, per_line, width).all():
            return None
        a, b = faidx.raw_bounds(rows, start, end)
        segs.append(paf_device.segment_rows(a, end - start, p0, per_line, width, keep_from, keep_to, out_at))
        sizes.append(b - a)
    sizes = np.concatenate(sizes)
    if sizes.sum() > 2 * (q_part.sum() + t_part.sum()) + paf_device.SLACK:  # whole reads far longer than their
        return None  # parts (contigs): the bytes read, and the buffers, would outgrow the batch
    rc = np.concatenate([np.array(c.strand) == "-", np.zeros(len(c), dtype=bool)]).astype(np.uint8)
    fetched = P.Fetched(c, q_part, t_part, ws, free, [None] * len(c), [None] * len(c))
    return fetched, (np.concatenate(segs), rc, sizes)


def _ready() -> None:
    """A task that only makes its worker start now (its initializer run)."""


def _box_bases(lines: list, pad: int) -> float:
    """Mean query + padded target bases per PAF line (malformed lines left out; 1 when none)."""
    total = count = 0
    for line in lines:
        f = line.split("\t", 10)
        try:
            total += int(f[3]) - int(f[2]) + int(f[8]) - int(f[7]) + 2 * pad
            count += 1
        except (IndexError, ValueError):
            continue
    return total / count if count else 1.0


def _discard(fut) -> None:
    """Wait for a chunk nobody will take and unlink its shared-memory block."""
    try:
        block = fut.result()[1]
    except Exception:  # noqa: BLE001 - the run is already stopping for another reason
        return
    if block is not None:
        shm.discard(block)


class Readers:
    """The worker processes, forked at once: before the CUDA context and the pipeline's threads exist
    (a forked child must not inherit them; run_paf makes this first)."""

    def __init__(self, workers: int, query_path: str, target_path: str, mode: str, pad: int, skip_bad: bool,
                 keep_full: bool, raw: bool = False, opened: tuple | None = None):
        """raw: where they can be, the sequences' places in the files sent, not their bytes: the parent reads
        them and the GPU lays them out (io/paf_device.py); the chunks sent after it is set False go the host's
        way. opened: this process's (io.paf.Queries, io.paf.Targets) of the same files, which forked workers
        share (their indexes read here first), or None."""
        self.workers, self.pad, self.raw = workers, pad, raw
        if opened is None or not can_fork() or not all([side.fa.load() for side in opened]):
            opened = None  # (an index that cannot be taken: each worker opens the files, its fetches name the fault)
        self.pool = fork_pool(workers, _init, (query_path, target_path, mode, pad, skip_bad, keep_full, opened),
                              start=False)
        for _ in range(workers):  # each task starts a worker now, without waiting for it
            self.pool.submit(_ready)

    def close(self) -> None:
        self.pool.shutdown(wait=True, cancel_futures=True)

    def __enter__(self) -> "Readers":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def item_lists(self, paf_path: str, cfg: AlignConfig, skipped: list, warn, name: str | None = None):
        """(fetched, seq, segments) in PAF order, about cfg.batch_bases of sequence each: the candidates as
        _chunk gives them (io.paf.Fetched), and their sequences joined in one array (segments None), or (raw
        mode) None and _chunk's segments for io/paf_device.py. Skipped lines
        (--skip-bad) are appended to skipped and told to warn as their chunk comes back; any other bad
        line raises its InputError then. name: the PAF as messages call it."""
        name = name or fastx.display_name(paf_path)
        per_line = None  # bases per PAF line: guessed from the first chunk's boxes, then measured
        measured = {"lines": 0, "bases": 0}
        asked = [0]  # chunks sized so far
        sent = [0]  # chunks sent to the workers so far
        # every worker given SHARES chunks or more of the PAF (its lines estimated): a chunk as large as a batch
        # can hold would leave most workers idle where the PAF is a few batches' worth (a million short reads),
        # but no chunk cut below SPREAD_FLOOR lines by it
        lines = input_lines(paf_path)
        spread = cfg.batch_pairs if lines is None else max(SPREAD_FLOOR, int(lines / (SHARES * self.workers)))

        def size() -> int:
            # the first chunks grow RAMP-fold from FIRST_CHUNK: each is read by one worker (a full-size one
            # takes a second or more), so the GPU starts on small batches while the full-size ones are read
            ramp = FIRST_CHUNK * RAMP ** min(asked[0], 16)
            asked[0] += 1
            if per_line is None:
                return min(ramp, cfg.batch_pairs, spread)
            return int(max(1, min(cfg.batch_pairs, ramp, spread, cfg.batch_bases / per_line)))

        chunks = P.line_chunks(paf_path, size)
        pending: deque = deque()

        def submit() -> None:
            nonlocal per_line
            for first, lines in chunks:
                if per_line is None:  # the chunks sent before any comes back are sized from this guess
                    per_line = max(1.0, _box_bases(lines, self.pad))
                raw = self.raw and sent[0] >= RAW_AFTER
                sent[0] += 1
                pending.append((len(lines), self.pool.submit(_chunk, name, first, lines, raw)))
                return

        try:
            for _ in range(self.workers + 2):
                submit()
            while pending:
                n_lines, fut = pending.popleft()
                fetched, block, size, bad, err, segs = fut.result()
                measured["lines"] += n_lines
                measured["bases"] += 0 if fetched is None else fetched.bases
                per_line = max(1.0, measured["bases"] / measured["lines"])
                submit()
                for e in bad:
                    skipped.append(e)
                    warn(f"skipped: {e}")
                if err is not None:
                    raise err
                if fetched is not None:
                    yield fetched, None if block is None else shm.view(block, size), segs
            self.pool.shutdown(wait=False)  # all read: the workers exit while the last batches align
        finally:  # stopped early (a bad line, an error downstream): no shared-memory block left behind
            for _, fut in pending:
                if not fut.cancel():
                    _discard(fut)
