"""The searched text, streamed: FASTA cut into chunks, each a list of pieces of records. A piece repeats the
`context` bases before it in its record, so that every hit ending in the piece is found there whole; no hit
spans two records. A plain or bgzip file with worker processes: a chunk per range of the file, laid out by a
worker in shared memory (text_ranges.py; a bgzip file's members inflated by the workers); otherwise (gzip,
stdin, one thread) the file is read here
(text_scan.py) and its codes copied into chunks of about `chunk` bytes. Memory is bounded by the chunk
size, whatever the size of the text or of its records."""

from __future__ import annotations

import os
import re
import threading
from dataclasses import dataclass, field

import numpy as np

from .. import trace
from ..errors import InputError, RecordError
from ..io import fastx, ranged
from ..io.fastx_strict import CR_IN_HEADER
from ..records import RNAME_RULE, SAM_RNAME_NOT_FIRST, rname_odd, rname_reason
from . import alphabet as A
from . import text_ranges as TR
from . import text_scan
from .text_ranges import ALIGN


@dataclass
class Chunk:
    """codes: the pieces one after another, each at a multiple of ALIGN, PAD bytes between them.
    Per piece: buf (offset of its first byte, context included), record (index), rec_start (record
    coordinate of that first byte), context (bases before the reported part), length (reported bases),
    last (the record ends with this piece). slot: the reader's shared-memory slot holding codes, or -1."""

    codes: np.ndarray
    buf: np.ndarray
    record: np.ndarray
    rec_start: np.ndarray
    context: np.ndarray
    length: np.ndarray
    last: np.ndarray
    slot: int = -1

    @property
    def n(self) -> int:
        return len(self.buf)

    def piece(self, i: int) -> np.ndarray:
        """Piece i's codes, context included."""
        a = int(self.buf[i])
        return self.codes[a:a + int(self.context[i] + self.length[i])]


@dataclass
class Records:
    """Names and lengths of the records read so far (lengths are final once a record's last piece is out)."""

    names: list = field(default_factory=list)
    lengths: list = field(default_factory=list)


