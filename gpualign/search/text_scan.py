"""The searched FASTA text as Items in file order (header lines, stretches of sequence codes), for
text.TextReader to cut into chunks.

Two ways, the same Items: a stream read here in blocks (gzip, bgzip, stdin, small files), or a plain
file read in ranges by worker processes, each translating its bytes into a shared-memory slot that the
reader made once and hands out again and again (fresh pages cost more than the copy; the codes never
go through a pipe). A header line belongs to the range where its '>' is; the range it runs into skips
it."""

from __future__ import annotations

import mmap
import os
from collections import deque
from typing import NamedTuple

import numpy as np

from .. import interrupt, shm
from ..errors import InputError
from ..io import fastx, fastx_fast
from . import alphabet as A

BLOCK = 1 << 24  # bytes read at a time (a stream)
RANGE = 1 << 23  # bytes of a plain file per range read by a worker process


class Item(NamedTuple):
    """A header line (header: its bytes after '>'), or the codes of a stretch of sequence lines (header
    None): codes (line ends left out), blank (its bytes are all whitespace), bad (index in codes of the
    first byte that is no IUPAC letter, or -1) and that byte, gt_inside (a '>' that does not start a line
    ends the stretch)."""

    header: bytes | None
    codes: object = b""  # bytes, or a view of a slot (ranges)
    blank: bool = True
    bad: int = -1
    byte: int = 0
    gt_inside: bool = False


def _codes_item(raw, gt_inside: bool) -> Item:
    codes = A.to_codes(raw)
    bad = codes.find(A.BAD)
    blank = not codes or (raw[:1].isspace() and not raw.strip())
    return Item(None, codes, blank, bad, raw.translate(None, b"\r\n")[bad] if bad >= 0 else 0, gt_inside)


def _scan(data: bytes, pos: int, prev: int) -> tuple[list, bytes | None]:
    """Items of data[pos:] (prev: the byte before data), and the start of a header line that data leaves
    unfinished (None if it leaves none). Every '>' starts a header; one that does not start a line is
    flagged on the stretch before it."""
    items = []
    while pos < len(data):
        gt = data.find(b">", pos)
        end = len(data) if gt < 0 else gt
        inside = gt >= 0 and (data[gt - 1] if gt > 0 else prev) != 10
        if end > pos or inside:
            items.append(_codes_item(data[pos:end] if pos or end < len(data) else data, inside))
        if gt < 0:
            break
        nl = data.find(b"\n", gt)
        if nl < 0:
            return items, data[gt + 1:]
        items.append(Item(data[gt + 1:nl]))
        pos = nl + 1
    return items, None


def items(path: str, name: str, where: list, pool=None, workers: int = 1):
    """The Items of a FASTA file (or stdin), in order: a plain file of two ranges or more read by pool's
    processes when pool is given, else a stream read here. where[0]: the record being read (for read
    errors). Close the generator when stopping early."""
    if pool is not None and path != fastx.STDIN and os.path.isfile(path):  # (not a pipe: never read twice)
        size = os.path.getsize(path)
        if size >= 2 * RANGE and not fastx.gzipped(path):
            return _ranges(path, name, where, size, pool, 2 * max(1, workers) + 1)
    return _stream(path, name, where)


def _stream(path: str, name: str, where: list):
    header, prev = None, 10
    with open_text(path) as fh:
        while True:
            data = read(fh, BLOCK, name, where[0])
            if not data:
                break
            pos = 0
            if header is not None:  # a header line goes on
                nl = data.find(b"\n")
                if nl < 0:
                    header += data
                    prev = data[-1]
                    continue
                yield Item(header + data[:nl])
                header, pos = None, nl + 1
            found, header = _scan(data, pos, prev)
            prev = data[-1]
            yield from found
    if header is not None:  # the file ends inside a header line
        yield Item(header)


_mapped: dict = {}  # per worker process: slot name -> its mapping, for the slots of the latest reader


def _slot(name: str) -> np.ndarray:
    if name not in _mapped:
        reader = name.rsplit("_", 1)[0]
        for old in [n for n in _mapped if not n.startswith(reader + "_")]:  # an earlier reader's: gone
            del _mapped[old]
        _mapped[name] = shm.mapped(name)
    return _mapped[name]


