"""The searched FASTA text as Items in file order (header lines, stretches of sequence codes; a block of many
records as one Many): a stream read here in blocks (gzip, bgzip, stdin, or without worker processes), for
text.TextReader to cut into chunks; scan also serves the workers that read a plain file in ranges
(text_ranges.py). A header line belongs to the range where its '>' is; the range it runs into skips it."""

from __future__ import annotations

import os
from typing import NamedTuple

import numpy as np

from ..errors import RecordError
from ..io import fasta_block, fastx, fastx_fast, fastx_strict
from . import alphabet as A

BLOCK = 1 << 24  # bytes read at a time (a stream)
MANY = 64  # headers in a range from which it is scanned with array operations (_many), not an Item per stretch
_TABLE = fasta_block.table(A.TO_CODE)


class Item(NamedTuple):
    """A header line (header: its bytes after '>'), or the codes of a stretch of sequence lines (header
    None): codes (line ends left out), blank (its bytes are all whitespace), bad (index in codes of the
    first byte that is no IUPAC letter, or -1) and that byte, gt_inside (a '>' that does not start a line
    ends the stretch), spaced (blank, and more than line ends: spaces, tabs, a CR that ends no line)."""

    header: bytes | None
    codes: object = b""  # bytes, or a view of a slot (ranges)
    blank: bool = True
    bad: int = -1
    byte: int = 0
    gt_inside: bool = False
    spaced: bool = False


class Many(NamedTuple):
    """Records read with array operations (_many): their header lines, each followed by its counts[i] codes (one
    record after another in codes). The last record may go on after them."""

    headers: list
    codes: np.ndarray
    counts: np.ndarray


LONE_CR = Item(None, bytes([A.BAD]), False, 0, 13)  # a CR that ended a buffer, and no LF after it


def _codes_item(raw, gt_inside: bool) -> Item:
    codes = A.to_codes(raw)
    bad = codes.find(A.BAD)
    blank = not codes or (raw[:1].isspace() and not raw.strip())
    # (a CR that ends raw may be a CRLF's, its LF in the next range)
    spaced = blank and bool(codes or b"\r" in (raw[:-1] if raw[-1:] == b"\r" else raw).replace(b"\r\n", b""))
    return Item(None, codes, blank, bad, A.line_bytes(raw)[bad] if bad >= 0 else 0, gt_inside, spaced)


def scan(data: bytes, pos: int, prev: int) -> tuple[list, tuple | None, bytes | None]:
    """data[pos:] (prev: the byte before data) as (Items, (headers, codes, counts) where _many read it or None,
    the start of a header line data leaves unfinished or None): _many where it applies, else _scan, the first
    '>' found once for both."""
    first = data.find(b">", pos)
    many = _many(data, pos, prev, first)
    cut = [LONE_CR] if pos == 0 and prev == 13 and data[:1] != b"\n" else []  # (the CR that ended the last buffer)
    if many is None:
        found, header = _scan(data, pos, prev, first)
        return cut + found, None, header
    return (cut + many[0], *many[1:])


def _scan(data: bytes, pos: int, prev: int, first: int | None = None) -> tuple[list, bytes | None]:
    """Items of data[pos:] (prev: the byte before data; first: the first '>' from pos, if found already), and the
    start of a header line that data leaves unfinished (None if it leaves none). Every '>' starts a header; one
    that does not start a line is flagged on the stretch before it."""
    items = []
    while pos < len(data):
        gt = data.find(b">", pos) if first is None else first
        first = None
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


def _many(data: bytes, pos: int, prev: int, first: int):
    """data[pos:] (prev: the byte before data, first: its first '>' from pos or -1) with array operations
    (io.fasta_block), for a range of many records, as scan gives it: (the Items before its first header, (its
    finished header lines, the codes after each one after another, their counts), the start of a header line
    data leaves unfinished or None). None where that does not pay (fewer than MANY headers) or where a check
    would fail (a '>' inside a sequence line, a byte that is no IUPAC letter after the first header, a CR that
    ends no line): _scan's Items then give the records or the error."""
    if first < 0 or data.count(b">", first) < MANY or (data[first - 1] if first else prev) != 10 \
            or A.lone_cr(data):  # (the table drops every CR: _scan's Items refuse a lone one)
        return None
    block = fasta_block.scan(data, first, _TABLE)
    if block is None:
        return None
    starts, ends = block.starts, block.ends
    lead = [_codes_item(data[pos:first], False)] if first > pos else []
    headers = [data[a + 1:b] for a, b in zip(starts.tolist(), ends.tolist())]
    rest = data[starts[-1] + 1:] if len(ends) < len(starts) else None
    return lead, (headers, block.codes, block.counts), rest


def stream(path: str, name: str, where: list):
    """The Items of a FASTA file (or stdin) read here in blocks, in order. where[0]: the record being read
    (for read errors). Close the generator when stopping early."""
    header, prev = None, 10
    with open_text(path) as fh:
        first = True
        while True:
            data = read(fh, BLOCK, name, where[0])
            if not data:
                break
            if first:  # (a file was sniffed already; stdin is checked here)
                kind = fastx_strict.unsupported_compression(data)
                if kind:
                    raise fastx_strict.compression_error(name, kind)
                first = False
            pos = 0
            if header is not None:  # a header line goes on
                nl = data.find(b"\n")
                if nl < 0:
                    header += data
                    prev = data[-1]
                    continue
                yield Item(header + data[:nl])
                header, pos = None, nl + 1
            found, many, header = scan(data, pos, prev)
            if many is not None and many[0]:
                found.append(Many(*many))
            prev = data[-1]
            yield from found
    if header is not None:  # the file ends inside a header line
        yield Item(header)
    elif prev == 13:  # the file ends in a CR (io's readers refuse it too)
        yield LONE_CR


def read(fh, size: int, name: str, record: int) -> bytes:
    """fh.read(size); damaged (gzip) input is a RecordError naming the record being read (a block is read at
    once: the damage is in it or in a later record of the block)."""
    try:
        return fh.read(size)
    except fastx_fast.READ_ERRORS as e:
        raise RecordError(name, record, f"corrupt or truncated input in this record or a later one ({e})") from None


def open_text(path: str):
    """path's bytes, inflated when gzip; stdin or a pipe is opened once and looked at as it comes (its
    bytes would be gone if opened twice)."""
    if fastx.streamed(path):
        import sys

        raw = os.fdopen(os.dup(sys.stdin.fileno()), "rb") if path == fastx.STDIN else open(path, "rb")
        return fastx_strict.open_stream(raw, fastx.display_name(path))
    return fastx_fast.open_gz(path) if fastx.gzipped(path) else open(path, "rb", buffering=0)
