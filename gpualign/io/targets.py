"""The target file's names and lengths for SAM's @SQ lines, found in bulk with numpy.

SAM's header comes before the first alignment, so `pairs -f sam|bam` reads the target file once before
aligning. A strict 2-line FASTA / 4-line FASTQ file (plain or gzip) is scanned here in 8 MB blocks: line ends,
record starts, names (the header up to the first space or tab) and sequence-line lengths as arrays, no
Python object per record; repeated names are found by a hash of their bytes and then compared exactly. Any
other layout, a name that is not printable ASCII, a record longer than a block or a hash collision between
two names goes to fastx.target_lengths (the record reader, which checks and names every fault). Where a name
repeats, the file is read again (fastx.same_sequences): a name's records must hold one sequence. The letters,
the qualities and what a FASTQ '+' line repeats are not checked here: the reader that feeds the engines
checks them and fails the run on a fault (the output is not committed then).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from .. import trace
from ..errors import InputError
from ..records import Names, offsets_from_lengths, segment_index
from ..workers import Forked
from . import fastx
from .fastx_fast import READ_ERRORS, open_gz

BLOCK = 8 << 20  # bytes scanned at a time (a record longer than this: the record reader)
FORK_BYTES = 16 << 20  # a target file this big or bigger is scanned in a child process (scan_beside)
_HASH_BASE = np.uint64(0x100000001B3)


class _NotBulk(Exception):
    """The file needs the record reader."""


@dataclass(eq=False)
class TargetLengths:
    """Unique target names in the order first seen, each with its length."""

    names: Names
    lengths: np.ndarray  # int64

    @classmethod
    def of(cls, targets) -> TargetLengths:
        """From a {name: length} dict (or TargetLengths, returned as they are)."""
        if isinstance(targets, TargetLengths):
            return targets
        return cls(Names.of(list(targets)), np.fromiter(targets.values(), dtype=np.int64, count=len(targets)))

    def __len__(self) -> int:
        return len(self.lengths)


@trace.traced("target scan")
def scan(path: str, symbols: bytes = b"") -> TargetLengths:
    """The TargetLengths of a regular file (the record reader's for other layouts; symbols: its extra letters)."""
    try:
        return _bulk(path, symbols)
    except _NotBulk:
        return TargetLengths.of(fastx.target_lengths(path, symbols))


def scan_beside(path: str, symbols: bytes = b"", then=None):
    """then(scan(path, symbols)) (then: None, or a function of the TargetLengths: what the caller needs of
    them, such as output/sam.sq_lines) in a child process forked now, for a file of FORK_BYTES or more (a
    Forked, whose result() is that value: the caller's reading and the engines' start go on meanwhile, and the
    scan shares no interpreter lock with them), else here (the value). Call it before the caller starts
    threads of its own."""
    try:
        big = os.path.getsize(path) >= FORK_BYTES
    except OSError:  # (the reader says what is wrong)
        big = False
    return Forked(_scan_then, path, symbols, then) if big else _scan_then(path, symbols, then)


def _scan_then(path: str, symbols: bytes, then):
    found = scan(path, symbols)
    return found if then is None else then(found)


def _bulk(path: str, symbols: bytes = b"") -> TargetLengths:
    if fastx.streamed(path):
        raise _NotBulk
    names, name_len, lengths = [], [], []
    step = None
    buf = bytearray(BLOCK)
    view = memoryview(buf)
    with (open_gz(path) if fastx.gzipped(path) else open(path, "rb")) as fh:
        have = 0  # bytes of a record the last block did not finish, at buf's start
        while True:
            try:
                got = _fill(fh, view[have:])
            except READ_ERRORS:
                raise _NotBulk from None
            n = have + got
            if n == 0 and step is not None:  # (the last block ended with a whole record)
                break
            if buf.find(b"\r", 0, n) >= 0:
                raise _NotBulk
            if step is None:
                step = {ord(">"): 2, ord("@"): 4}.get(buf[0] if n else None)
                if step is None:
                    raise _NotBulk
            eof = have + got < BLOCK
            used, parts = _records(np.frombuffer(buf, dtype=np.uint8, count=n), step, eof)
            for dst, part in zip((names, name_len, lengths), parts):
                dst.append(part)
            if eof:
                break
            have = n - used
            buf[:have] = buf[used:n]
    name_len = np.concatenate(name_len)
    names = Names(np.concatenate(names), offsets_from_lengths(name_len), name_len)
    found, repeated = _unique(names, np.concatenate(lengths), fastx.display_name(path))
    if repeated:
        fastx.same_sequences(path, repeated, symbols)
    return found


def _fill(fh, view: memoryview) -> int:
    """Read into view until it is full or the input ends: the bytes read."""
    done = 0
    while done < len(view):
        got = fh.readinto(view[done:])
        if not got:
            break
        done += got
    return done


def _records(a: np.ndarray, step: int, eof: bool) -> tuple[int, tuple]:
    """The whole records of a block: (bytes they take, (their names' bytes, the names' lengths, the sequence
    lengths))."""
    low = np.flatnonzero(a <= 32)  # line ends, and the spaces and tabs that end names
    ends = low[a[low] == 10]
    if eof and len(a) and a[-1] != 10:  # the last line without its newline
        ends = np.append(ends, len(a))
        low = np.append(low, len(a))
    if eof and len(ends) % step:
        raise _NotBulk
    k = len(ends) // step * step
    if k == 0:  # (no whole record: one longer than a block)
        raise _NotBulk
    ends = ends[:k]
    starts = np.empty(k, dtype=np.int64)
    starts[0] = 0
    starts[1:] = ends[:-1] + 1
    heads, head_ends = starts[0::step], ends[0::step]
    marker = ord(">") if step == 2 else ord("@")
    if not (a[heads] == marker).all():
        raise _NotBulk
    lengths = ends[1::step] - starts[1::step]
    if step == 2 and ((lengths > 0) & (a[np.minimum(starts[1::2], len(a) - 1)] == marker)).any():
        raise _NotBulk  # (a header where a sequence line should be: empty records back to back)
    if step == 4 and not ((a[starts[2::4]] == ord("+")).all() and np.array_equal(lengths, ends[3::4] - starts[3::4])):
        raise _NotBulk
    # a name ends at the first space or tab of its header line, or at the line's end
    first = heads + 1
    stop = low[np.searchsorted(low, first)]
    name_len = stop - first
    tail = a[np.minimum(stop, len(a) - 1)]
    if not name_len.all() or not ((stop == head_ends) | (tail == 32) | (tail == 9)).all():
        raise _NotBulk  # (an empty name, or another control character: the record reader's rules)
    name_bytes = a[segment_index(first, name_len)]
    if not (name_bytes < 127).all():  # (non-ASCII: the record reader's rules)
        raise _NotBulk
    return int(ends[-1]) + 1, (name_bytes, name_len.astype(np.int64), lengths.astype(np.int64))


def _hashes(names: Names) -> np.ndarray:
    """A 64-bit hash of each name's bytes and length, from 8 bytes at a time (each pass over the names
    still that long: the work follows the names' bytes, not the longest name)."""
    pad = np.zeros(len(names.buf) + 8, dtype=np.uint8)
    pad[:len(names.buf)] = names.buf
    words = np.ndarray((len(names.buf) + 1,), dtype="<u8", buffer=pad, strides=(1,))  # (unaligned loads)
    h = names.length.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15)
    rows = np.arange(len(names), dtype=np.int64)
    k = 0
    while len(rows):
        left = np.minimum(names.length[rows] - k, 8).astype(np.uint64)
        word = words[names.start[rows] + k]
        word &= np.where(left == 8, np.uint64(2**64 - 1), (np.uint64(1) << (left * np.uint64(8))) - np.uint64(1))
        g = (h[rows] ^ word) * _HASH_BASE
        h[rows] = g ^ (g >> np.uint64(29))
        k += 8
        rows = rows[names.length[rows] > k]
    return h


