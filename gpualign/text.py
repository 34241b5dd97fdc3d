"""Text lines in bulk: columns of strings and integers joined into one buffer with numpy, no Python work
per line. A field is the same bytes on every line (``bytes``), a string column (``Strings``), an
integer column (``numpy`` integer array, written in decimal), or a (``bytes`` prefix, column) pair such
as (b"NM:i:", nm)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .records import Names, offsets_from_lengths, segment_index

_POW10 = 10 ** np.arange(1, 20, dtype=np.uint64)


@dataclass
class Strings:
    """Row i's text is buf[start[i] : start[i] + length[i]]."""

    buf: np.ndarray  # uint8
    start: np.ndarray  # int64
    length: np.ndarray  # int64

    @classmethod
    def of(cls, items: list) -> "Strings":
        """From Python strings holding no newline (names, CIGARs), or the reader's Names."""
        if isinstance(items, Names):
            return cls(items.buf, items.start, items.length)
        if not items:
            z = np.zeros(0, np.int64)
            return cls(np.zeros(0, np.uint8), z, z)
        buf = np.frombuffer("\n".join(items).encode(), dtype=np.uint8)
        ends = np.flatnonzero(buf == 10)
        if len(ends) != len(items) - 1:
            raise ValueError("a string holds a newline")
        start = np.concatenate([[0], ends + 1]).astype(np.int64)
        end = np.concatenate([ends, [len(buf)]]).astype(np.int64)
        # separators dropped: rows one after another (join_lines copies such columns in one step)
        return cls(np.delete(buf, ends), start - np.arange(len(items)), end - start)

    @classmethod
    def of_ints(cls, values: np.ndarray) -> "Strings":
        """Integers in decimal."""
        v = np.asarray(values, dtype=np.int64)
        width = digits(v) + (v < 0)
        start = offsets_from_lengths(width)
        buf = np.empty(int(width.sum()), dtype=np.uint8)
        write_ints(buf, start, v, width)
        return cls(buf, start, width)

    @classmethod
    def ints_or(cls, values: np.ndarray, mask: np.ndarray, text: bytes):
        """An integer column of join_lines (formatted where the lines are joined: on the device by
        text_device) when mask holds no row; else Strings of the integers, text in the rows mask holds."""
        if not mask.any():
            return np.asarray(values, dtype=np.int64)
        return cls.of_ints(values).where(mask, text)

    def take(self, rows: np.ndarray) -> "Strings":
        return Strings(self.buf, self.start[rows], self.length[rows])

    @classmethod
    def lines(cls, data: bytes) -> "Strings":
        """The lines of newline-ended text (join_lines' output), newlines left out."""
        buf = np.frombuffer(data, dtype=np.uint8)
        ends = np.flatnonzero(buf == 10)
        start = np.concatenate([[0], ends[:-1] + 1]).astype(np.int64) if len(ends) else np.zeros(0, np.int64)
        return cls(buf, start, ends - start)

    def put(self, rows: np.ndarray, other: "Strings") -> "Strings":
        """The same rows, rows[j] replaced by other's row j."""
        buf = np.concatenate([self.buf, other.buf])
        start, length = self.start.copy(), self.length.copy()
        start[rows], length[rows] = other.start + len(self.buf), other.length
        return Strings(buf, start, length)

    def where(self, mask: np.ndarray, text: bytes) -> "Strings":
        """The same rows, those where mask is True replaced by text."""
        if not mask.any():
            return self
        buf = np.concatenate([self.buf, np.frombuffer(text, dtype=np.uint8)])
        start, length = self.start.copy(), self.length.copy()
        start[mask], length[mask] = len(self.buf), len(text)
        return Strings(buf, start, length)


def magnitude(v: np.ndarray) -> np.ndarray:
    """|v| as unsigned integers (the most negative int64's too)."""
    return v if v.dtype.kind == "u" else np.abs(v.astype(np.int64)).view(np.uint64)


def digits(v: np.ndarray) -> np.ndarray:
    """Decimal digits of |v| (at least 1)."""
    a = magnitude(v)
    n = np.ones(len(a), dtype=np.int64)
    top = int(a.max()) if len(a) else 0
    for p in _POW10[_POW10 <= top]:  # one pass per digit of the largest value
        n += a >= p
    return n


