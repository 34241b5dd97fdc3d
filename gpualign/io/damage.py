"""Where a damaged gzip or bgzip input stops: the record and line that hold the first byte its data cannot give.

The readers inflate large blocks (8 MiB, or a worker's 16 MiB part) at a time, on threads that read ahead, so
their error names the first record of the block that failed: "record 1 or a later one" for any file smaller
than a block. located() inflates the file again from its start with zlib, one member after another, counts
its lines and records up to where the data stops, and names that record instead:

- data that ends early (a cut file) or does not inflate: the record and line holding the first byte it cannot
  give, or, where the good data ends with a line, that line (zlib gives nothing of a call that fails, so that
  call's bytes are inflated again in small steps);
- bytes after the last whole member that are not gzip: the last record;
- a member whose CRC-32 or size does not match its data, or whose bytes inflate into what no FASTA or FASTQ
  holds (control bytes, lines out of the FASTQ layout) before they fail: the record holding that member's
  first byte (the damage is somewhere in the member: a bgzip member holds 64 KiB at most, a plain gzip
  file's one member all of it).

FASTA is counted by its '>' lines (a record over several lines too), FASTQ as 4-line records from its first
line that is not blank. A file too big to inflate again quickly (MAX_INFLATED), a whole member laid out
otherwise, a second pass that inflates whole, or a record before the reader's, keep the reader's own words."""

from __future__ import annotations

import zlib

import numpy as np

from ..errors import RecordError
from .fastx import gzipped, streamed

MAX_INFLATED = 1 << 30  # inflated bytes read again at most (~2-4 s): beyond, the reader's block-wide record stands
PIECE = 1 << 20  # compressed bytes read at a time
OUT_PIECE = 8 << 20  # inflated bytes at most from one call
DAMAGED = "corrupt or truncated input in this record or a later one"  # the readers' words (io, search)


_TEXT = bytes(b for b in range(256) if b in (9, 10, 13) or 32 <= b != 127)  # all but the control bytes, which no
# FASTA/FASTQ text holds: damage inflated into them


class _Counter:
    """Lines and records of inflated bytes fed in order: FASTA (records: lines starting '>') or FASTQ (4-line
    records from the first line that is not blank, each '@' line 0 and '+' line 2 checked); `simple` False once
    one is not, or once a control byte comes (damage inflated into other bytes)."""

    def __init__(self):
        self.lines = 0  # whole lines so far
        self.records = 0  # records begun so far
        self.fastq = None  # known from the first byte that is not blank
        self.skip = 0  # blank lines before the first record
        self.at_start = True  # the next byte begins a line
        self.simple = True
        self.size = 0  # bytes fed

    def copy(self) -> "_Counter":
        c = _Counter()
        c.__dict__.update(self.__dict__)
        return c

    def feed(self, data: bytes) -> None:
        if not data:
            return
        a = np.frombuffer(data, np.uint8)
        nl = np.flatnonzero(a == 10)
        if self.fastq is None:
            text = np.flatnonzero((a != 10) & (a != 13) & (a != 32) & (a != 9))
            if len(text):  # (the lines before it are blank: the readers skip them)
                self.fastq = bool(a[text[0]] == ord("@"))
                self.skip = self.lines + int(np.count_nonzero(nl < text[0]))
        self.simple &= not data.translate(None, _TEXT)  # (what is left: control bytes)
        starts = nl[nl + 1 < len(a)] + 1
        if self.at_start:
            starts = np.concatenate([[0], starts])
        first = a[starts]  # the first byte of each line that starts here
        if self.fastq:
            line = self.lines + (not self.at_start) + np.arange(len(starts))  # each one's number (from 0)
            keep = line >= self.skip
            role, first = (line[keep] - self.skip) % 4, first[keep]
            self.simple &= bool(np.all(first[role == 0] == ord("@")) and np.all(first[role == 2] == ord("+")))
            self.records += int(np.count_nonzero(role == 0))
        else:
            self.records += int(np.count_nonzero(first == ord(">")))
        self.lines += len(nl)
        self.at_start = bool(a[-1] == 10)
        self.size += len(a)

    def place(self) -> tuple[int, int, bool]:
        """(record, line, whether the place is a line's end) of where the bytes fed end: the record and line
        holding the next byte, or, where the bytes end with a line, that line and its record."""
        if not self.size or not self.records:
            return 1, 1, False
        return self.records, self.lines + (not self.at_start), self.at_start