def _unique(names: Names, lengths: np.ndarray, display: str) -> tuple[TargetLengths, set]:
    """Names seen before dropped (the first one's length kept), and the set of names seen more than once (their
    sequences are compared next); a name with two lengths is an error."""
    n = len(names)
    if n == 0:
        return TargetLengths(names, lengths), set()
    h = _hashes(names)
    if (np.diff(np.sort(h)) != 0).all():  # (no two alike: the common case)
        return TargetLengths(names, lengths), set()
    order = np.argsort(h, kind="stable")
    hs = h[order]
    run = np.cumsum(np.concatenate([[True], hs[1:] != hs[:-1]])) - 1
    run_first = order[np.flatnonzero(np.concatenate([[True], hs[1:] != hs[:-1]]))]
    first = np.empty(n, dtype=np.int64)
    first[order] = run_first[run]  # the first record with each record's hash
    again = np.flatnonzero(first != np.arange(n))
    if len(again):
        f = first[again]
        if not np.array_equal(names.length[again], names.length[f]):
            raise _NotBulk  # two names with one hash (the record reader sorts it out)
        ln = names.length[again]
        if not np.array_equal(names.buf[segment_index(names.start[again], ln)],
                              names.buf[segment_index(names.start[f], ln)]):
            raise _NotBulk
        bad = np.flatnonzero(lengths[again] != lengths[f])
        if len(bad):
            i, j = int(again[bad[0]]), int(first[again[bad[0]]])
            raise InputError(f"{display}: target name {names[i]!r} appears twice with different lengths "
                             f"({int(lengths[j])} and {int(lengths[i])}); SAM needs unique names "
                             "(use PAF or TSV output)")
    keep = first == np.arange(n)
    repeated = {names[int(i)] for i in np.unique(first[again])}
    return TargetLengths(Names(names.buf, names.start[keep], names.length[keep]), lengths[keep]), repeated
