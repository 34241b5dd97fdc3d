"""Where a damaged gzip or bgzip input stops: the record and line that hold the first byte its data cannot give.

The readers inflate large blocks (8 MiB, or a worker's 16 MiB part) at a time, on threads that read ahead, so
their error names the first record of the block that failed: "record 1 or a later one" for any file smaller
than a block. located() inflates the file again from its start with zlib, one member after another, counts
its lines and records up to where the data stops, and names that record instead:

- data that ends early (a cut file) or does not inflate: the record holding the first byte it cannot give;
- a member whose CRC-32 or size does not match its data: the record holding that member's first byte (the
  damage is somewhere in the member: a bgzip member holds 64 KiB at most, a plain gzip file's one member all
  of it);
- a member whose lines the count refused before its bytes failed (damage inflated into other lines, or a
  layout not counted): the record holding that member's first byte.

FASTA is counted by its '>' lines (a record over several lines too), FASTQ as 4-line records. A file too big
to inflate again quickly (MAX_INFLATED), a whole member laid out otherwise, a second pass that inflates
whole, or a record before the reader's, keep the reader's own words."""

from __future__ import annotations

import zlib

import numpy as np

from ..errors import RecordError
from .fastx import gzipped, streamed

MAX_INFLATED = 1 << 30  # inflated bytes read again at most (~2-4 s): beyond, the reader's block-wide record stands
PIECE = 1 << 20  # compressed bytes read at a time
OUT_PIECE = 8 << 20  # inflated bytes at most from one call
DAMAGED = "corrupt or truncated input in this record or a later one"  # the readers' words (io, search)


class _Counter:
    """Lines and records of inflated bytes fed in order: FASTA (records: lines starting '>') or FASTQ (4-line
    records, each '@' line 0 and '+' line 2 checked; `simple` False once one is not)."""

    def __init__(self):
        self.lines = 0  # whole lines so far
        self.records = 0  # records begun so far
        self.fastq = None  # known from the first byte
        self.at_start = True  # the next byte begins a line
        self.simple = True
        self.size = 0  # bytes fed

    def feed(self, data: bytes) -> None:
        if not data:
            return
        a = np.frombuffer(data, np.uint8)
        if self.fastq is None:
            self.fastq = bool(a[0] == ord("@"))
        nl = np.flatnonzero(a == 10)
        starts = nl[nl + 1 < len(a)] + 1
        if self.at_start:
            starts = np.concatenate([[0], starts])
        first = a[starts]  # the first byte of each line that starts here
        if self.fastq:
            role = (self.lines + (not self.at_start) + np.arange(len(starts))) % 4  # (each line's number)
            self.simple &= bool(np.all(first[role == 0] == ord("@")) and np.all(first[role == 2] == ord("+")))
            self.records += int(np.count_nonzero(role == 0))
        else:
            self.records += int(np.count_nonzero(first == ord(">")))
        self.lines += len(nl)
        self.at_start = bool(a[-1] == 10)
        self.size += len(a)

    def place(self) -> tuple[int, int]:
        """(record, line) holding the next byte: the last record begun, or the one a FASTQ record's first line
        would begin."""
        if not self.size:
            return 1, 1
        begins = self.at_start and self.fastq and self.lines % 4 == 0
        return max(1, self.records + begins), self.lines + 1


def _stop(path: str, counter: _Counter) -> tuple[tuple[int, int], str, str] | None:
    """Inflate path's members in turn, counting their data: ((record, line) where the data stops being good,
    what the place is, the inflater's words); None when path inflates whole, holds more than MAX_INFLATED
    bytes, or a whole member of it is laid out otherwise than counted. What the place is: "stops" (the first
    byte the data cannot give), "check" (the first byte of a member whose check fails) or "member" (the first
    byte of a member whose lines the layout refused before its bytes failed: damage, or another layout)."""
    inflater, fed, member = zlib.decompressobj(wbits=31), False, counter.place()

    def failed(words: str, checked: bool = False):
        return (member, "check", words) if checked else \
            (counter.place(), "stops", words) if counter.simple else (member, "member", words)

    with open(path, "rb") as fh:
        while True:
            pending = fh.read(PIECE)
            if not pending:
                return failed("the compressed data ends early: a truncated file?") if fed else None
            while True:  # (inflated OUT_PIECE at a time: a piece of a few bytes may hold megabytes)
                fed = True
                try:
                    out = inflater.decompress(pending, OUT_PIECE)
                except zlib.error as e:
                    return failed(str(e), "incorrect data check" in str(e) or "incorrect length check" in str(e))
                counter.feed(out)
                if counter.size > MAX_INFLATED:
                    return None
                if inflater.eof:
                    if not counter.simple:  # (a whole member inflated, checked, into another layout)
                        return None
                    pending = inflater.unused_data  # the next member's bytes (bgzip: many members)
                    inflater, fed, member = zlib.decompressobj(wbits=31), False, counter.place()
                    if not pending:
                        break
                else:
                    pending = inflater.unconsumed_tail
                    if not pending and len(out) < OUT_PIECE:  # (all it was given inflated and given back)
                        break


WORDS = {"stops": "corrupt or truncated input: its data stops in this record",
         "check": "corrupt input: the gzip member starting in this record fails its check: the damage is in it",
         "member": "corrupt or truncated input in the gzip member starting in this record"}


def located(err: RecordError, paths: dict) -> RecordError:
    """err, or the same error naming the record and line where its file's data stops, as the module says
    (never a record before err's); paths: each display name's path."""
    path = paths.get(err.name)
    if not err.detail.startswith(DAMAGED) or path is None or streamed(path):
        return err
    try:
        stop = _stop(path, _Counter()) if gzipped(path) else None
    except OSError:
        return err
    if stop is None or stop[0][0] < err.record:
        return err
    (record, line), what, words = stop
    return RecordError(err.name, record, f"{WORDS[what]} ({words})", line)
