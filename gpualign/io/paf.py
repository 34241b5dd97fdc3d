"""PAF candidates (minimap2's 12 columns + tags) and the sequences they point into.

Targets and queries are read by random access (io.random_access: in place through io.faidx, or a
scratch copy of gzip, bgzip FASTQ and stdin input), so candidates may come in any order.
"""

from __future__ import annotations

import itertools
import re
import sys
from dataclasses import dataclass
from typing import Iterator, NamedTuple

import numpy as np

from .. import pack
from ..errors import InputError
from . import fastx
from .random_access import open_indexed

COMPLEMENT = bytes.maketrans(b"ACGTUNRYKMSWBDHVacgtunrykmswbdhv", b"TGCAANYRMKSWVHDBtgcaanyrmkswvhdb")
# the candidate's tags that describe its own alignment (or minimap2's chaining of it): dropped from the output
STALE_TAGS = frozenset(("cm", "s1", "s2", "dv", "ms", "nn", "MD", "NM", "AS", "de", "cg", "cs", "rl", "zd"))


def revcomp(seq: bytes) -> bytes:
    return seq.translate(COMPLEMENT)[::-1]


class Candidate(NamedTuple):
    """A PAF line's candidate (a tuple: quick to make and to pickle; runs of them travel as Candidates)."""

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


_INTS = frozenset(("line", "qlen", "qs", "qe", "tlen", "ts", "te", "mapq"))


class Candidates:
    """Candidates as columns (Candidate's fields: int64 arrays, lists of names, strands and tag lists): what the
    reader processes send and batch.meta["cands"] holds, pickled at a fraction of a list of Candidates' cost.
    An index gives a Candidate, a slice Candidates; iterating gives Candidates."""

    def __init__(self, cands=()):
        cands = list(cands)
        for f, col in zip(Candidate._fields, zip(*cands) if cands else [()] * len(Candidate._fields)):
            setattr(self, f, np.array(col, dtype=np.int64) if f in _INTS else list(col))

    @classmethod
    def of_columns(cls, **columns) -> "Candidates":
        """From Candidate's fields as columns (the integers as int64 arrays)."""
        out = cls.__new__(cls)
        for f in Candidate._fields:
            setattr(out, f, columns[f])
        return out

    def __len__(self) -> int:
        return len(self.qname)

    def _columns(self) -> list:
        return [getattr(self, f).tolist() if f in _INTS else getattr(self, f) for f in Candidate._fields]

    def __iter__(self):
        return map(Candidate._make, zip(*self._columns()))

    def __getitem__(self, i):
        if isinstance(i, slice):
            out = Candidates.__new__(Candidates)
            for f in Candidate._fields:
                setattr(out, f, getattr(self, f)[i])
            return out
        return Candidate(*(int(getattr(self, f)[i]) if f in _INTS else getattr(self, f)[i]
                           for f in Candidate._fields))


@dataclass
class Fetched:
    """A run of candidates with what fetch gives of each, as columns: the query parts' and target windows'
    lengths, the windows' starts, the target bases free at each window's two ends (n x 2), and the whole
    queries and their qualities (lists; of None where not kept)."""

    cands: Candidates
    q_len: np.ndarray
    t_len: np.ndarray
    win_start: np.ndarray
    free: np.ndarray
    full_query: list
    full_qual: list

    @classmethod
    def of(cls, items: list) -> "Fetched":
        """From fetch's items."""
        ql, tl = (np.fromiter((len(it[k]) for it in items), dtype=np.int64, count=len(items)) for k in (1, 2))
        free = np.array([it[6] for it in items], dtype=np.int64).reshape(-1, 2)
        return cls(Candidates(it[0] for it in items), ql, tl, np.array([it[3] for it in items], dtype=np.int64),
                   free, [it[4] for it in items], [it[5] for it in items])

    @property
    def bases(self) -> int:
        return int(self.q_len.sum() + self.t_len.sum())


class CandidateError(InputError):
    """A bad candidate (a malformed line, or sequences that cannot be had) with its read's name, the
    line's first column (first_column): --skip-bad skips it, and realign_primary stops waiting for it."""

    def __init__(self, message: str, qname: str | None = None):
        super().__init__(message)
        self.qname = qname

    def __reduce__(self):  # pickled across processes with its read's name
        return CandidateError, (str(self), self.qname)


def first_column(line: str) -> str | None:
    """A PAF line's first column (the read's name), None for a blank or comment line."""
    line = line.rstrip("\r\n")
    if not line or line.startswith("#"):
        return None
    return line.split("\t", 1)[0]


