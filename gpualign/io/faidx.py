"""Random access to an indexed FASTA (the .fai is built by pysam when missing).

Plain (uncompressed) FASTA is read through a memory map and its .fai: a slice is one copy of the
lines it spans, without their line ends. This is much faster than `pysam.FastaFile.fetch` per
candidate. That call releases the interpreter lock, so each fetch waits to take it back from the
aligner and writer threads. bgzip-compressed FASTA goes through pysam.
"""

from __future__ import annotations

import mmap
import os

from ..errors import InputError


class IndexedFasta:
    """Names, lengths and slices (bytes, as stored) of an indexed FASTA."""

    def __init__(self, path: str):
        import pysam

        try:
            if _stale(path):  # an index older than its FASTA points at the wrong bytes: rebuild it
                pysam.faidx(path)
            self._fa = pysam.FastaFile(path)  # builds the .fai when missing; refuses FASTQ and plain gzip
        except (OSError, ValueError, pysam.SamtoolsError) as e:
            raise InputError(f"{path}: cannot index for random access ({str(e).strip()})") from None
        self.path = path
        self.lengths = dict(zip(self._fa.references, self._fa.lengths))
        self._index = self._map = None
        with open(path, "rb") as fh:
            if fh.read(2) != b"\x1f\x8b" and any(self.lengths.values()):  # plain, not empty: mapped
                self._index = _read_fai(self._fa.filename.decode() + ".fai")
                if self._index is not None:
                    self._map = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)

    def __contains__(self, name: str) -> bool:
        return name in self.lengths

    def fetch(self, name: str, start: int = 0, end: int | None = None) -> bytes:
        """Bases [start, end) of record name (end None: to the record's end), clamped to the record."""
        ln = self.lengths[name]
        end = ln if end is None else min(end, ln)
        start = max(0, min(start, end))
        if self._map is None:
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
