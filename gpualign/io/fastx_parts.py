"""FASTA/FASTQ parsed beside the alignment: a big file in a child process (its chunks down a pipe), or a
plain or bgzip file in parts by several forked processes (their sequence bytes in shared memory; a bgzip
file's members inflated by the processes reading them, io/ranged.py)."""

from __future__ import annotations

import contextlib
import io
import os
from collections import deque

import numpy as np

from .. import shm
from ..errors import InputError, RecordError
from ..records import Names
from ..workers import can_fork, fork_pool
from . import ranged
from .fastx import CHUNK, STDIN, display_name, encode, encoded_chunks, sniff
from .fastx_fast import NotSimple, simple_chunks
from .fastx_strict import strict_chunks

PARALLEL_MIN_BYTES = 16 << 20  # files at least this big are parsed in a child process


def _produce(path: str, conn, symbols: bytes) -> None:
    """Child process: a file's encoded chunks down the pipe (metadata, then the raw sequence bytes),
    then ("end",), or ("error", exception)."""
    try:
        for names, buf, lens, quals in encoded_chunks(path, symbols=symbols):
            conn.send(("chunk", Names.of(names), lens, quals))
            conn.send_bytes(buf)
        conn.send(("end",))
    except BaseException as e:  # noqa: BLE001 - forwarded to the parent, which raises it
        _send_error(conn, path, e)
    finally:
        conn.close()


def _send_error(conn, path: str, e: BaseException) -> None:
    """e down the pipe; where it does not go (ISA-L's IsalError does not pickle: its module, 'igzip_lib', cannot
    be imported by name), a new error of ours with its words: a RecordError made again from its fields, else an
    InputError naming the file. Nothing where the parent is gone."""
    if isinstance(e, RecordError):
        again = RecordError(e.name, e.record, e.detail, e.line)
    elif isinstance(e, InputError):
        again = InputError(str(e))
    else:
        again = InputError(f"{display_name(path)}: cannot read ({type(e).__name__}: {e})")
    for err in (e, again):
        try:
            conn.send(("error", err))
            return
        except Exception:  # noqa: BLE001 - the next form, or the parent is gone
            pass


RANGE_BYTES = 1 << 24  # files are parsed in parts of about this size (inflated) by several processes


def _parse_range(path: str, start: int, end: int, symbols: bytes) -> tuple:
    """Worker process: the records of path's (inflated) bytes [start, end) (whole records) -> (shared memory
    block holding their encoded sequence bytes (then, for FASTQ, their qualities), the sequences' size, FASTQ
    or not, their Names, lengths, the part's line count). Record and line numbers in errors count from the
    range's start."""
    try:
        data = ranged.cached(path).pread(end - start, start)
    except ranged.Corrupt as e:  # (as the stream's reader words it)
        raise RecordError(display_name(path), 1, f"corrupt or truncated input in this record or a later one ({e})",
                          1) from None
    names, bufs, lens, quals = [], [], [], []  # (a piece per chunk: Names from the fast path, lists from the strict)

    def add(nm, seqs, qs):
        bufs.append(encode(seqs))
        lens.append(np.fromiter(map(len, seqs), dtype=np.int64, count=len(seqs)))
        names.append(nm)
        quals.append(qs)

    try:
        for chunk in simple_chunks(path, CHUNK, data, symbols, packed=True):
            add(*chunk)
    except NotSimple as e:  # this part is not strict 2-line FASTA / 4-line FASTQ: the strict parser from there on
        part = io.BytesIO(data)
        part.seek(e.offset)
        for chunk in strict_chunks(part, CHUNK, display_name(path), symbols, e.records, e.line):
            add(*chunk)
    # the sequence bytes, then the qualities', in shared memory (the parent unlinks it: shm.view), the names as
    # one buffer (Names): the parent makes no Python object per record
    fastq = any(isinstance(q, Names) or (q and q[0] is not None) for q in quals)
    size = sum(len(b) for b in bufs)
    if fastq:
        bufs += [q.packed() if isinstance(q, Names) else "".join(q).encode("ascii") for q in quals]
    return (shm.put(bufs), size, fastq, Names.concat(names), (np.concatenate(lens) if lens else np.zeros(0, np.int64)),
            data.count(b"\n"))


