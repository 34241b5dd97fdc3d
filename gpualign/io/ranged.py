"""A file's bytes read by offset, as os.pread reads a plain file, whether it is plain or BGZF (bgzip): for BGZF
the members covering a read are inflated by ISA-L (each member's CRC-32 and size checked), found through the
members' index (bgzf.members: one walk over their headers). Both readers of files in ranges take their bytes
through it (io/fastx_parts.py: whole records; search/text_ranges.py: a text's lines), on all their worker
processes at once, so a bgzip file is inflated on every core; record_cuts cuts io's parts at records.
"""

from __future__ import annotations

import mmap
import os

import numpy as np

from . import bgzf


CUT_READ = 1 << 16  # record_cuts' first read from a cut (doubled while no record starts in it)
CUT_READ_MOST = 1 << 20
CUT_SCAN = 1 << 21  # ... and the bytes it looks at from each multiple of its part size
PROBE = 1 << 20  # Bgzf.short_lines: the inflated bytes looked at
LONGEST_LINE = 1 << 16  # ... and the longest line taken as short


class Corrupt(OSError):
    """BGZF members that do not inflate (damaged data, a wrong CRC-32 or size)."""


class Plain:
    """A plain file: pread, and rfind over a memory map (made when first needed)."""

    def __init__(self, path: str):
        self._fh = open(path, "rb", buffering=0)
        self.size = os.fstat(self._fh.fileno()).st_size
        self._mm = None

    def pread(self, n: int, offset: int) -> bytes:
        """n bytes from offset (fewer at the file's end). One os.pread returns at most about 2 GiB on Linux: the
        rest is read on."""
        fd, parts, got = self._fh.fileno(), [], 0
        while got < n:
            piece = os.pread(fd, n - got, offset + got)
            if not piece:
                break
            parts.append(piece)
            got += len(piece)
        return parts[0] if len(parts) == 1 else b"".join(parts)

    def rfind(self, byte: bytes, lo: int, hi: int) -> int:
        """The offset of the last `byte` in [lo, hi), or -1."""
        if self._mm is None and self.size:
            self._mm = mmap.mmap(self._fh.fileno(), 0, access=mmap.ACCESS_READ)
        return self._mm.rfind(byte, lo, hi) if self._mm is not None else -1

    def short_lines(self) -> bool:
        """Bgzf.short_lines' question: a plain file's line starts are found at a memory map's pace, long or not."""
        return True

    def close(self) -> None:
        if self._mm is not None:
            self._mm.close()
        self._fh.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class Bgzf(Plain):
    """A BGZF file's inflated bytes: size is theirs, pread and rfind read them (the compressed bytes through
    Plain's)."""

    def __init__(self, path: str, index: tuple):
        super().__init__(path)
        self._coff, self._uoff = index
        self.size = int(self._uoff[-1])

    def _members(self, lo: int, hi: int) -> tuple[int, int]:
        """The members i..j-1 that hold inflated bytes [lo, hi) (lo < hi)."""
        return (int(np.searchsorted(self._uoff, lo, "right")) - 1,
                int(np.searchsorted(self._uoff, hi, "left")))

    def _inflate(self, i: int, j: int) -> bytes:
        from isal import igzip, isal_zlib

        a, b = int(self._coff[i]), int(self._coff[j])
        try:
            return igzip.decompress(super().pread(b - a, a))
        except (OSError, EOFError, isal_zlib.error) as e:
            raise Corrupt(f"bgzip data that does not inflate between bytes {a} and {b} of the file: {e}") from None

    def pread(self, n: int, offset: int) -> bytes:
        end = min(offset + n, self.size)
        if offset >= end:
            return b""
        i, j = self._members(offset, end)
        base = int(self._uoff[i])
        return self._inflate(i, j)[offset - base:end - base]

    def short_lines(self) -> bool:
        """Whether the first PROBE inflated bytes hold no line longer than LONGEST_LINE (the line cut at the probe's
        end counted too): a text wrapped as FASTA files mostly are. rfind inflates a long line's members one
        after another, so search reads a text of long lines (an unwrapped sequence) as one stream instead."""
        probe, longest = PROBE, LONGEST_LINE
        data = self.pread(probe, 0)
        ends = np.flatnonzero(np.frombuffer(data, np.uint8) == 10)
        if len(data) < probe and len(ends) and ends[-1] == len(data) - 1:
            edges = np.concatenate([[-1], ends])
        else:
            edges = np.concatenate([[-1], ends, [len(data)]])
        return int(np.diff(edges).max(initial=0)) <= longest + 1

    def rfind(self, byte: bytes, lo: int, hi: int) -> int:
        """The offset of the last `byte` in [lo, hi), or -1: member by member from hi back."""
        hi = min(hi, self.size)
        while hi > lo:
            i = self._members(hi - 1, hi)[0]
            base = int(self._uoff[i])
            at = self._inflate(i, i + 1).rfind(byte, max(lo, base) - base, hi - base)
            if at >= 0:
                return base + at
            hi = base
        return -1


