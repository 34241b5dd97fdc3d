"""FASTA/FASTQ streams (plain, gzip, bgzip, '-' for stdin) -> PairBatch chunks.

Parsing is htslib's (pysam.FastxFile), taken in chunks of records so that the
Python work per record stays small. This module adds what a user needs:
a sniff that tells "empty" from "not FASTA/FASTQ", errors that name the file
and record, a check of the sequence bytes, and batching in bounded memory.
"""

from __future__ import annotations

import gzip
import io
import os
import tempfile
import zlib
from collections import deque
from itertools import islice
from typing import Iterator

import numpy as np

from .. import pack
from ..errors import InputError, RecordError
from ..records import Names, PairBatch, offsets_from_lengths

STDIN = "-"

try:  # ISA-L's inflate (isal, optional): about twice zlib's speed, in a thread of its own beside the parsing
    from isal import igzip_threaded, isal_zlib

    def _open_gz(path: str):
        return igzip_threaded.open(path, "rb", threads=1)

    _READ_ERRORS: tuple = (EOFError, OSError, zlib.error, isal_zlib.error)
except ImportError:  # pragma: no cover - isal is a dependency; gzip when it is missing
    def _open_gz(path: str):
        return gzip.open(path, "rb")

    _READ_ERRORS = (EOFError, OSError, zlib.error)


def display_name(path: str) -> str:
    return "stdin" if path == STDIN else path


def sniff(path: str) -> None:
    """Raise InputError if path is missing, unreadable, empty or not FASTA/FASTQ."""
    if path == STDIN:
        return
    if os.path.isdir(path):
        raise InputError(f"{path}: is a directory, not a FASTA/FASTQ file")
    try:
        with open(path, "rb") as fh:
            magic = fh.read(2)
        opener = gzip.open if magic == b"\x1f\x8b" else open
        with opener(path, "rb") as fh:
            head = fh.read(1 << 16)
            while head and not head.strip():
                head = fh.read(1 << 16)
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except PermissionError:
        raise InputError(f"{path}: permission denied") from None
    except (EOFError, zlib.error, gzip.BadGzipFile) as e:
        raise InputError(f"{path}: corrupt or truncated gzip data ({e})") from None
    except OSError as e:
        raise InputError(f"{path}: cannot read ({e.strerror or e})") from None
    first = head.lstrip()[:1]
    if not first:
        raise InputError(f"{path}: empty file (no FASTA/FASTQ records)")
    if first not in (b">", b"@"):
        raise InputError(f"{path}: not FASTA or FASTQ (first character {first.decode('latin-1')!r}, "
                         "expected '>' or '@')")


CHUNK = 16384  # records taken from htslib per Python step


class _NotSimple(Exception):
    """The file is not strict 2-line FASTA / 4-line FASTQ from here on (after `records` records)."""

    def __init__(self, records: int):
        super().__init__(records)
        self.records = records


_BLOCK = 1 << 23


def _all_start(lines: list, mark: bytes) -> bool:
    """Does every line start with the one-byte mark? (joined once: no Python step per line)"""
    return not lines or (lines[0][:1] == mark and b"\n".join(lines).count(b"\n" + mark) == len(lines) - 1)


def _names(heads: list) -> list:
    """Record names (the header up to the first whitespace, marker dropped) as str. Headers with no
    whitespace at all, the common case, are split in one step; IndexError for an empty name."""
    if not heads:
        return []
    text = b"\n".join(heads).decode("ascii")
    if " " in text or "\t" in text or "\x0b" in text or "\x0c" in text:
        names = [h[1:].split(None, 1)[0].decode("ascii") for h in heads]
    else:
        names = text[1:].split("\n" + text[0])
    if len(names) != len(heads) or "" in names:
        raise IndexError("empty record name")
    return names