def write_ints(out: np.ndarray, pos: np.ndarray, v: np.ndarray, width: np.ndarray) -> None:
    """Write v in decimal at out[pos : pos + width] (width from digits() plus one for a minus sign)."""
    if v.dtype.kind != "u":
        out[pos[v < 0]] = ord("-")
    a = magnitude(v)
    if a.dtype.itemsize > 4 and len(a) and a.max() < 1 << 32:
        a = a.astype(np.uint32)  # 32-bit division is the faster
    at = pos + width - 1
    while len(a):  # right to left, one digit per pass, for the numbers that still have one
        out[at] = 48 + a % 10
        a = a // 10
        more = a > 0
        if not more.all():
            at, a = at[more], a[more]
        at = at - 1


def read_ints(buf: np.ndarray, a: np.ndarray, n: np.ndarray) -> np.ndarray | None:
    """The numbers written in decimal at buf[a : a + n] (uint8 text; 1 <= n <= 18, so int64 holds them), or None
    where a byte there is not an ASCII digit."""
    v = np.zeros(len(a), dtype=np.int64)
    for j in range(int(n.max()) if len(n) else 0):  # left to right, one digit per pass
        m = n > j
        d = buf[np.where(m, a + j, a)].astype(np.int64) - 48
        if ((d < 0) | (d > 9)).any():
            return None
        v = np.where(m, v * 10 + d, v)
    return v


def fields_of(fields: list) -> list:
    """Each field as (prefix bytes, column: Strings, an integer array or None)."""
    return [(f, None) if isinstance(f, bytes) else (f if isinstance(f, tuple) else (b"", f)) for f in fields]


def join_lines(fields: list, n: int, sep: bytes = b"\t", drop_empty_last: bool = False) -> bytes:
    """n lines, each the fields joined by sep and ended by a newline; drop_empty_last: where the last field
    is an empty string, the line ends without it, its prefix and the separator before it (PAF's cg:Z of an
    empty CIGAR: a tag needs a value)."""
    parts = []  # per field: (the separator before it and its prefix, column or None, column widths)
    for k, (prefix, col) in enumerate(fields_of(fields)):
        if col is None:
            w = np.zeros(n, np.int64)
        elif isinstance(col, Strings):
            w = col.length.astype(np.int64)
        else:
            col = np.asarray(col, dtype=np.int64)
            w = digits(col) + (col < 0)
        parts.append(((sep if k else b"") + prefix, col, w))
    line = np.full(n, 1 + sum(len(lead) for lead, _, _ in parts), np.int64)
    for _, _, w in parts:
        line += w
    kept = None  # the rows that keep their last field's lead (all: None)
    if drop_empty_last and parts and isinstance(parts[-1][1], Strings) and not parts[-1][2].all():
        kept = parts[-1][2] > 0
        line -= np.where(kept, 0, len(parts[-1][0]))
    out = np.empty(int(line.sum()), dtype=np.uint8)
    pos = offsets_from_lengths(line)
    for k, (lead, col, w) in enumerate(parts):
        if kept is not None and k == len(parts) - 1:
            at = pos[kept]
            for j, ch in enumerate(lead):
                out[at + j] = ch
            pos[kept] += len(lead)
        else:
            for j, ch in enumerate(lead):
                out[pos + j] = ch
            pos += len(lead)
        if isinstance(col, Strings):
            _copy_rows(out, pos, col, w)
        elif col is not None:
            write_ints(out, pos, col, w)
        pos += w
    out[pos] = ord("\n")
    return out.tobytes()


def _copy_rows(out: np.ndarray, pos: np.ndarray, col: Strings, w: np.ndarray) -> None:
    """out[pos[i] : pos[i] + w[i]] = row i of col, for rows that end apart (one line each). Rows stored
    one after another (CIGAR text, names) are copied from one slice of col.buf: through an index of the
    places they go, or, when they fill most of the output, a mask of them (no index array per byte)."""
    n = len(w)
    if n == 0 or not w.any():
        return
    total = int(w.sum())
    together = np.array_equal(col.start[1:], col.start[:-1] + w[:-1])
    if not together:
        out[segment_index(pos, w)] = col.buf[segment_index(col.start, w)]
        return
    # the masked copy costs a few passes over the whole output, the indexed one an 8-byte index per byte
    # copied: about even when the rows fill half the output
    if 2 * total < len(out):
        a = int(col.start[0])
        out[segment_index(pos, w)] = col.buf[a:a + total]
        return
    marks = np.zeros(len(out) + 1, np.int8)  # +1 where a row starts, -1 where it ends: cumsum = inside
    some = w > 0
    marks[pos[some]] = 1
    marks[(pos + w)[some]] = -1
    inside = np.cumsum(marks[:-1], dtype=np.int8).view(bool)
    a = int(col.start[0])
    out[inside] = col.buf[a:a + total]
