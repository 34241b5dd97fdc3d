"""Random access to an indexed FASTA (the .fai is built when missing: build_fai, else pysam).

Plain (uncompressed) FASTA is read through a memory map and its .fai: a slice is one copy of the
lines it spans, without their line ends. This is much faster than `pysam.FastaFile.fetch` per
candidate. That call releases the interpreter lock, so each fetch waits to take it back from the
aligner and writer threads. bgzip-compressed FASTA goes through pysam.
"""

from __future__ import annotations

import mmap
import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from ..errors import InputError
from .fastx import check_all, gzipped

SCAN_CHUNK = 1 << 24  # bytes per thread task when looking for line ends (build_fai)
MAX_LINES = 1 << 24  # files with more lines are left to htslib (build_fai keeps ~32 bytes per line)


def _plain_gzip(path: str) -> bool:
    """Whether path is gzip but not BGZF (whose first block carries the extra field BC)."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(14)
    except OSError:
        return False
    return head[:2] == b"\x1f\x8b" and not (len(head) == 14 and head[3] & 4 and head[12:14] == b"BC")


class IndexedFasta:
    """Names, lengths and slices (bytes, as stored) of an indexed FASTA."""

    def __init__(self, path: str):
        import pysam

        if _plain_gzip(path):  # said here: htslib would print `[E::fai_build_core] ...` lines first
            raise InputError(f"{path}: cannot index for random access (compressed with gzip, not bgzip)")
        try:
            # a missing index is built here (build_fai, several times faster than htslib's faidx); an
            # index older than its FASTA points at the wrong bytes: rebuilt
            if (not os.path.exists(path + ".fai") or _stale(path)) and not build_fai(path):
                check_all(path)  # htslib's indexer is lax (FASTQ '+' lines, mixed records): the reader's rules
                pysam.set_verbosity(0)  # htslib's own messages: the caller says what is wrong, in one line
                pysam.faidx(path)
            self._fa = pysam.FastaFile(path)  # refuses plain gzip
        except (OSError, ValueError, pysam.SamtoolsError) as e:
            raise InputError(f"{path}: cannot index for random access ({str(e).strip()})") from None
        self.path = path
        self.lengths = dict(zip(self._fa.references, self._fa.lengths))
        self._index = self._map = None
        # plain and not empty: mapped, at the first fetch (a process that only checks names and lengths does
        # not read the .fai into a dict)
        self._plain = not gzipped(path) and any(self.lengths.values())

    def _mapped(self) -> bool:
        """Whether slices come from the memory map (opened now if not yet)."""
        if self._plain:
            self._plain = False
            self._index = _read_fai(self._fa.filename.decode() + ".fai")
            if self._index is not None:
                with open(self.path, "rb") as fh:
                    self._map = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
        return self._map is not None

    def __contains__(self, name: str) -> bool:
        return name in self.lengths

    def fetch(self, name: str, start: int = 0, end: int | None = None) -> bytes:
        """Bases [start, end) of record name (end None: to the record's end), clamped to the record."""
        ln = self.lengths[name]
        end = ln if end is None else min(end, ln)
        start = max(0, min(start, end))
        if self._map is None and not self._mapped():
            return self._fa.fetch(name, start, end).encode("ascii")
        offset, per_line, width = self._index[name]
        if start == end:
            return b""
        a = offset + (start // per_line) * width + start % per_line
        b = offset + ((end - 1) // per_line) * width + (end - 1) % per_line + 1
        raw = self._map[a:b]
        if width > per_line and b - a > end - start:  # the span crosses line ends ("\n" or "\r\n")
            raw = raw.replace(b"\n", b"")
            if width - per_line == 2:
                raw = raw.replace(b"\r", b"")
            if len(raw) != end - start:
                raise InputError(f"{self.path}: record {name!r} does not match its .fai index (rebuild it)")
        return raw

    def close(self) -> None:
        if self._map is not None:
            self._map.close()
        self._fa.close()


def _stale(path: str) -> bool:
    """Whether path's .fai exists and is older than path."""
    try:
        return os.path.getmtime(path + ".fai") < os.path.getmtime(path)
    except OSError:
        return False


def _read_fai(path: str) -> dict | None:
    """name -> (byte offset, bases per line, bytes per line) from a FASTA .fai; None when it is not one
    (a FASTQ index has six columns) or cannot be read."""
    index = {}
    try:
        with open(path) as fh:
            for line in fh:
                f = line.rstrip("\n").split("\t")
                if len(f) != 5:
                    return None
                ln, offset, per_line, width = (int(v) for v in f[1:])
                if ln and (per_line <= 0 or width < per_line):
                    return None
                index[f[0]] = (offset, max(per_line, 1), max(width, 1))
    except (OSError, ValueError):
        return None
    return index


def build_fai(path: str) -> bool:
    """Write path's .fai (samtools' five columns) for a plain FASTA whose records all have consistent
    line lengths, from a memory map: line ends found by threads over the bytes, then every record's
    layout checked against them at once. Returns False, writing nothing, for anything else (gzip,
    FASTQ, empty records, empty or duplicate names, a short line before the last, CRLF, over MAX_LINES
    lines, an unwritable directory): htslib then decides, with its own messages."""
    try:
        with open(path, "rb") as fh:
            if os.fstat(fh.fileno()).st_size == 0 or fh.read(1) != b">":
                return False
            mm = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
    except (OSError, ValueError):
        return False
    try:
        rows = _fai_rows(mm)
        if rows is None:
            return False
        tmp = f"{path}.fai.tmp{os.getpid()}"
        try:
            with open(tmp, "w") as out:
                out.writelines(f"{n}\t{ln}\t{off}\t{lb}\t{lw}\n" for n, ln, off, lb, lw in rows)
            os.replace(tmp, path + ".fai")
        except OSError:
            if os.path.exists(tmp):
                os.unlink(tmp)
            return False
        return True
    finally:
        try:
            mm.close()
        except BufferError:  # an error above still holds a view of the map: left to the collector
            pass


def _fai_rows(mm: mmap.mmap) -> list | None:
    """(name, length, offset, bases per line, bytes per line) per record of the FASTA in mm, or None when
    a record is not regular or the file has too many lines for this (build_fai). Vectorised over records:
    the line ends and headers are found by threads, then each record's layout is checked at once."""
    data = np.frombuffer(mm, dtype=np.uint8)
    size = len(data)

    def line_ends(a: int) -> np.ndarray:  # in [a, a + SCAN_CHUNK)
        return np.flatnonzero(data[a:a + SCAN_CHUNK] == ord("\n")) + a

    with ThreadPoolExecutor(min(16, os.cpu_count() or 1)) as pool:
        nl = np.concatenate(list(pool.map(line_ends, range(0, size, SCAN_CHUNK))))
    after = nl[nl + 1 < size] + 1
    hd = np.concatenate([[0], after[data[after] == ord(">")]])  # headers: '>' starting a line (the file's first)
    if len(nl) > MAX_LINES or len(hd) == 0 or hd[0] != 0:
        return None
    k = np.searchsorted(nl, hd)  # each header's line end
    if k[-1] >= len(nl):
        return None  # the last header ends the file
    a = nl[k] + 1  # first sequence byte
    end = np.append(hd[1:], size)
    if (a >= end).any():
        return None  # a record without sequence
    cnt = np.searchsorted(nl, end) - k - 1  # line ends in the sequence
    width = np.where(cnt > 0, nl[np.minimum(k + 1, len(nl) - 1)] + 1, end + 1) - a  # first line, with its end
    if (width < 2).any() or (data[a + width - 2] == 13).any():
        return None  # an empty first line, or CRLF
    span = end - a
    full, rest = np.divmod(span, width)
    if (cnt != full + ((rest > 0) & (data[end - 1] == ord("\n")))).any():
        return None
    # regular: the line ends are those of the full lines (and maybe one closing the last line), and as many
    seq_nl = np.delete(nl, k)
    rec = np.repeat(np.arange(len(hd)), cnt)
    j = seq_nl - a[rec] + 1
    if not ((j % width[rec] == 0) & (j // width[rec] <= full[rec]) | (seq_nl == end[rec] - 1)).all():
        return None
    rows, seen = [], set()
    for h, s0, ln, w in zip(hd.tolist(), a.tolist(), (span - cnt).tolist(), width.tolist()):
        try:
            name = (mm[h + 1:s0 - 1].split(None, 1) or [b""])[0].decode("ascii")
        except UnicodeDecodeError:
            return None
        if not name or name in seen:
            return None
        seen.add(name)
        rows.append((name, ln, s0, w - 1, w))
    return rows