def _simple_chunks(path: str, chunk: int, data: bytes | None = None):
    """Fast path for the common layout: FASTA with one sequence line per record, or 4-line FASTQ, no CR.
    Anything else raises _NotSimple(records already yielded) and htslib takes over from there.
    data: parse these bytes (a part of path holding whole records) instead of the file."""
    if data is None:
        with open(path, "rb") as fh:
            gz = fh.read(2) == b"\x1f\x8b"
    done = 0
    with (io.BytesIO(data) if data is not None else _open_gz(path) if gz else open(path, "rb")) as fh:
        carry = b""
        step = None
        while True:
            try:
                block = fh.read(_BLOCK)
            except _READ_ERRORS:
                raise _NotSimple(done) from None  # htslib reports the damage with the record number
            data = carry + block
            if b"\r" in data:
                raise _NotSimple(done)
            lines = data.split(b"\n")
            last = lines.pop()
            if not block and last:  # no newline at the end of the input
                lines.append(last)
                last = b""
            if step is None and lines:
                step = 2 if lines[0][:1] == b">" else 4
            if not step:
                if not block:
                    return
                carry = last
                continue
            if not block:  # end of input: every line must belong to a whole record
                if len(lines) % step:
                    raise _NotSimple(done)
                whole = len(lines)
            else:  # hold the last record back: its sequence may go on in the next block
                whole = max(0, len(lines) // step - 1) * step
            carry = b"\n".join(lines[whole:] + [last])
            # check every complete line of the block (held-back ones too: the line after the last
            # record yielded must start the next record), then take the records up to `whole`
            heads = lines[0::step]
            try:
                if step == 2:
                    seqs = lines[1::step]
                    ok = _all_start(heads, b">") and (not seqs or b"\n>" not in b"\n" + b"\n".join(seqs))
                else:
                    n4 = len(lines) // 4
                    seqs, qb = lines[1::4][:n4], lines[3::4][:n4]
                    ok = (_all_start(heads, b"@") and _all_start(lines[2::4], b"+")
                          and list(map(len, seqs)) == list(map(len, qb)))
                if not ok:
                    raise _NotSimple(done)
                k = whole // step
                heads, seqs = heads[:k], seqs[:k]
                quals = [None] * k if step == 2 else [x.decode("ascii") for x in qb[:k]]
                names = _names(heads)
            except (IndexError, UnicodeDecodeError):
                raise _NotSimple(done) from None
            for i in range(0, len(names), chunk):
                yield names[i:i + chunk], seqs[i:i + chunk], quals[i:i + chunk]
                done += len(names[i:i + chunk])
            if not block:
                return


def record_chunks(path: str, chunk: int = CHUNK, fast: bool = True) -> Iterator[tuple[list, list, list]]:
    """Yield (names, sequences (str or bytes), qualities or None) lists of up to chunk records each;
    errors name the file and record. Strict 2-line FASTA / 4-line FASTQ files take a fast path (many
    short records; fast=False skips it: it re-copies a record that spans its 8 MB blocks);
    any other layout (multi-line FASTA, CR line ends, damage) is parsed by htslib."""
    sniff(path)
    n = 0
    if path != STDIN and fast:
        try:
            for item in _simple_chunks(path, chunk):
                n += len(item[0])
                yield item
            return
        except _NotSimple as e:
            n = e.records
    yield from _htslib_chunks(path, chunk, n)


def _htslib_chunks(path: str, chunk: int, skip: int, name: str | None = None) -> Iterator[tuple[list, list, list]]:
    """htslib's parser (pysam.FastxFile), starting after the first `skip` records; name: the file
    named in errors (path itself by default)."""
    import pysam

    pysam.set_verbosity(0)  # htslib's own messages: we raise our one-line error instead
    name = name or display_name(path)
    n = 0
    try:
        fh = pysam.FastxFile(path, persist=False)
    except OSError as e:
        raise InputError(f"{name}: cannot open ({e})") from None
    it = iter(fh)
    try:
        with fh:
            for _ in islice(it, skip):
                n += 1
            while True:
                names, seqs, quals = [], [], []
                put_n, put_s, put_q = names.append, seqs.append, quals.append
                try:
                    for r in islice(it, chunk):  # persist=False: read each proxy before the next
                        put_n(r.name)
                        put_s(r.sequence or "")
                        put_q(r.quality)
                finally:
                    n += len(names)
                if not names:
                    break
                yield names, seqs, quals
    except UnicodeDecodeError:
        raise RecordError(name, n + 1, "non-ASCII byte in the record") from None
    except (ValueError, OSError) as e:
        msg = str(e)
        if "quality" in msg:
            raise RecordError(name, n + 1, "quality length differs from sequence length") from None
        raise RecordError(name, n + 1, f"truncated or malformed input ({msg.split(' in ')[0]})") from None
    if n == 0:
        raise InputError(f"{name}: no FASTA/FASTQ records (empty input or not FASTA/FASTQ)")


def records(path: str, chunk: int = CHUNK, fast: bool = True) -> Iterator[tuple[str, str, str | None]]:
    """(name, sequence, quality or None) per record (chunk=1, fast=False for genomes: one long record
    in memory at a time, read by htslib)."""
    for names, seqs, quals in record_chunks(path, chunk, fast):
        yield from zip(names, seqs, quals)


def encode(seqs: list, path: str, first_record: int) -> bytes:
    """Join, check and case-fold a chunk's sequences (str or bytes)."""
    if seqs and isinstance(seqs[0], bytes):
        raw = b"".join(seqs)
        bad = pack.first_bad_byte(np.frombuffer(raw, dtype=np.uint8))
        joined = raw.decode("latin-1") if bad >= 0 else ""
    else:
        joined = "".join(seqs)
        try:
            raw = joined.encode("ascii")
        except UnicodeEncodeError as e:
            bad = e.start
        else:
            bad = pack.first_bad_byte(np.frombuffer(raw, dtype=np.uint8))
    if bad >= 0:
        lens = np.fromiter((len(s) for s in seqs), dtype=np.int64, count=len(seqs))
        k = int(np.searchsorted(np.cumsum(lens), bad, side="right"))
        ch = joined[bad]
        raise RecordError(display_name(path), first_record + k,
                          f"invalid sequence character {ch!r} (code {ord(ch)}); printable ASCII only")
    return raw.translate(pack.FOLD)


def encoded_chunks(path: str, chunk: int = CHUNK) -> Iterator[tuple[list, bytes, np.ndarray, list]]:
    """(names, sequences joined + checked + case-folded, their lengths, qualities) per chunk."""
    n = 0
    for names, seqs, quals in record_chunks(path, chunk):
        buf = encode(seqs, path, n + 1)
        yield names, buf, np.fromiter(map(len, seqs), dtype=np.int64, count=len(seqs)), quals
        n += len(names)


PARALLEL_MIN_BYTES = 16 << 20  # files at least this big are parsed in a child process


def _produce(path: str, conn) -> None:
    """Child process: a file's encoded chunks down the pipe (metadata, then the raw sequence bytes),
    then ("end",), or ("error", exception)."""
    try:
        for names, buf, lens, quals in encoded_chunks(path):
            conn.send(("chunk", Names.of(names), lens, quals))
            conn.send_bytes(buf)
        conn.send(("end",))
    except BaseException as e:  # noqa: BLE001 - forwarded to the parent, which raises it
        try:
            conn.send(("error", e))
        except Exception:  # noqa: BLE001 - the parent is gone
            pass
    finally:
        conn.close()


RANGE_BYTES = 1 << 24  # plain FASTA files are parsed in parts of about this size by several processes


def record_cuts(path: str, size: int, every: int) -> list:
    """Offsets splitting a FASTA file into parts of about `every` bytes, each starting at a record
    (a '>' after a newline), with 0 and size at the ends."""
    cuts = [0]
    with open(path, "rb") as fh:
        want = every
        while want < size:
            at, found = want - 1, -1
            while found < 0:
                fh.seek(at)
                block = fh.read(1 << 20)
                if len(block) < 2:
                    break
                i = block.find(b"\n>")
                found = at + i + 1 if i >= 0 else -1
                at += len(block) - 1  # one byte back: a newline at the block's end
            if found < 0:
                break
            if found > cuts[-1]:
                cuts.append(found)
            want = found + every
    return cuts + [size]


def _parse_range(path: str, start: int, end: int) -> tuple:
    """Worker process: the records of path[start:end) (whole records) -> (shared memory block holding
    their encoded sequence bytes, its size, their Names, lengths). Record numbers in errors count from
    the range's first record."""
    from multiprocessing import resource_tracker, shared_memory

    with open(path, "rb") as fh:
        fh.seek(start)
        data = fh.read(end - start)
    names, bufs, lens = [], [], []

    def add(nm, seqs):
        bufs.append(encode(seqs, path, len(names) + 1))
        lens.append(np.fromiter(map(len, seqs), dtype=np.int64, count=len(seqs)))
        names.extend(nm)

    try:
        for nm, seqs, _ in _simple_chunks(path, CHUNK, data):
            add(nm, seqs)
    except _NotSimple as e:  # this part is not strict 2-line FASTA: htslib on its bytes, from there on
        from .. import interrupt

        # (named for the run: a signal's handler removes it if this worker is ended before it can)
        with tempfile.NamedTemporaryFile(prefix=interrupt.temp_prefix(), suffix=".fa") as tmp:
            tmp.write(data)
            tmp.flush()
            for nm, seqs, _ in _htslib_chunks(tmp.name, CHUNK, e.records, name=display_name(path)):
                add(nm, seqs)
    raw = b"".join(bufs)
    from .. import interrupt

    shm = shared_memory.SharedMemory(create=True, size=max(1, len(raw)), name=interrupt.shm_name())
    shm.buf[:len(raw)] = raw
    shm.close()
    resource_tracker.unregister(shm._name, "shared_memory")  # the parent unlinks it
    # names as one buffer (Names): the parent makes no Python object per record
    return shm.name, len(raw), Names.of(names), (np.concatenate(lens) if lens else np.zeros(0, np.int64))


def _take_shared(name: str, size: int) -> np.ndarray:
    """A worker's shared memory block as a read-only array (no copy); its name is removed at once, the
    memory goes when the last view of it does."""
    import mmap

    from multiprocessing import shared_memory

    shm = shared_memory.SharedMemory(name=name)
    try:
        if size == 0:
            return np.zeros(0, np.uint8)
        flags = mmap.MAP_SHARED | getattr(mmap, "MAP_POPULATE", 0)  # pages mapped in one call, not one fault each
        view = mmap.mmap(shm._fd, size, flags=flags, prot=mmap.PROT_READ)  # our own mapping, kept by the array
        return np.frombuffer(view, dtype=np.uint8, count=size)
    finally:
        shm.close()
        shm.unlink()


class _RangeChunks:
    """encoded_chunks of a plain FASTA file, its parts (RANGE_BYTES) parsed by `workers` forked processes,
    at most 2 * workers parts ahead of the consumer; one chunk per part, in file order."""

    def __init__(self, path: str, workers: int):
        import multiprocessing as mp
        from concurrent.futures import ProcessPoolExecutor

        self.path = path
        self.cuts = record_cuts(path, os.path.getsize(path), RANGE_BYTES)
        self.pool = ProcessPoolExecutor(workers, mp_context=mp.get_context("fork"))
        self.futs: deque = deque()
        self.next = 0
        for _ in range(2 * workers):
            self._submit()

    def _submit(self) -> None:
        if self.next < len(self.cuts) - 1:
            a, b = self.cuts[self.next], self.cuts[self.next + 1]
            try:
                self.futs.append(self.pool.submit(_parse_range, self.path, a, b))
            except RuntimeError:  # shut down by close() from another thread: nothing more to read
                return
            self.next += 1

    def __iter__(self):
        from concurrent.futures.process import BrokenProcessPool

        base = 0  # records in the parts before
        while self.futs:
            fut = self.futs.popleft()
            self._submit()
            try:
                shm_name, size, names, lens = fut.result()
            except RecordError as e:
                raise RecordError(e.name, base + e.record, e.detail) from None
            except BrokenProcessPool:
                raise InputError(f"{display_name(self.path)}: a reader process ended unexpectedly") from None
            base += len(lens)
            yield names, _take_shared(shm_name, size), lens, [None] * len(lens)

    def close(self) -> None:
        """Stop the workers; free the parts parsed but not taken."""
        self.pool.shutdown(wait=True, cancel_futures=True)
        while self.futs:
            fut = self.futs.popleft()
            if fut.done() and not fut.cancelled() and fut.exception() is None:
                name, size = fut.result()[:2]
                _take_shared(name, 0)


class _Chunks:
    """encoded_chunks(path); files of at least min_bytes are parsed in a child process started here,
    so that both inputs parse in parallel and beside the alignment, and the parent only receives ready
    buffers through a pipe (which bounds what is in flight). Stdin, small files and platforms without
    fork parse in this process. Start it before threads or the GPU: the child is forked."""

    def __init__(self, path: str, min_bytes: int = PARALLEL_MIN_BYTES, workers: int = 1):
        """workers > 1: a plain (not compressed) FASTA file is parsed in parts by that many processes."""
        import multiprocessing as mp

        self.path, self.proc, self.conn, self.ranges = path, None, None, None
        try:
            big = path != STDIN and os.path.getsize(path) >= min_bytes
        except OSError:
            big = False
        if not big or "fork" not in mp.get_all_start_methods():
            self.it = encoded_chunks(path)
            return
        sniff(path)  # the common errors before a process starts
        if workers > 1:
            with open(path, "rb") as fh:
                plain_fasta = fh.read(1) == b">"
            if plain_fasta:
                self.ranges = _RangeChunks(path, workers)
                self.it = iter(self.ranges)
                return
        ctx = mp.get_context("fork")
        self.conn, child = ctx.Pipe(duplex=False)
        self.proc = ctx.Process(target=_produce, args=(path, child), daemon=True)
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
            self.conn.close()
            if proc.is_alive():
                proc.terminate()
            proc.join(timeout=5)


class _Buffered:
    """Encoded records of one file, taken in chunks and handed out in any count."""

    def __init__(self, path: str, min_bytes: int = PARALLEL_MIN_BYTES, workers: int = 1):
        self.chunks = _Chunks(path, min_bytes, workers)
        self.pieces: deque = deque()  # [sequence bytes, lengths, Names, qualities] not yet taken
        self.lens = np.zeros(0, np.int64)  # lengths of every buffered record
        self.count = 0  # records buffered
        self.done = False

    def fill(self, want: int) -> int:
        while self.count < want and not self.done:
            try:
                n, buf, ln, q = next(self.chunks)
            except StopIteration:
                self.done = True
                break
            seq = buf if isinstance(buf, np.ndarray) else np.frombuffer(buf, dtype=np.uint8)
            self.pieces.append([seq, ln, Names.of(n), q])
            self.lens = np.concatenate([self.lens, ln])
            self.count += len(ln)
        return self.count

    def take(self, k: int):
        """(Names, quals, sequence byte pieces (arrays, in order), lengths) of the next k records."""
        lens, self.lens = self.lens[:k], self.lens[k:]
        self.count -= k
        names, quals, parts, need = [], [], [], k
        while need:
            buf, ln, nm, q = self.pieces[0]
            if len(ln) <= need:
                self.pieces.popleft()
                cut = len(buf)
            else:
                cut = int(ln[:need].sum())
                self.pieces[0] = [buf[cut:], ln[need:], nm[need:], q[need:]]
                ln, nm, q = ln[:need], nm[:need], q[:need]
            parts.append(buf[:cut])
            names.append(nm)
            quals += q
            need -= len(ln)
        return Names.concat(names), quals, parts, lens

    def close(self) -> None:
        self.chunks.close()


def read_pairs(path_a: str, path_b: str, batch_bases: int, batch_pairs: int,
               parallel_min_bytes: int = PARALLEL_MIN_BYTES, workers: int = 1) -> Iterator[PairBatch]:
    """Record i of A with record i of B, in batches of bounded size (bases and pairs). Big inputs start
    their parsing processes now (call this before starting threads or the GPU), batches come lazily;
    workers > 1: that many per plain FASTA file, each parsing a part of it."""
    if path_a == STDIN and path_b == STDIN:
        raise InputError("only one of the two inputs can be '-' (stdin)")
    return PairReader(path_a, path_b, batch_bases, batch_pairs, parallel_min_bytes, workers)


class PairReader:
    """The batches of read_pairs; abort() stops the parsing processes from any thread (on failure)."""

    def __init__(self, path_a, path_b, batch_bases, batch_pairs, parallel_min_bytes, workers=1):
        self.a = _Buffered(path_a, parallel_min_bytes, workers)
        try:
            self.b = _Buffered(path_b, parallel_min_bytes, workers)
        except BaseException:
            self.a.chunks.abort()
            raise
        self.alloc = np.empty  # sequence buffers of the batches: set to engines.host_allocator(chain)
        self.gen = _batches(self.a, self.b, path_a, path_b, batch_bases, batch_pairs,
                            lambda n: self.alloc(n, dtype=np.uint8))

    def __iter__(self):
        return self

    def __next__(self) -> PairBatch:
        return next(self.gen)

    def abort(self) -> None:
        self.a.chunks.abort()
        self.b.chunks.abort()


def _batches(a: _Buffered, b: _Buffered, path_a: str, path_b: str, batch_bases: int,
             batch_pairs: int, alloc) -> Iterator[PairBatch]:
    count = 0
    try:
        while True:
            want = CHUNK
            while True:  # enough records buffered for one batch, or the end of a file
                avail = min(a.fill(want), b.fill(want))
                total = int(a.lens[:avail].sum() + b.lens[:avail].sum())
                if avail < want or total >= batch_bases or avail >= batch_pairs:
                    break
                want += CHUNK
            if avail == 0:
                if a.count or b.count:
                    longer, shorter = (path_a, path_b) if a.count else (path_b, path_a)
                    raise InputError(f"{display_name(longer)} has more records than {display_name(shorter)} "
                                     f"({display_name(shorter)} ends after {count} records)")
                return
            # as many pairs as the size bounds allow (at least one)
            k = int(np.searchsorted(np.cumsum(a.lens[:avail] + b.lens[:avail]), batch_bases, side="left")) + 1
            k = max(1, min(k, avail, batch_pairs))
            qn, qq, qparts, ql = a.take(k)
            tn, _, tparts, tl = b.take(k)
            seq = alloc(sum(map(len, qparts)) + sum(map(len, tparts)))
            at = 0
            for part in qparts + tparts:  # one copy from the chunks into the batch
                seq[at:at + len(part)] = part
                at += len(part)
            nq = int(ql.sum())
            yield PairBatch(seq, offsets_from_lengths(ql), ql, offsets_from_lengths(tl) + nq, tl,
                            np.arange(count, count + k, dtype=np.int64), qn, tn, qq)
            count += k
    finally:
        a.close()
        b.close()


def names_and_lengths(path: str) -> Iterator[tuple[str, int]]:
    """(name, length) of every record: the first pass SAM headers need."""
    for name, seq, _ in records(path):
        yield name, len(seq)
