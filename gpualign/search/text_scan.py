"""The searched FASTA text as Items in file order (header lines, stretches of sequence codes): a stream read
here in blocks (gzip, bgzip, stdin, or without worker processes), for text.TextReader to cut into chunks;
_scan also serves the workers that read a plain file in ranges (text_ranges.py). A header line belongs to
the range where its '>' is; the range it runs into skips it."""

from __future__ import annotations

import os
from typing import NamedTuple

from ..errors import InputError
from ..io import fastx, fastx_fast
from . import alphabet as A

BLOCK = 1 << 24  # bytes read at a time (a stream)


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


def stream(path: str, name: str, where: list):
    """The Items of a FASTA file (or stdin) read here in blocks, in order. where[0]: the record being read
    (for read errors). Close the generator when stopping early."""
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
