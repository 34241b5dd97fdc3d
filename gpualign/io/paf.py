"""PAF candidates (minimap2's 12 columns + tags) and the sequences they point into.

Targets are read by random access (io.faidx: memory-mapped plain FASTA, pysam for bgzip; the .fai is
built when missing). Queries are read by random access when the file can be indexed (plain or bgzip
FASTA), otherwise streamed in file order alongside the PAF (minimap2 writes candidates grouped in
query-file order), so memory stays bounded whatever the number of reads.
"""

from __future__ import annotations

import itertools
import sys
from dataclasses import dataclass
from typing import Iterator

from .. import pack
from ..errors import InputError, RecordError
from . import fastx
from .faidx import IndexedFasta

_COMP = bytes.maketrans(b"ACGTUNRYKMSWBDHVacgtunrykmswbdhv", b"TGCAANYRMKSWVHDBtgcaanyrmkswvhdb")
STALE_TAGS = ("cm", "s1", "s2", "dv", "ms", "NM", "AS", "de", "cg", "cs", "rl", "zd")


def revcomp(seq: bytes) -> bytes:
    return seq.translate(_COMP)[::-1]


@dataclass
class Candidate:
    line: int
    qname: str
    qlen: int
    qs: int
    qe: int
    strand: str
    tname: str
    tlen: int
    ts: int
    te: int
    mapq: int
    tags: list  # input tags still meaningful after re-alignment


def fetch(cands, queries, targets, mode, pad, on_bad=None, keep_full: bool = True):
    """realign's items for cands (candidate, query part, target window, window start, full query,
    quality, free ends); a candidate whose sequences cannot be had raises its InputError, or
    goes to on_bad(error) if given. keep_full=False: no full query and quality (None; PAF output)."""
    for c in cands:
        try:
            qseq, qual = queries.get(c)
            if mode == "global":
                ws, we = c.ts, c.te
            else:
                ws, we = max(0, c.ts - pad), min(c.tlen, c.te + pad)
            tseq = targets.fetch(c, ws, we)
        except InputError as e:
            if on_bad is None:
                raise
            on_bad(e)
            continue
        part = qseq[c.qs:c.qe]
        free = (c.ts + pad - ws, we - (c.te - pad)) if mode != "global" else (0, 0)
        if not keep_full:
            qseq = qual = None
        yield c, (revcomp(part) if c.strand == "-" else part), tseq, ws, qseq, qual, free


def read_candidates(path: str, on_bad=None, items=None) -> Iterator[Candidate]:
    """Candidates in file order; a malformed line raises InputError, or goes to on_bad(error) if given.
    items: parse_lines' output to take instead of the whole file's."""
    for item in (_parse(path) if items is None else items):
        if isinstance(item, InputError):
            if on_bad is None:
                raise item
            on_bad(item)
        else:
            yield item


def _parse(path: str):
    name = fastx.display_name(path)
    with _open(path) as fh:
        yield from parse_lines(name, enumerate(fh, 1))


def _open(path: str):
    try:  # bytes that are not UTF-8 kept as surrogates: parse_lines names the line
        if path == "-":
            sys.stdin.reconfigure(errors="surrogateescape")
            return sys.stdin
        return open(path, "rt", errors="surrogateescape")
    except OSError as e:
        raise InputError(f"{fastx.display_name(path)}: cannot read ({e.strerror})") from None


def line_chunks(path: str, size) -> Iterator[tuple[int, list]]:
    """The PAF's raw lines in chunks: (number of the chunk's first line, lines); size() gives the
    next chunk's line count (asked before each chunk)."""
    with _open(path) as fh:
        first = 1
        while True:
            lines = list(itertools.islice(fh, max(1, size())))
            if not lines:
                return
            yield first, lines
            first += len(lines)


def parse_lines(name: str, numbered) -> Iterator:
    """Candidates (or an InputError for each malformed line) from (line number, line) pairs; name: the
    PAF as messages call it."""
    for ln, line in numbered:
        line = line.rstrip("\r\n")
        if not line or line.startswith("#"):
            continue
        if not line.isascii() and _binary(line):
            yield InputError(f"{name}: line {ln}: not PAF text (binary data or not UTF-8; gzip PAF is not read)")
            continue
        f = line.split("\t")
        err = _check(name, ln, f)
        if err is not None:
            yield err
            continue
        vals = {col: int(f[col - 1]) for col in (2, 3, 4, 8, 9, 12)}
        tags = [t for t in f[12:] if t[:2] not in STALE_TAGS]
        yield Candidate(ln, f[0], vals[2], vals[3], vals[4], f[4], f[5], int(f[6]), vals[8], vals[9],
                        vals[12], tags)