def fetch(cands, queries, targets, mode, pad, on_bad=None, keep_full: bool = True, name: str | None = None):
    """realign's items for cands (candidate, query part, target window, window start, full query,
    quality, free ends); a candidate whose sequences cannot be had raises its InputError, or
    goes to on_bad(error) if given. keep_full=False: no full query and quality (None; PAF output). name: the
    PAF as messages call it (a candidate's line is named in it)."""
    for c in cands:
        try:
            qseq, qual = queries.get(c)
            ws, we, free = window(c, mode, pad)
            tseq = targets.fetch(c, ws, we)
        except InputError as e:
            if isinstance(e, CandidateError) and name:
                e = CandidateError(f"{name}: {e}", c.qname)
            if on_bad is None:
                raise e from None
            on_bad(CandidateError(str(e), c.qname))
            continue
        part = qseq[c.qs:c.qe]
        if not keep_full:
            qseq = qual = None
        yield c, (revcomp(part) if c.strand == "-" else part), tseq, ws, qseq, qual, free


def window(c: Candidate, mode: str, pad: int) -> tuple[int, int, tuple[int, int]]:
    """(start, end) of candidate c's target window and the target bases free at its two ends. Ends-free, an
    empty query range aligns no base: an empty window at the box's start (else, with a box wider than twice
    the pad, its free ends would not meet and it would align as deletions)."""
    if mode == "global":
        return c.ts, c.te, (0, 0)
    if c.qe == c.qs:
        return c.ts, c.ts, (0, 0)
    ws, we = max(0, c.ts - pad), min(c.tlen, c.te + pad)
    return ws, we, (c.ts + pad - ws, we - (c.te - pad))


