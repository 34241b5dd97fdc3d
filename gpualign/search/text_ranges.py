"""A plain or bgzip FASTA file read in ranges by worker processes (io/ranged.py: a bgzip file's members
inflated by the processes reading them), each of which lays its range out as a whole text
chunk (text.Chunk's layout: pieces at multiples of ALIGN, PAD between, each piece's context before it) in
a shared-memory slot: the codes are written once, where the engines read them, never copied through
this process. A slot goes back to the pool when the chunk's user is done with it (text.TextReader.release).

The main process finds where the line holding a range's first byte starts (searching back at most to the
previous range's start); the worker reads the rest from the file itself: whether that line is a header
(the range where a header starts reads it whole), the byte before the range, and the last `context` codes
of the record open there. A range whose layout would not fit its slot (very many short records) is read
as two halves instead."""

from __future__ import annotations

import queue
import threading
from collections import deque
from typing import NamedTuple

import numpy as np

from .. import interrupt, shm
from ..errors import GpualignError
from ..io import ranged
from ..records import offsets_from_lengths
from . import alphabet as A
from . import text_scan as TS
from .text_scan import Item

RANGE = 1 << 25  # bytes of the file per range (a chunk): fewer, larger chunks cost the search less
# (docs/notes/benchmark-history.md)
ALIGN = 16  # pieces start at multiples of 16 in a chunk's buffer (the kernels' loads)
AHEAD = 1  # ranges in flight per worker process (and one more)
HELD = 6  # chunks the reader's consumers hold at most (queued, searched, aligned), beyond those in flight


class Layout(NamedTuple):
    """A worker's range: its Items (codes: their counts) for the reader's checks and records, then, where the range
    was scanned with array operations (many records, _many), its later header lines and the codes after each
    (counts). pieces: int64 [segments, 4], per segment (the text before the range's first header, then after each
    header) its piece's buffer offset, context, length, and last (1 when a header follows in the range or the
    file ends with it). size: the slot's bytes used. split > 0: the layout did not fit the slot; nothing was
    written, read [a, split) and [split, b)."""

    items: list
    pieces: np.ndarray
    size: int = 0
    split: int = 0
    headers: tuple = ()
    counts: np.ndarray = None
    end_cr: bool = False  # the file ends in a CR after the range's last codes (text_scan.LONE_CR: no LF after it)