def open_at(path: str, index: tuple | None = None):
    """path's bytes by offset: Bgzf when it is BGZF from its first byte to its last (index: its bgzf.members, if
    known), else Plain; a ValueError for another gzip file (its bytes come only in order)."""
    index = index if index is not None else bgzf.members(path)
    if index is not None:
        return Bgzf(path, index)
    with open(path, "rb") as fh:
        if fh.read(2) == b"\x1f\x8b":
            raise ValueError(f"{path}: gzip that is not BGZF throughout: no reads by offset")
    return Plain(path)


def record_cuts(src, every: int, fastq: bool = False) -> list:
    """Offsets splitting src's bytes (Plain or Bgzf) into parts of at least `every` bytes, each part after the
    first starting at a record's header line (FASTA: a line starting '>'; fastq: a line starting '@' whose line
    two further on starts '+', as a 4-line record's header does and a quality line starting '@' does not), with
    0 and src.size at the ends. From each multiple of `every` past the cut before, the first header found by reads
    that start within the next CUT_SCAN bytes (each up to CUT_READ_MOST) is the next cut; where none is found (a
    record longer than that), the search goes on `every` bytes further: with parts much larger than CUT_SCAN
    (RANGE_BYTES), the bytes read (inflated) here stay a small part of the file however long its records are.
    A FASTQ cut is a guess where records span more lines than four, and such records may give no cut at all
    (one part for the rest of the file): io/fastx_parts.py checks both."""
    mark = b"\n@" if fastq else b"\n>"
    cuts, size = [0], src.size
    want = every
    while want < size:
        at, n, found = want - 1, CUT_READ, -1
        while found < 0 and at < min(size - 1, want - 1 + CUT_SCAN):
            block = src.pread(n, at)
            ends = at + len(block) >= size
            i, step = block.find(mark), max(1, len(block) - 1)  # (a mark across the block's end: in the next)
            while i >= 0:
                head = fastq_head(block, i + 1, ends) if fastq else True
                if head is None and i > 0:  # (its next lines go on past the block: read again from it)
                    step = i
                    break
                if head:
                    found = at + i + 1
                    break
                i = block.find(mark, i + 1)
            at += step
            n = min(2 * n, CUT_READ_MOST)
        if found < 0:
            want += every
            continue
        cuts.append(found)
        want = found + every
    return cuts + [size]


def fastq_head(block: bytes, j: int, ends: bool) -> bool | None:
    """Whether the line at block[j] (an '@') has a line starting '+' two lines further on; None where block
    ends first (and the file does not: ends false)."""
    nl = block.find(b"\n", j)
    if nl >= 0:
        nl = block.find(b"\n", nl + 1)
    if nl >= 0 and nl + 1 < len(block):
        return block[nl + 1] == 43
    return False if ends else None


_cached: dict = {}  # per process: (path, its inode, size and time) -> its reader, the latest only


def cached(path: str):
    """open_at(path), made once a run in a worker process (a bgzip file's index: one walk) and kept for its next
    ranges; a file changed or another file closes the one before."""
    st = os.stat(path)
    key = (path, st.st_ino, st.st_size, st.st_mtime_ns)
    if key not in _cached:
        for old in _cached.values():
            old.close()
        _cached.clear()
        _cached[key] = open_at(path)
    return _cached[key]