def _binary(line: str) -> bool:
    """Whether line holds undecodable bytes (surrogateescape) or control characters other than tab."""
    return any("\udc80" <= ch <= "\udcff" or (ch < " " and ch != "\t") for ch in line)


def _check(name: str, ln: int, f: list):
    """The InputError for a malformed PAF line, or None."""
    if len(f) < 12:
        return InputError(f"{name}: line {ln}: {len(f)} columns, PAF needs 12")
    vals = {}
    for col in (2, 3, 4, 7, 8, 9, 10, 11, 12):
        try:
            vals[col] = int(f[col - 1])
        except ValueError:
            return InputError(f"{name}: line {ln}: column {col} is not an integer ({f[col - 1]!r})")
    if f[4] not in ("+", "-"):
        return InputError(f"{name}: line {ln}: column 5 (strand) must be + or - (got {f[4]!r})")
    if not 0 <= vals[3] <= vals[4] <= vals[2]:
        return InputError(f"{name}: line {ln}: query coordinates {vals[3]}-{vals[4]} outside 0-{vals[2]}")
    if not 0 <= vals[8] <= vals[9] <= vals[7]:
        return InputError(f"{name}: line {ln}: target coordinates {vals[8]}-{vals[9]} outside 0-{vals[7]}")
    return None


class Targets:
    """Random access to the target FASTA (names, lengths, slices)."""

    def __init__(self, path: str):
        fastx.sniff(path)
        try:
            self.fa = IndexedFasta(path)
        except RecordError:  # (a malformed record: the reader's error as it is)
            raise
        except InputError as e:
            raise InputError(f"{e}; decompress it or use bgzip") from None
        self.path = path
        self.lengths = self.fa.lengths

    def fetch(self, c: Candidate, start: int, end: int) -> bytes:
        ln = self.lengths.get(c.tname)
        if ln is None:
            raise InputError(f"line {c.line}: target {c.tname!r} is not in {self.path}")
        if ln != c.tlen:
            raise InputError(f"line {c.line}: target {c.tname!r} has length {c.tlen} in the PAF but {ln} in {self.path}")
        return _folded(self.fa.fetch(c.tname, start, end), self.path, c.tname, start)


class Queries:
    """Whole query records by name: indexed when possible, else streamed in file order."""

    def __init__(self, path: str):
        fastx.sniff(path)
        self.path = path
        self.fa = None
        self.stream = None
        self.current = None
        try:
            if path == fastx.STDIN:  # streamed (htslib would take '-' for stdin and read it up)
                raise InputError("stdin")
            self.fa = IndexedFasta(path)
        except InputError:
            self.stream = fastx.records(path, chunk=256)

    def get(self, c: Candidate) -> tuple[bytes, str | None]:
        if self.fa is not None:
            if c.qname not in self.fa:
                raise InputError(f"line {c.line}: query {c.qname!r} is not in {self.path}")
            seq, qual = self.fa.fetch(c.qname), None
        else:
            while self.current is None or self.current[0] != c.qname:
                self.current = next(self.stream, None)
                if self.current is None:
                    raise InputError(f"line {c.line}: query {c.qname!r} not found in {self.path} (the PAF must "
                                     "follow the query file's order, or give an indexable FASTA)")
            _, seq, qual = self.current
        folded = _folded(seq, self.path, c.qname, 0)
        if len(seq) != c.qlen:
            raise InputError(f"line {c.line}: query {c.qname!r} has length {c.qlen} in the PAF but {len(seq)} "
                             f"in {self.path}")
        return folded, qual


def _folded(seq: bytes, path: str, name: str, start: int) -> bytes:
    """seq (record name's bases from start) case-folded; an InputError at a byte that is not a letter (an
    indexed file's records are not parsed)."""
    out, bad = pack.fold_checked(seq)
    if bad >= 0:
        ch = seq[bad]
        shown = repr(chr(ch)) if 32 <= ch < 127 else f"byte 0x{ch:02x}"
        raise InputError(f"{fastx.display_name(path)}: record {name!r}: invalid sequence character {shown} at base "
                         f"{start + bad + 1}; sequences hold letters only")
    return out