class TextReader:
    """Iterate to get Chunks; `records` fills in as the file is read. pool: a fork ProcessPoolExecutor of
    `workers` processes that read a plain file in ranges (text_ranges.py), or None."""

    def __init__(self, path: str, chunk: int, context: int, gap: int = ALIGN, pool=None, workers: int = 1,
                 unique: bool = True):
        """unique: SAM/BAM's rules for record names (@SQ lines: each name once, printable ASCII, not starting
        with * or =); TSV, PAF and BED take any."""
        self.path, self.chunk, self.context, self.unique = path, max(chunk, 4 * ALIGN), context, unique
        self.gap = -(-max(gap, ALIGN) // ALIGN) * ALIGN  # PAD bytes before each piece
        self.pool, self.workers = pool, workers
        # a chunk's bytes: pieces are cut once `chunk` is reached, and a piece takes at least chunk // 4 new
        # bases, so: chunk + that + one piece's context, gap and rounding, and the PAD after the last piece
        self.capacity = self.chunk + self.chunk // 4 + context + 3 * self.gap + 2 * ALIGN
        self.records = Records()
        self._free: list = []  # chunk buffers given back (release), reused: fresh pages cost more than copies
        self._slots = None  # the ranges' shared-memory slots (text_ranges.Slots)
        self._stopped = threading.Event()  # stop(): shared with the slots

    def release(self, chunk: Chunk) -> None:
        """The caller is done with chunk: its buffer may hold a later chunk (call from any thread)."""
        if chunk.slot >= 0:
            self._slots.free.put(chunk.slot)
        elif self._slots is None:  # (a chunk copied out of its slot is not kept)
            self._free.append(chunk.codes.base if chunk.codes.base is not None else chunk.codes)

    def stop(self) -> None:
        """The run is stopping (call from any thread): a reading that waits for a slot to come back ends."""
        self._stopped.set()

    def _buffer(self) -> np.ndarray:
        while self._free:
            b = self._free.pop()
            if len(b) >= self.capacity:
                return b
        return np.empty(self.capacity, dtype=np.uint8)

    @staticmethod
    def check(path: str) -> None:
        """An InputError unless path can be read and starts as FASTA (stdin or a pipe: checked as it is
        read)."""
        if fastx.streamed(path):
            return
        fastx.sniff(path)
        with text_scan.open_text(path) as fh:
            head = text_scan.read(fh, 1 << 16, path, 1).lstrip()
        if head[:1] != b">":
            raise InputError(f"{fastx.display_name(path)}: the text must be FASTA (records start with '>')")

    @trace.traced_items("text chunk")
    def __iter__(self):
        name = fastx.display_name(self.path)
        check = _Checker(self.records, name, self.unique)
        src = slots = None
        span = min(TR.RANGE, self.chunk)
        try:
            if self.pool is not None and self.path != fastx.STDIN and os.path.isfile(self.path):  # (a pipe: once)
                try:
                    src = ranged.open_at(self.path)
                except ValueError:  # (gzip that is not BGZF: its bytes only in order)
                    src = None
            if src is not None and src.size >= 2 * span and _short_lines(src):
                ahead = TR.AHEAD * max(1, self.workers) + 1
                slots = TR.Slots(TR.slot_bytes(span, self.context, self.gap), ahead + TR.HELD, self._stopped)
                if slots.get(wait=False) is None:  # (no shared memory to be had: read here)
                    slots = None
                else:
                    slots.free.put(0)
            if slots is not None:
                yield from self._ranges(check, src, span, slots, ahead)
            else:
                yield from self._stream(check)
        finally:
            if src is not None:
                src.close()
        if check.rec < 0:
            raise InputError(f"{name}: no FASTA records (empty input)")

    def _stream(self, check: "_Checker"):
        out = _Builder(self)
        items = text_scan.stream(self.path, check.name, check.where)
        try:
            for it in items:
                if isinstance(it, text_scan.Many):  # (many records: laid out at once)
                    if check.rec >= 0:
                        yield from out.end_record()
                    yield from out.records(check.many(it.headers, it.counts).start, it.codes, it.counts)
                elif it.header is not None:  # a record starts
                    if check.rec >= 0:
                        yield from out.end_record()
                    check.header(it.header)
                    out.start_record(check.rec)
                elif check.codes(it, len(it.codes)):
                    yield from out.add(it.codes)
        finally:
            items.close()
        if check.rec >= 0:
            yield from out.end_record()
        if out.pieces:
            yield out.emit()

    def _ranges(self, check: "_Checker", src, span: int, slots, ahead: int):
        """Chunks of a plain or bgzip file (src: its io.ranged reader) read by the pool's processes, a range
        each, at most `ahead` in flight (text_ranges.py): the codes stay in the slot the worker wrote them to,
        unless no slot would be left for the reading (then copied)."""
        self._slots = slots
        layouts = TR.layouts(self.path, src, self.pool, ahead, slots, span, self.context, self.gap)
        try:
            for out, slot in layouts:
                recs = [check.rec]  # the record of each segment
                before = self.records.lengths[check.rec] if check.rec >= 0 else 0
                for it in out.items:
                    if it.header is not None:
                        check.header(it.header)
                        recs.append(check.rec)
                    else:
                        check.codes(it, it.codes)
                if out.headers:  # (a range of many records: their headers and counts after its Items)
                    recs += check.many(out.headers, out.counts)
                if out.end_cr:
                    check.codes(text_scan.LONE_CR, 0)
                codes, rec = slots.views[slot][:out.size], np.array(recs, np.int64)
                buf, ctx, n, last = out.pieces.T
                keep = (rec >= 0) & ((n > 0) | (last > 0))
                for s in np.flatnonzero(~keep).tolist():  # (blank lines before the first record, or nothing new
                    codes[buf[s]:buf[s] + ctx[s] + n[s]] = A.PAD  # of a record: PAD)
                if not keep.any():
                    slots.free.put(slot)
                    continue
                if not slots.spare():  # (shared memory short: this slot stays with the reading)
                    codes = codes.copy()
                    slots.free.put(slot)
                    slot = -1
                start = np.zeros(len(rec), np.int64)
                start[0] = before - ctx[0]
                yield Chunk(codes, buf[keep], rec[keep], start[keep], ctx[keep], n[keep], last[keep] > 0, slot)
        except ranged.Corrupt as e:  # (as text_scan.read says it of a stream)
            raise RecordError(check.name, check.where[0], f"corrupt or truncated input in this record or a later one "
                              f"({e})") from None
        except OSError as e:
            raise InputError(f"{check.name}: cannot read ({e})") from None
        finally:
            layouts.close()  # (the ranges in flight finish)
            slots.close()


def _short_lines(src) -> bool:
    """src's lines are short enough for ranges (io.ranged: a bgzip text of unwrapped sequence goes as one stream);
    a first member that does not inflate: the stream's reading says so."""
    try:
        return src.short_lines()
    except ranged.Corrupt:
        return False


_FIRST_WORD = re.compile(r"^[ \t\r\x0b\x0c]*([^ \t\r\n\x0b\x0c]*)", re.M)  # a record's name: its header line's
# first word, ended by ASCII white space only (as io's readers and htslib's faidx find it), each line's with findall


def _utf8(name: str) -> bool:
    """Whether name (decoded with surrogate escapes) was UTF-8 text: no byte was escaped."""
    if name.isascii():
        return True
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


class _Checker:
    """The reader's checks of the Items in file order, and the records they make (names, lengths so far)."""

    def __init__(self, records: Records, name: str, unique: bool = True):
        self.records, self.name = records, name
        self.rec = -1
        self.where = [1]  # the record being read, for read errors
        self.seen: dict | None = {} if unique else None  # record name -> its record index (SAM/BAM's @SQ)
        self.spaces = False  # a line of white space before the first record (an error if a record comes)

    def header(self, header: bytes) -> None:
        """A header line read: the record's name (its first word, UTF-8 text as io's readers require: SAM/BAM
        hold no other bytes; the rest of the line may hold any), new unless names may repeat."""
        self.first()
        self.rec += 1
        self.where[0] = self.rec + 1
        if b"\r" in (header[:-1] if header.endswith(b"\r") else header):
            raise InputError(f"{self.name}: record {self.rec + 1}: {CR_IN_HEADER}")
        nm = _FIRST_WORD.match(header.decode("utf-8", "surrogateescape")).group(1)
        if not nm:
            raise InputError(f"{self.name}: record {self.rec + 1}: empty record name")
        if not _utf8(nm):
            raise InputError(f"{self.name}: record {self.rec + 1}: the record's name is not UTF-8 text")
        if self.seen is not None:
            if nm[0] in SAM_RNAME_NOT_FIRST:
                raise InputError(f"{self.name}: record {self.rec + 1}: record name {nm!r} starts with {nm[0]!r}, "
                                 f"which SAM/BAM's reference names cannot {rname_reason(nm[0])}; rename it, "
                                 "or write TSV, PAF or BED")
            if (odd := rname_odd(nm)) is not None:
                raise InputError(f"{self.name}: record {self.rec + 1}: record name {nm!r} holds "
                                 f"{odd!r}, which SAM/BAM's reference names cannot ({RNAME_RULE}); "
                                 "rename it, or write TSV, PAF or BED")
            if nm in self.seen:
                raise InputError(f"{self.name}: record {self.rec + 1}: record name {nm!r} appears twice (record "
                                 f"{self.seen[nm] + 1}): SAM/BAM name each record once (@SQ); rename it, or "
                                 "write TSV, PAF or BED")
            self.seen[nm] = self.rec
        self.records.names.append(nm)
        self.records.lengths.append(0)

    def first(self) -> None:
        """Before a header: text before the first record is an error, as io's readers have it (empty lines
        only; a file of white space alone is empty, found at its end)."""
        if self.spaces and self.rec < 0:
            raise InputError(f"{self.name}: text before the first '>' header")

    def many(self, headers, counts: np.ndarray) -> range:
        """Header lines, each followed by a stretch of counts[i] codes that passed the checks (text_scan._many):
        as header() and codes() one at a time, the names checked at once. Their records' indices."""
        self.first()
        first = self.rec + 1
        lines = b"\n".join(headers)
        names = _FIRST_WORD.findall(lines.decode("utf-8", "surrogateescape"))  # (each line's)
        fresh = set(names)
        joined = "\n" + "\n".join(names)  # (each name's first character after a line end: no step per name)
        refused = self.seen is not None and (len(fresh) < len(names) or not fresh.isdisjoint(self.seen)
                                             or any("\n" + c in joined for c in SAM_RNAME_NOT_FIRST)
                                             or rname_odd(joined[1:].replace("\n", "!")) is not None)
        cr = b"\r" in (lines + b"\n").replace(b"\r\n", b"\n")  # (a CR that ends no line)
        if len(names) != len(headers) or "" in fresh or refused or cr or not _utf8(joined):
            for h, c in zip(headers, counts.tolist()):  # (the first error, as header() gives it)
                self.header(h)
                self.records.lengths[self.rec] += c
            return range(first, self.rec + 1)
        if self.seen is not None:
            self.seen.update(zip(names, range(first, first + len(names))))
        self.records.names += names
        self.records.lengths += counts.tolist()
        self.rec += len(names)
        self.where[0] = self.rec + 1
        return range(first, self.rec + 1)

    def codes(self, it, n: int) -> bool:
        """A stretch of n codes checked and counted to its record; False before the first record (blank)."""
        if self.rec < 0:
            if not it.blank or it.gt_inside:
                raise InputError(f"{self.name}: text before the first '>' header")
            self.spaces |= it.spaced
            return False
        if it.bad >= 0:  # (before the stretch's end, where a '>' inside a line would be)
            at = self.records.lengths[self.rec] + it.bad + 1
            if it.byte == 13:
                raise InputError(f"{self.name}: record {self.rec + 1}: a carriage return (CR) that ends no line, "
                                 f"before base {at} (line ends of CR alone are not read: convert them to LF)")
            shown = repr(chr(it.byte)) if 32 < it.byte < 127 else f"byte 0x{it.byte:02x}"
            raise InputError(f"{self.name}: record {self.rec + 1}: {shown} at base {at} is not a DNA/IUPAC letter")
        if it.gt_inside:
            raise InputError(f"{self.name}: record {self.rec + 1}: '>' inside a sequence line")
        self.records.lengths[self.rec] += n
        return True


def _chunk(codes: np.ndarray, pieces: list) -> Chunk:
    """A Chunk of codes and its pieces' (buffer offset, record, record coordinate, context, length, last)."""
    return Chunk(codes, *(np.array([x[i] for x in pieces], np.int64) for i in range(5)),
                 np.array([x[5] for x in pieces], bool))


class _Builder:
    """The chunk being filled, and the record piece open in it. A piece starts `gap` bytes after the
    previous one's end rounded up to ALIGN (PAD between), with the record's last `context` codes before it;
    it is cut once the chunk's bytes reach `chunk` (and it has taken chunk // 4 new bases), and the chunk
    goes out then, or when a record ends past `chunk`."""

    def __init__(self, reader: TextReader):
        self.r = reader
        self.buf = reader._buffer()
        self.at = 0  # end of the bytes written
        self.pieces: list = []  # (buffer offset, record, record coordinate of its first byte, context, length, last)
        self.rec = -1
        self.rec_pos = 0  # record coordinate of the next code
        self.start = self.ctx = self.new = 0  # the open piece: buffer offset, context, new codes so far

    def start_record(self, rec: int) -> None:
        self.rec, self.rec_pos = rec, 0
        self._open(b"")

    def _open(self, tail) -> None:
        start = -(-self.at // ALIGN) * ALIGN + self.r.gap
        self.buf[self.at:start] = A.PAD
        if tail:
            self.buf[start:start + len(tail)] = np.frombuffer(tail, np.uint8)
        self.start, self.ctx, self.new, self.at = start, len(tail), 0, start + len(tail)

    def _close(self, last: bool) -> None:
        self.pieces.append((self.start, self.rec, self.rec_pos - self.new - self.ctx, self.ctx, self.new, last))

    def add(self, codes) -> list:
        """Copy codes into the open piece, cutting it where the chunk is full: the chunks given out."""
        done, n, out = 0, len(codes), []
        src = np.frombuffer(codes, np.uint8) if n else None
        while done < n:
            if self.at >= self.r.chunk and self.new >= self.r.chunk // 4:
                tail = bytes(self.buf[self.at - min(self.r.context, self.ctx + self.new):self.at])
                self._close(False)
                out.append(self.emit())
                self._open(tail)
            take = min(n - done, max(self.r.chunk - self.at, self.r.chunk // 4 - self.new))
            self.buf[self.at:self.at + take] = src[done:done + take]
            self.at += take
            self.new += take
            self.rec_pos += take
            done += take
        return out

    def records(self, rec0: int, codes: np.ndarray, counts: np.ndarray):
        """Records rec0, rec0 + 1, ..., their codes one after another (counts each), all but the last ended (it may
        go on): the chunks given out, each as it fills. Runs of records shorter than chunk // 4 (none is cut: a
        piece each) are laid out at once; the others, and the last, one at a time."""
        ends, last, i = np.cumsum(counts), len(counts) - 1, 0
        for j in np.flatnonzero(counts[:last] >= self.r.chunk // 4).tolist() + [last]:
            while i < j:  # (the short records before j)
                i, done = self._whole(rec0, codes, counts, ends, i, j)
                yield from done
            self.start_record(rec0 + j)
            yield from self.add(codes[ends[j] - counts[j]:ends[j]])
            if j < last:
                yield from self.end_record()
            i = j + 1

    def _whole(self, rec0: int, codes: np.ndarray, counts: np.ndarray, ends: np.ndarray, i: int, k: int) -> tuple:
        """Records i.. of records() (short ones, up to k), a piece each, until the chunk is full (then given out):
        (the next record, the chunks given out)."""
        n = counts[i:k]
        starts = TR.place(self.at, n, self.r.gap)[0]
        stop = starts + n
        full = np.flatnonzero(stop >= self.r.chunk)
        m = int(full[0]) + 1 if len(full) else k - i
        self.buf[self.at:stop[m - 1]] = A.PAD
        for s, a, b in zip(starts[:m].tolist(), (ends[i:i + m] - n[:m]).tolist(), ends[i:i + m].tolist()):
            self.buf[s:s + b - a] = codes[a:b]
        self.pieces += [(s, rec0 + i + x, 0, 0, c, True) for x, (s, c) in enumerate(zip(starts[:m].tolist(),
                                                                                      n[:m].tolist()))]
        self.at = int(stop[m - 1])
        return i + m, [self.emit()] if len(full) else []

    def end_record(self) -> list:
        """Close the record's last piece: the chunk given out if this one is full."""
        self._close(True)
        return [self.emit()] if self.at >= self.r.chunk else []

    def emit(self) -> Chunk:
        end = -(-self.at // ALIGN) * ALIGN + self.r.gap
        self.buf[self.at:end] = A.PAD
        out = _chunk(self.buf[:end], self.pieces)
        self.buf, self.at, self.pieces = self.r._buffer(), 0, []
        return out