class _RangeChunks:
    """encoded_chunks of a plain or bgzip FASTA or FASTQ file, its parts (between `cuts`: _parts) parsed by
    `workers` forked processes, at most 2 * workers parts ahead of the consumer; one chunk per part, in file
    order.

    A FASTA cut is a record's start (a line starting '>'). A FASTQ cut is one where records have four lines
    (ranged.record_cuts), which records over more lines may fool; so where a FASTQ part fails, the rest of the
    file from that part's start is read as one stream instead (fastx.encoded_chunks from there: its records, or
    the error it finds, numbered in the whole file). That start is a record's: the parts before it parsed whole,
    and a part parses whole only if it ends where a record does."""

    def __init__(self, path: str, cuts: list, workers: int, symbols: bytes = b"", fastq: bool = False):
        self.path, self.symbols, self.fastq, self.cuts = path, symbols, fastq, cuts
        self.pool = fork_pool(workers, start=False)
        self.futs: deque = deque()
        self.next = 0
        for _ in range(2 * workers):
            self._submit()

    def _submit(self) -> None:
        if self.next < len(self.cuts) - 1:
            a, b = self.cuts[self.next], self.cuts[self.next + 1]
            try:
                self.futs.append(self.pool.submit(_parse_range, self.path, a, b, self.symbols))
            except RuntimeError:  # shut down by close() from another thread: nothing more to read
                return
            self.next += 1

    def __iter__(self):
        from concurrent.futures.process import BrokenProcessPool

        base = lines = 0  # records and lines in the parts before
        part = 0  # the part taken next
        while self.futs:
            fut = self.futs.popleft()
            self._submit()
            try:
                shm_name, size, has_quals, names, lens, part_lines = fut.result()
            except RecordError as e:
                if not self.fastq:
                    raise e.moved(base, lines) from None
                self.close()
                yield from encoded_chunks(self.path, symbols=self.symbols, start=(self.cuts[part], base, lines + 1))
                return
            except BrokenProcessPool:
                raise InputError(f"{display_name(self.path)}: a reader process ended unexpectedly") from None
            base += len(lens)
            lines += part_lines
            part += 1
            block = shm.view(shm_name, 2 * size if has_quals else size)  # (a quality as long as its sequence)
            yield names, block[:size], lens, Names.joined(block[size:], lens) if has_quals else [None] * len(lens)

    def close(self) -> None:
        """Stop the workers; free the parts parsed but not taken."""
        self.pool.shutdown(wait=True, cancel_futures=True)
        while self.futs:
            fut = self.futs.popleft()
            if fut.done() and not fut.cancelled() and fut.exception() is None:
                shm.discard(fut.result()[0])


HEAD_BYTES = 1 << 20  # a FASTQ file's whole records in this much of its start must be 4-line ones for parts


def _parts(path: str) -> tuple[list, bool] | None:
    """(the cuts of path's parts, FASTQ or not) where it is read in parts: FASTA or FASTQ read by offset (plain, or
    bgzip from its first byte to its last; other gzip comes in order only). A FASTQ file only where its start
    holds 4-line records and a record start is found near every part's end: records over more lines (wrapped
    FASTQ) give no cuts, and one part would hold the whole file. None: one stream."""
    try:
        src = ranged.open_at(path)
    except ValueError:
        return None
    try:
        with src:
            first = src.pread(1, 0)
            if first == b">":
                return ranged.record_cuts(src, RANGE_BYTES), False
            if first != b"@" or not _four_line_start(path, src):
                return None
            cuts = ranged.record_cuts(src, RANGE_BYTES, fastq=True)
            if int(np.diff(cuts).max()) > RANGE_BYTES + ranged.CUT_SCAN + ranged.CUT_READ_MOST:
                return None  # (a part where no record start was found: records over more than 4 lines?)
            return cuts, True
    except ranged.Corrupt:  # (the stream's reader names the record)
        return None


