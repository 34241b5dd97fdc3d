"""The searched text, streamed: FASTA (plain, gzip or bgzip) read in blocks and cut into chunks of at most
`chunk` bases, each a list of pieces of records. A piece repeats the `context` bases before it in its
record, so that every hit ending in the piece is found there whole; no hit spans two records. Memory is
bounded by the chunk size, whatever the size of the text or of its records."""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import numpy as np

from ..errors import InputError
from ..io import fastx, fastx_fast
from . import alphabet as A

BLOCK = 1 << 24  # bytes read at a time
ALIGN = 16  # pieces start at multiples of 16 in a chunk's buffer (the kernel's loads)


@dataclass
class Chunk:
    """codes: the pieces one after another, each at a multiple of ALIGN, PAD bytes between them.
    Per piece: buf (offset of its first byte, context included), record (index), rec_start (record
    coordinate of that first byte), context (bases before the reported part), length (reported bases),
    last (the record ends with this piece)."""

    codes: np.ndarray
    buf: np.ndarray
    record: np.ndarray
    rec_start: np.ndarray
    context: np.ndarray
    length: np.ndarray
    last: np.ndarray

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
    """Iterate to get Chunks; `records` fills in as the file is read."""

    def __init__(self, path: str, chunk: int, context: int, gap: int = ALIGN):
        self.path, self.chunk, self.context = path, max(chunk, 4 * ALIGN), context
        self.gap = -(-max(gap, ALIGN) // ALIGN) * ALIGN  # PAD bytes before each piece
        self.records = Records()
        self._free: list = []  # chunk buffers given back (release), reused: fresh pages cost more than copies

    def release(self, chunk: Chunk) -> None:
        """The caller is done with chunk: its buffer may hold a later chunk (call from any thread)."""
        self._free.append(chunk.codes.base if chunk.codes.base is not None else chunk.codes)

    def _buffer(self, size: int) -> np.ndarray:
        while self._free:
            b = self._free.pop()
            if len(b) >= size:
                return b[:size]
        return np.empty(max(size, self.chunk + 4 * self.gap + 4 * self.context), dtype=np.uint8)[:size]

    @staticmethod
    def check(path: str) -> None:
        """An InputError unless path can be read and starts as FASTA (stdin: checked as it is read)."""
        if path == fastx.STDIN:
            return
        fastx.sniff(path)
        with _open(path) as fh:
            head = _read(fh, 1 << 16, path, 1).lstrip()
        if head[:1] != b">":
            raise InputError(f"{fastx.display_name(path)}: the text must be FASTA (records start with '>')")

    def __iter__(self):
        name = fastx.display_name(self.path)
        parts: list = []  # (record, rec_start, [code blocks: context first], length of the new codes, last)
        size = 0
        tail = b""  # the record's last `context` codes before the pending piece
        blocks: list = []  # the current record's codes not yet cut into a piece
        held = 0  # their length
        rec, rec_pos = -1, 0  # record index, record coordinate of blocks' first base
        header = None  # bytes of a header line being read, or None inside sequence

        def cut(new: list, n: int, last: bool):
            nonlocal tail, rec_pos, size
            parts.append((rec, rec_pos - len(tail), [tail] + new, n, last))
            size += len(tail) + n + self.gap  # (the gaps count: many short records make many)
            keep, want = [], self.context
            for blk in reversed([tail] + new):  # the context of the next piece: the last bases so far
                if want <= 0:
                    break
                keep.append(blk[max(0, len(blk) - want):])
                want -= len(keep[-1])
            tail = b"".join(reversed(keep))
            rec_pos += n

        def emit():
            nonlocal parts, size
            out, parts, size = self._chunk(parts), [], 0
            return out

        seen: set = set()  # record names (SAM needs them unique)
        last_byte = 10  # the previous block's last byte
        with _open(self.path) as fh:
            while True:
                data = _read(fh, BLOCK, name, max(rec, 0) + 1)
                if not data:
                    break
                pos = 0
                before, last_byte = last_byte, data[-1]
                while pos < len(data):
                    if header is not None:
                        nl = data.find(b"\n", pos)
                        if nl < 0:
                            header += data[pos:]
                            break
                        header += data[pos:nl]
                        self._named(name, rec, header, seen)
                        header, pos = None, nl + 1
                        continue
                    gt = data.find(b">", pos)
                    end = len(data) if gt < 0 else gt
                    if rec < 0:
                        if data[pos:end].strip():
                            raise InputError(f"{name}: text before the first '>' header")
                        if gt < 0:
                            break
                        rec, header, pos = 0, b"", gt + 1
                        continue
                    if (data[gt - 1] if gt > 0 else before) != 10 and gt >= 0:
                        raise InputError(f"{name}: record {rec + 1}: '>' inside a sequence line")
                    raw = data[pos:end] if pos or end < len(data) else data
                    codes = A.to_codes(raw)
                    if A.BAD in codes:
                        self._bad(name, rec, rec_pos + held, raw, codes)
                    if codes:
                        blocks.append(codes)
                        held += len(codes)
                    self.records.lengths[rec] += len(codes)
                    while held >= self.chunk:  # a long record: cut a piece of `chunk` bases
                        take, n = [], 0
                        while blocks and n + len(blocks[0]) <= self.chunk:
                            n += len(blocks[0])
                            take.append(blocks.pop(0))
                        if n < self.chunk:
                            first = blocks[0]
                            take.append(first[:self.chunk - n])
                            blocks[0] = first[self.chunk - n:]
                        held -= self.chunk
                        cut(take, self.chunk, False)
                        if size >= self.chunk:
                            yield emit()
                    if gt < 0:
                        break
                    cut(blocks, held, True)  # the record ends: its last piece
                    if size >= self.chunk:
                        yield emit()
                    rec += 1
                    rec_pos, tail, blocks, held, header, pos = 0, b"", [], 0, b"", gt + 1
            if header is not None and rec >= 0:  # the file ends inside a header line: an empty record
                self._named(name, rec, header, seen)
            if rec < 0:
                raise InputError(f"{name}: no FASTA records (empty input)")
            if rec >= 0:
                cut(blocks, held, True)
            if parts:
                yield emit()

    def _chunk(self, parts: list) -> Chunk:
        n = len(parts)
        buf = np.zeros(n, np.int64)
        at = 0
        for i, (_, _, blks, _, _) in enumerate(parts):
            at += self.gap
            buf[i] = at
            at += -(-sum(len(b) for b in blks) // ALIGN) * ALIGN
        codes = self._buffer(at + self.gap)
        prev = 0
        for i, (_, _, blks, _, _) in enumerate(parts):
            a = int(buf[i])
            codes[prev:a] = A.PAD
            for blk in blks:
                codes[a:a + len(blk)] = np.frombuffer(blk, np.uint8)
                a += len(blk)
            prev = a
        codes[prev:] = A.PAD
        return Chunk(codes, buf, np.array([p[0] for p in parts], np.int64), np.array([p[1] for p in parts], np.int64),
                     np.array([len(p[2][0]) for p in parts], np.int64), np.array([p[3] for p in parts], np.int64),
                     np.array([p[4] for p in parts], bool))

    def _named(self, name: str, rec: int, header: bytes, seen: set) -> None:
        """A header line read: the record's name (its first word; bytes that are not UTF-8 kept as they
        are), which must be new."""
        title = header.decode("utf-8", "surrogateescape").strip()
        if not title:
            raise InputError(f"{name}: record {rec + 1}: empty record name")
        nm = title.split()[0]
        if nm in seen:
            raise InputError(f"{name}: record {rec + 1}: record name {nm!r} appears twice (names must be unique)")
        seen.add(nm)
        self.records.names.append(nm)
        self.records.lengths.append(0)

    @staticmethod
    def _bad(name: str, rec: int, at: int, raw: bytes, codes: bytes) -> None:
        i = codes.index(A.BAD)
        ch = raw.translate(None, b"\r\n")[i]
        shown = repr(chr(ch)) if 32 < ch < 127 else f"byte 0x{ch:02x}"
        raise InputError(f"{name}: record {rec + 1}: {shown} at base {at + i + 1} is not a DNA/IUPAC letter")


def _read(fh, size: int, name: str, record: int) -> bytes:
    """fh.read(size); damaged (gzip) input is an InputError naming the record being read."""
    try:
        return fh.read(size)
    except fastx_fast._READ_ERRORS as e:
        raise InputError(f"{name}: record {record}: corrupt or truncated input ({e})") from None


def _open(path: str):
    if path == fastx.STDIN:
        import sys

        return os.fdopen(os.dup(sys.stdin.fileno()), "rb")
    with open(path, "rb") as fh:
        magic = fh.read(2)
    return fastx_fast._open_gz(path) if magic == b"\x1f\x8b" else open(path, "rb", buffering=0)