def place(at: int, lengths: np.ndarray, gap: int) -> tuple[np.ndarray, np.ndarray]:
    """Pieces of these lengths laid out after byte `at` of a chunk's buffer, each `gap` PAD bytes after the end
    of the one before rounded up to ALIGN (gap: a multiple of ALIGN): (their starts, their spans: length
    rounded up + gap, so the next piece starts at start + span)."""
    span = -(-lengths // ALIGN) * ALIGN + gap
    return -(-at // ALIGN) * ALIGN + gap + offsets_from_lengths(span), span


def slot_bytes(range_bytes: int, context: int, gap: int) -> int:
    """A slot's size: a range's codes, and room for the pieces and PAD of a range of short records."""
    return range_bytes + range_bytes // 2 + 4 * (gap + context + 2 * ALIGN) + 1024


def _before(src, a: int, line: int, context: int) -> tuple[int, bool, bytes]:
    """(the byte before offset a, a lies inside a header line, the last `context` codes of the record open at
    a), line being the start of the line holding a: read backwards from a (src: io.ranged), as far as the
    context needs."""
    if a == 0:
        return 10, False, b""
    prev = src.pread(1, a - 1)[0]
    if line < a and src.pread(1, line) == b">":
        return prev, True, b""
    span = 4 * context + 256
    while True:
        lo = max(0, a - span)
        back = src.pread(a - lo, lo)
        g = back.rfind(b"\n>")  # (a header line before a ends before it: a's line is no header)
        head = g + 1 if g >= 0 else 0 if lo == 0 and back[:1] == b">" else -1
        if head >= 0:
            codes = A.to_codes(back[back.index(b"\n", head) + 1:])
        elif lo == 0 or lo >= line:  # all of it on a's (sequence) line, or from the file's start
            codes = A.to_codes(back)
        else:  # its first line may end a header that starts further back: whole lines after it only
            nl = back.find(b"\n")
            codes = A.to_codes(back[nl + 1:]) if nl >= 0 else b""
        if head >= 0 or lo == 0 or len(codes) >= context:
            return prev, False, codes[max(0, len(codes) - context):] if context else b""
        span *= 4


_mapped: dict = {}  # per worker process: slot name -> its mapping, for the slots of the latest reader


def _slot(name: str) -> np.ndarray:
    if name not in _mapped:
        reader = name.rsplit("_", 1)[0]
        for old in [n for n in _mapped if not n.startswith(reader + "_")]:  # an earlier reader's: gone
            del _mapped[old]
        _mapped[name] = shm.mapped(name)
    return _mapped[name]


def _header_rest(src, at: int, start: bytes) -> bytes:
    """A header line that starts with `start` and goes on from offset at, whole."""
    more = [start]
    while True:
        piece = src.pread(1 << 16, at)
        nl = piece.find(b"\n")
        more.append(piece if nl < 0 else piece[:nl])
        if nl >= 0 or not piece:
            return b"".join(more)
        at += len(piece)


def _range(path: str, a: int, b: int, line: int, slot: str, cap: int, context: int, gap: int) -> Layout:
    """Worker: bytes [a, b) of a plain or bgzip FASTA file (inflated) laid out in the slot (cap bytes); line: the
    start of the line holding byte a."""
    headers, codes, counts = [], np.zeros(0, np.uint8), np.zeros(0, np.int64)
    src = ranged.cached(path)
    prev, in_header, ctx = _before(src, a, line, context)
    data = src.pread(b - a, a)
    pos = 0
    if in_header:
        nl = data.find(b"\n")
        pos = len(data) if nl < 0 else nl + 1
    found, many, header = TS.scan(data, pos, prev)
    if many is not None:
        headers, codes, counts = many
    if header is not None:  # a header line that starts here and ends in a later range
        header = _header_rest(src, b, header)
        if many is None:
            found.append(Item(header))
        else:
            headers.append(header)
            counts = np.append(counts, 0)
    end_cr = header is None and b == src.size and data.endswith(b"\r")  # (scan read it as a CR LF's)
    segs = [[ctx]]  # the segments of the Items: their context, then their codes (then those of _many's, if any)
    for it in found:
        if it.header is not None:
            segs.append([])
        elif it.codes:
            segs[-1].append(it.codes)
    lengths = np.array([sum(map(len, seg)) for seg in segs] + counts.tolist(), np.int64)
    starts, span = place(0, lengths, gap)
    end = int(starts[-1] + span[-1])
    if end > cap and b - a > 1:
        return Layout([], np.zeros((0, 4), np.int64), 0, a + (b - a) // 2)
    dst = _slot(slot)
    each = len(starts) < TS.MANY  # PAD after each piece; else everywhere first (one fill, not a slice per piece)
    dst[:gap if each else end] = A.PAD
    at = 0
    for i, (d, n, s) in enumerate(zip(starts.tolist(), lengths.tolist(), span.tolist())):
        if i < len(segs):
            x = d
            for part in segs[i]:
                dst[x:x + len(part)] = np.frombuffer(part, np.uint8)
                x += len(part)
        else:
            dst[d:d + n] = codes[at:at + n]
            at += n
        if each:
            dst[d + n:d + s] = A.PAD
    pieces = np.column_stack([starts, np.zeros_like(starts), lengths, np.ones_like(starts)])
    pieces[0, 1:3] = len(ctx), lengths[0] - len(ctx)
    pieces[-1, 3] = b == src.size
    return Layout([it._replace(codes=len(it.codes)) if it.header is None else it for it in found], pieces, end,
                  headers=tuple(headers), counts=counts if many is not None else None, end_cr=end_cr)


class Slots:
    """The reader's shared-memory slots: made as they are needed, up to `most`, and given back by the chunks'
    user from any thread."""

    def __init__(self, cap: int, most: int, stopped: threading.Event | None = None):
        self.cap, self.most = cap, most
        self.base = interrupt.shm_name()
        self.names: list = []
        self.views: list = []
        self.free: queue.Queue = queue.Queue()
        self.short = False  # shared memory ran out: no more slots
        self.stopped = stopped or threading.Event()  # the run is stopping: no more waiting for a slot

    def get(self, wait: bool) -> int | None:
        """A free slot's index (a new one if none is free and one can be made), or None; wait: until one
        comes back, or a GpualignError once stopped is set."""
        try:
            return self.free.get_nowait()
        except queue.Empty:
            pass
        if not self.short and len(self.names) < self.most:
            name = f"{self.base}_{len(self.names)}"
            try:
                self.views.append(shm.mapped(name, self.cap))
                self.names.append(name)
                return len(self.names) - 1
            except OSError:
                self.short = True
        while wait:
            try:
                return self.free.get(timeout=0.1)
            except queue.Empty:
                if self.stopped.is_set():
                    raise GpualignError("search: the text reader stopped while waiting for a buffer") from None
        return None

    def spare(self) -> bool:
        """Whether a slot is free or can be made (otherwise a chunk about to be handed out is copied)."""
        return not self.free.empty() or (not self.short and len(self.names) < self.most)

    def close(self) -> None:
        for n in self.names:  # (the memory goes with the last view of it)
            shm.discard(n)


def layouts(path: str, src, pool, ahead: int, slots: Slots, range_bytes: int, context: int, gap: int):
    """(Layout, slot index) of each range of a plain or bgzip file (src: its io.ranged reader here, closed by the
    caller), in order, at most `ahead` ranges in flight (fewer when slots run short); the slot holds the layout
    until it is given back (slots.free). Where a range starts inside a line, the line's start is searched
    backwards from there, at most to the previous range's start (a worker checks whether it is a header line).
    Close the generator when stopping early: the ranges in flight finish first."""
    todo: deque = deque()  # (a, b, line) to read before the ranges not yet cut
    pending: deque = deque()
    size = src.size

    def line_of(x: int, floor: int, floor_line: int) -> int:
        nl = src.rfind(b"\n", floor, x)
        return nl + 1 if nl >= 0 else floor_line

    def cuts():
        at, line = 0, 0
        for a in range(0, size, range_bytes):
            line = line_of(a, at, line) if a else 0
            at = a
            yield a, min(size, a + range_bytes), line

    fresh = cuts()
    try:
        while True:
            while len(pending) < ahead:
                r = todo.popleft() if todo else next(fresh, None)
                if r is None:
                    break
                i = slots.get(wait=not pending)
                if i is None:
                    todo.appendleft(r)
                    break
                pending.append((i, r, pool.submit(_range, path, *r, slots.names[i], slots.cap, context, gap)))
            if not pending:
                break
            i, (a, b, line), fut = pending.popleft()
            out = fut.result()
            if out.split:  # read as two halves, before the ranges after it (those in flight: read again)
                again = [(a, out.split, line), (out.split, b, line_of(out.split, a, line))]
                for j, r, f in pending:
                    _finish(f)
                    slots.free.put(j)
                    again.append(r)
                pending.clear()
                slots.free.put(i)
                todo.extendleft(reversed(again))
                continue
            yield out, i
    finally:  # ranges in flight finish before their slots go
        for _, _, fut in pending:
            _finish(fut)


def _finish(fut) -> None:
    """A range in flight dropped: cancelled, or waited for (its outcome ignored)."""
    if not fut.cancel():
        try:
            fut.result()
        except Exception:  # noqa: BLE001 - dropped: the range is read again, or the run is stopping
            pass