def _inflate_until_error(inflater, take, data: bytes) -> None:
    """inflater (a copy from before data) fed data again in small steps, take(out) given what each gives, up to
    the step that fails: zlib gives nothing of a call that fails, so the place is found to within a byte."""
    for step in (4096, 64, 1):
        for at in range(0, len(data), step):
            probe = inflater.copy()
            try:
                out = probe.decompress(data[at:at + step])
            except zlib.error:
                data = data[at:at + step]
                break
            take(out)
            inflater = probe
        else:
            return


def _stop(path: str, counter: _Counter) -> tuple[tuple[int, int, bool], str, str] | None:
    """Inflate path's members in turn, counting their data: ((record, line, at a line's end) where the data stops
    being good, what the place is, the inflater's words); None when path inflates whole, holds more than
    MAX_INFLATED bytes, or a whole member of it is laid out otherwise than counted. What the place is: "stops"
    (where the data stops), "tail" (bytes after the last whole member that are not gzip), "check" (the first
    byte of a member whose check fails) or "member" (the first byte of a member whose bytes the count refused
    before they failed: damage inflated into other bytes, or another layout)."""
    inflater, fed, members = zlib.decompressobj(wbits=31), False, 0
    start, member = counter.copy(), None  # the count at the member's start; the place of its first byte

    def take(out: bytes) -> None:
        nonlocal member
        if member is None and out:
            first = start.copy()
            first.feed(out[:1])
            member = first.place()
        counter.feed(out)

    def failed(words: str, checked: bool = False, ended: bool = False):
        here = counter.place()
        if checked or not counter.simple:
            return member or here, "check" if checked else "member", words
        return here, "tail" if members and member is None and not ended else "stops", words

    with open(path, "rb") as fh:
        while True:
            pending = fh.read(PIECE)
            if not pending:
                return failed("the compressed data ends early: a truncated file?", ended=True) if fed else None
            while True:  # (inflated OUT_PIECE at a time: a piece of a few bytes may hold megabytes)
                fed = True
                before = (inflater.copy(), counter.copy())
                try:
                    out = inflater.decompress(pending, OUT_PIECE)
                except zlib.error as e:
                    inflater, counter = before  # (what the failing call inflated before the fault, counted again)
                    _inflate_until_error(inflater, take, pending)
                    return failed(str(e), "incorrect data check" in str(e) or "incorrect length check" in str(e))
                take(out)
                if counter.size > MAX_INFLATED:
                    return None
                if inflater.eof:
                    if not counter.simple:  # (a whole member inflated, checked, into another layout)
                        return None
                    pending = inflater.unused_data  # the next member's bytes (bgzip: many members)
                    inflater, fed, members = zlib.decompressobj(wbits=31), False, members + 1
                    start, member = counter.copy(), None
                    if not pending:
                        break
                else:
                    pending = inflater.unconsumed_tail
                    if not pending and len(out) < OUT_PIECE:  # (all it was given inflated and given back)
                        break


WORDS = {"stops": "corrupt or truncated input: its data stops in this record",
         "stops at end": "corrupt or truncated input: its data stops at the end of this line",
         "tail": "corrupt input after this record: bytes that are not gzip follow the last whole gzip member",
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
    (record, line, at_end), what, words = stop
    if what == "stops" and at_end:
        what = "stops at end"
    return RecordError(err.name, record, f"{WORDS[what]} ({words})", line)