def windows(c: Candidates, mode: str, pad: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """window's (starts, ends, free ends n x 2) of many candidates at once."""
    if mode == "global":
        return c.ts.copy(), c.te.copy(), np.zeros((len(c), 2), dtype=np.int64)
    empty = c.qe == c.qs
    ws = np.where(empty, c.ts, np.maximum(0, c.ts - pad))
    we = np.where(empty, c.ts, np.minimum(c.tlen, c.te + pad))
    free = np.stack([c.ts + pad - ws, we - (c.te - pad)], axis=1)
    free[empty] = 0
    return ws, we, free


def read_candidates(path: str, on_bad=None, items=None, name: str | None = None) -> Iterator[Candidate]:
    """Candidates in file order; a malformed line raises InputError, or goes to on_bad(error) if given.
    items: parse_lines' output to take instead of the whole file's; name: the PAF as messages call it."""
    for item in (_parse(path, name) if items is None else items):
        if isinstance(item, InputError):
            if on_bad is None:
                raise item
            on_bad(item)
        else:
            yield item


def _parse(path: str, name: str | None = None):
    name = name or fastx.display_name(path)
    with _open(path) as fh:
        yield from parse_lines(name, enumerate(fh, 1))


def check(path: str, skip_bad: bool = False) -> None:
    """Raise the InputError of a candidates file that cannot be read or whose first candidate line is
    malformed (unless skip_bad: such lines are skipped), before a run starts anything; stdin and pipes,
    which can be read only once, are checked as they are read."""
    if fastx.streamed(path):
        return
    with _open(path) as fh:
        first = next(parse_lines(fastx.display_name(path), enumerate(fh, 1)), None)
    if isinstance(first, InputError) and not skip_bad:
        raise first


def _open(path: str):
    try:  # bytes that are not UTF-8 kept as surrogates: parse_lines names the line; lines end at LF only (a CR
        # that ends no line stays in it: parse_lines refuses it, where universal newlines made it a line end)
        if path == "-":
            sys.stdin.reconfigure(errors="surrogateescape", newline="\n")
            return sys.stdin
        return open(path, "rt", errors="surrogateescape", newline="\n")
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


# a well-formed line's 12 columns and its tags: _check's rules (ASCII digits, strand) in one match, the coordinates
# and MAPQ compared after it; a line it does not take goes through _check, which names the fault
_LINE = re.compile(r"([^\t]*)\t(\d+)\t(\d+)\t(\d+)\t([+-])\t([^\t]*)\t(\d+)\t(\d+)\t(\d+)\t\d+\t\d+\t(\d+)(?:\t(.*))?",
                   re.ASCII | re.DOTALL)


def parse_lines(name: str, numbered) -> Iterator:
    """Candidates (or an InputError for each malformed line) from (line number, line) pairs; name: the
    PAF as messages call it."""
    match = _LINE.fullmatch
    for ln, line in numbered:
        line = line.rstrip("\r\n")
        if not line or line.startswith("#"):
            continue
        m = match(line) if line.isascii() and "\r" not in line else None
        if m is not None:
            qn, ql, qs, qe, strand, tn, tl, ts, te, mq, rest = m.groups()
            ql, qs, qe, tl, ts, te, mq = int(ql), int(qs), int(qe), int(tl), int(ts), int(te), int(mq)
            if qs <= qe <= ql and ts <= te <= tl and mq <= 255:
                tags = [] if rest is None else [t for t in rest.split("\t") if t and t[:2] not in STALE_TAGS]
                yield Candidate(ln, qn, ql, qs, qe, strand, tn, tl, ts, te, mq, tags)
                continue
        if not line.isascii() and _binary(line):
            yield CandidateError(f"{name}: line {ln}: not PAF text (binary data or not UTF-8; gzip PAF is not read)",
                                 first_column(line))
            continue
        if "\r" in line:
            yield CandidateError(f"{name}: line {ln}: a carriage return (CR) inside the line: PAF lines end with LF "
                                 "or CR LF", first_column(line))
            continue
        f = line.split("\t")
        err = _check(name, ln, f)
        if err is not None:
            yield CandidateError(err, f[0])
            continue
        vals = {col: int(f[col - 1]) for col in (2, 3, 4, 8, 9, 12)}
        tags = [t for t in f[12:] if t and t[:2] not in STALE_TAGS]  # (an empty column: a stray tab)
        yield Candidate(ln, f[0], vals[2], vals[3], vals[4], f[4], f[5], int(f[6]), vals[8], vals[9],
                        vals[12], tags)


def _binary(line: str) -> bool:
    """Whether line holds undecodable bytes (surrogateescape) or control characters other than tab."""
    return any("\udc80" <= ch <= "\udcff" or (ch < " " and ch != "\t") for ch in line)


def _check(name: str, ln: int, f: list) -> str | None:
    """What is wrong with a PAF line (its columns f), or None."""
    if len(f) < 12:
        return f"{name}: line {ln}: {len(f)} columns, PAF needs 12"
    vals = {}
    for col in (2, 3, 4, 7, 8, 9, 10, 11, 12):
        text = f[col - 1]
        if not (text.isascii() and text.isdigit()):  # (int() takes ' 8', '+8', '1_6' and non-ASCII digits)
            return f"{name}: line {ln}: column {col} is not an integer >= 0 ({text!r})"
        vals[col] = int(text)
    if vals[12] > 255:
        return f"{name}: line {ln}: column 12 (mapping quality) is {vals[12]}, over 255 (SAM's MAPQ)"
    if f[4] not in ("+", "-"):
        return f"{name}: line {ln}: column 5 (strand) must be + or - (got {f[4]!r})"
    for what, start, end, length in (("query", vals[3], vals[4], vals[2]), ("target", vals[8], vals[9], vals[7])):
        if max(start, end) > length:
            return f"{name}: line {ln}: {what} coordinates {start}-{end} outside 0-{length}"
        if start > end:
            return f"{name}: line {ln}: {what} start {start} is after its end {end}"
    return None


class Targets:
    """Random access to the target FASTA (names, lengths, slices)."""

    def __init__(self, path: str):
        self.fa = open_indexed(path)
        self.path = path
        self.lengths = self.fa.lengths

    def fetch(self, c: Candidate, start: int, end: int) -> bytes:
        ln = self.lengths.get(c.tname)
        if ln is None:
            raise CandidateError(f"line {c.line}: target {c.tname!r} is not in {fastx.display_name(self.path)}",
                                 c.qname)
        if ln != c.tlen:  # (a record whose line ends its .fai misplaces: that fault named first, an InputError)
            self.fa.fetch(c.tname, 0, 0)
            raise CandidateError(f"line {c.line}: target {c.tname!r} has length {c.tlen} in the PAF but {ln} in "
                                 f"{fastx.display_name(self.path)}", c.qname)
        return _folded(self.fa.fetch(c.tname, start, end), self.path, c.tname, start)


class Queries:
    """Whole query records (and qualities) by name, in any order: by random access, in place or through
    a scratch copy (io.random_access)."""

    def __init__(self, path: str):
        self.path = path
        self.fa = open_indexed(path, qualities=True)

    def get(self, c: Candidate) -> tuple[bytes, str | None]:
        if c.qname not in self.fa:
            raise CandidateError(f"line {c.line}: query {c.qname!r} is not in {fastx.display_name(self.path)}",
                                 c.qname)
        seq = _folded(self.fa.fetch(c.qname), self.path, c.qname, 0)  # a bad byte first: it is the fault
        if len(seq) != c.qlen:
            raise CandidateError(f"line {c.line}: query {c.qname!r} has length {c.qlen} in the PAF but {len(seq)} "
                                 f"in {fastx.display_name(self.path)}", c.qname)
        return seq, self.fa.quality(c.qname)


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