def _range(path: str, a: int, b: int, line_start: bool, in_header: bool, slot: str):
    """Worker: the Items of bytes [a, b) of a plain FASTA file whose byte a starts a line (line_start) or
    lies inside a header line (in_header: the range where it starts reads it whole) or inside a sequence
    line. Their codes go one after another into the slot (a shared-memory block of RANGE bytes); each
    Item comes back with the number of its codes in place of them."""
    with open(path, "rb", buffering=0) as fh:
        fd = fh.fileno()
        data = os.pread(fd, b - a, a)
        pos = 0
        if in_header:
            nl = data.find(b"\n")
            if nl < 0:
                return []
            pos = nl + 1
        found, header = _scan(data, pos, 10 if line_start else 0)
        if header is not None:  # a header line that starts here and ends in a later range
            at, more = b, [header]
            while True:
                piece = os.pread(fd, 1 << 16, at)
                nl = piece.find(b"\n")
                more.append(piece if nl < 0 else piece[:nl])
                if nl >= 0 or not piece:
                    break
                at += len(piece)
            found.append(Item(b"".join(more)))
    dst, at = _slot(slot), 0
    for it in found:
        if it.header is None and it.codes:
            dst[at:at + len(it.codes)] = np.frombuffer(it.codes, np.uint8)
            at += len(it.codes)
    return [it._replace(codes=len(it.codes)) if it.header is None else it for it in found]


def _ranges(path: str, name: str, where: list, size: int, pool, ahead: int):
    """Items of a plain file read by pool's processes in RANGE-byte ranges, at most `ahead` in flight (one
    slot each; fewer if shared memory runs short, and a stream read here if not even two fit), in order; a
    range's codes are views of its slot, good until the next Item is asked for. Where a range starts inside
    a line, the line's start (searched backwards from there, at most to the previous range's start) tells
    whether it is a header line."""
    base = interrupt.shm_name()
    slots, views = [], []
    pending: deque = deque()
    try:
        try:
            for i in range(min(ahead, -(-size // RANGE))):
                views.append(shm.mapped(f"{base}_{i}", RANGE))
                slots.append(f"{base}_{i}")
                views[-1].fill(0)  # its pages mapped here now, once
        except OSError:
            if len(slots) < 2:
                yield from _stream(path, name, where)
                return
        free = list(range(len(slots)))
        with open(path, "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mm:
            starts = iter(range(0, size, RANGE))
            line = 0  # the start of the line holding the last range's first byte

            def submit() -> None:
                nonlocal line
                for a in starts:
                    if a:
                        nl = mm.rfind(b"\n", a - RANGE, a)
                        line = nl + 1 if nl >= 0 else line
                    head = a == line
                    inside = not head and mm[line] == ord(">")
                    i = free.pop()
                    pending.append((i, pool.submit(_range, path, a, min(size, a + RANGE), head, inside,
                                                   slots[i])))
                    return

            for _ in slots:
                submit()
            while pending:
                i, fut = pending.popleft()
                found, at = fut.result(), 0
                for it in found:
                    if it.header is None:
                        it, at = it._replace(codes=views[i][at:at + it.codes]), at + it.codes
                    yield it
                free.append(i)
                submit()
    except OSError as e:
        raise InputError(f"{name}: cannot read ({e})") from None
    finally:  # ranges in flight finish before their slots go
        for _, fut in pending:
            if not fut.cancel():
                try:
                    fut.result()
                except Exception:  # noqa: BLE001 - the run is already stopping for another reason
                    pass
        for n in slots:  # (the memory goes with the last view of it)
            shm.unlink(n)


def read(fh, size: int, name: str, record: int) -> bytes:
    """fh.read(size); damaged (gzip) input is an InputError naming the record being read."""
    try:
        return fh.read(size)
    except fastx_fast._READ_ERRORS as e:
        raise InputError(f"{name}: record {record}: corrupt or truncated input ({e})") from None


def open_text(path: str):
    if path == fastx.STDIN:
        import sys

        return os.fdopen(os.dup(sys.stdin.fileno()), "rb")
    return fastx_fast._open_gz(path) if fastx.gzipped(path) else open(path, "rb", buffering=0)