def _four_line_start(path: str, src) -> bool:
    """Whether the whole records in src's first HEAD_BYTES are 4-line FASTQ (by the fast path, else by the strict
    parser with four lines a record)."""
    head = src.pread(HEAD_BYTES, 0)
    if len(head) < src.size:  # (up to the last record start: a line starting '@' with a '+' line two on)
        i = head.rfind(b"\n@")
        while i > 0 and not ranged.fastq_head(head, i + 1, True):
            i = head.rfind(b"\n@", 0, i)
        head = head[:i + 1]
    try:
        for _ in simple_chunks(path, CHUNK, head):
            pass
        return bool(head)
    except NotSimple:
        pass
    try:
        records = sum(len(names) for names, _, _ in strict_chunks(io.BytesIO(head), CHUNK, display_name(path)))
    except InputError:  # (the stream's reader names the fault)
        return False
    return records > 0 and 4 * records == head.count(b"\n") + (not head.endswith(b"\n"))


class Chunks:
    """encoded_chunks(path); files of at least min_bytes are parsed in a child process started here (or in
    parts by worker processes: _RangeChunks), so that both inputs parse in parallel and beside the alignment,
    and the parent only receives ready buffers (which bounds what is in flight; a FASTQ part that fails hands
    the rest to a stream in this process). Stdin, small files and platforms without fork parse in this process.
    Start it before threads or the GPU: the child is forked."""

    def __init__(self, path: str, min_bytes: int = PARALLEL_MIN_BYTES, workers: int = 1, symbols: bytes = b"",
                 start: tuple = (0, 0, 1)):
        """workers > 1: a plain or bgzip FASTA or FASTQ file is parsed in parts by that many processes;
        symbols: the non-letter bytes sequences may hold (pack.symbols); start: read on from a record
        (fastx.record_chunks' start), in this process."""
        import multiprocessing as mp

        self.path, self.proc, self.conn, self.ranges = path, None, None, None
        try:
            big = path != STDIN and os.path.getsize(path) >= min_bytes
        except OSError:
            big = False
        if not big or start[0] or not can_fork():
            self.it = encoded_chunks(path, symbols=symbols, start=start)
            return
        sniff(path)  # the common errors before a process starts
        parts = _parts(path) if workers > 1 else None
        if parts is not None:
            cuts, fastq = parts
            self.ranges = _RangeChunks(path, cuts, workers, symbols, fastq)
            self.it = iter(self.ranges)
            return
        ctx = mp.get_context("fork")
        self.conn, child = ctx.Pipe(duplex=False)
        self.proc = ctx.Process(target=_produce, args=(path, child, symbols), daemon=True)
        self.proc.start()
        child.close()
        self.it = self._receive()

    def _receive(self):
        while True:
            try:
                msg = self.conn.recv()
                if msg[0] == "chunk":
                    yield msg[1], self.conn.recv_bytes(), msg[2], msg[3]
                    continue
            except EOFError:
                self.proc.join(timeout=5)
                raise InputError(f"{display_name(self.path)}: reader process ended unexpectedly "
                                 f"(exit code {self.proc.exitcode})") from None
            if msg[0] == "end":
                return
            raise msg[1]

    def __iter__(self):
        return self

    def __next__(self):
        return next(self.it)

    def close(self) -> None:
        self.it.close()
        self.abort()

    def abort(self) -> None:
        """Stop the child (if any) and drop the pipe; safe from another thread and more than once."""
        ranges, self.ranges = self.ranges, None
        if ranges is not None:
            ranges.close()
        proc, self.proc = self.proc, None
        if proc is not None:
            with contextlib.suppress(OSError):  # (at the interpreter's exit its descriptor may be gone)
                self.conn.close()
            if proc.is_alive():
                proc.terminate()
            proc.join(timeout=5)
