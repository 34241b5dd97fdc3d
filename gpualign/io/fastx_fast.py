"""The fast path of the FASTA/FASTQ reader: strict 2-line FASTA or 4-line FASTQ (no CR), parsed in 8 MB
blocks with a few whole-block operations instead of a Python step per record. Anything else (another
layout, or anything the rules of fastx_strict.py might refuse) raises NotSimple(where it stopped), and
the strict parser (fastx_strict.py) takes over from there, with the error's line if there is one."""

from __future__ import annotations

import contextlib
import gzip
import io
import zlib

import numpy as np

from .. import pack
from ..records import Names

try:  # ISA-L's inflate (isal, optional): about twice zlib's speed, in a thread of its own beside the parsing
    from isal import igzip_threaded, isal_zlib

    def open_gz(path: str):
        return igzip_threaded.open(path, "rb", threads=1)

    READ_ERRORS: tuple = (EOFError, OSError, zlib.error, isal_zlib.error)
except ImportError:  # pragma: no cover - isal is a dependency; gzip when it is missing
    igzip_threaded = None

    def open_gz(path: str):
        return gzip.open(path, "rb")

    READ_ERRORS = (EOFError, OSError, zlib.error)


class _MembersFrom(io.RawIOBase):
    """The gzip members of a file from byte `at` on (a member's start: a bgzip file's, from its index), inflated
    as open_gz inflates a whole file; the file closed with it."""

    def __init__(self, path: str, at: int):
        self._raw = open(path, "rb")
        self._raw.seek(at)
        try:
            self._gz = igzip_threaded.open(self._raw, "rb", threads=1) if igzip_threaded else gzip.GzipFile(
                fileobj=self._raw)
        except BaseException:
            self._raw.close()
            raise

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:
        return self._gz.readinto(b)

    def close(self) -> None:
        if not self.closed:
            try:
                self._gz.close()
            finally:
                self._raw.close()
        super().close()


def open_gz_from(path: str, at: int):
    """path's gzip members from byte `at` (a member's start) on, inflated, as a binary stream."""
    return io.BufferedReader(_MembersFrom(path, at), _BLOCK)


class NotSimple(Exception):
    """The file is not strict 2-line FASTA / 4-line FASTQ from here on: after `records` records, at byte
    `offset` (of the inflated input), line `line`."""

    def __init__(self, records: int, offset: int = 0, line: int = 1, pending: bytes = b""):
        super().__init__(records, offset, line)
        self.records, self.offset, self.line = records, offset, line
        self.pending = pending  # the input's bytes from offset on that were read already (a stream's)


_BLOCK = 1 << 23


def _all_start(lines: list, mark: bytes) -> bool:
    """Does every line start with the one-byte mark? (joined once: no Python step per line)"""
    return not lines or (lines[0][:1] == mark and b"\n".join(lines).count(b"\n" + mark) == len(lines) - 1)


def _plus_lines(plus: list, heads: list) -> bool:
    """Are the '+' lines all bare, or all their record's header again (as SRA writes them)? (the
    headers start with '@'; joined once: no Python step per line)"""
    if plus.count(b"+") == len(plus):
        return True
    joined = b"\n".join(heads)
    return b"\n".join(plus) == b"+" + joined[1:].replace(b"\n@", b"\n+")


def names_of(heads: list) -> list:
    """Record names (the header up to the first ASCII whitespace, marker dropped) as str: UTF-8 text (a
    description after the name may hold any bytes). Headers with no whitespace at all, the common case, are
    split in one step; IndexError for an empty name, UnicodeDecodeError for a name that is not UTF-8."""
    if not heads:
        return []
    joined = b"\n".join(heads)
    if b" " in joined or b"\t" in joined or b"\x0b" in joined or b"\x0c" in joined:
        names = [h[1:].split(None, 1)[0].decode("utf-8") for h in heads]
    else:
        text = joined.decode("utf-8")
        names = text[1:].split("\n" + text[0])
    if len(names) != len(heads) or "" in names:
        raise IndexError("empty record name")
    return names


def packed_names(heads: list) -> Names:
    """names_of(heads) as Names (one byte buffer, no str per name) where no header holds white space (the common
    case, as names_of's one step); names_of's list made Names otherwise. The same IndexError and
    UnicodeDecodeError."""
    joined = b"\n".join(heads)
    if not heads or b" " in joined or b"\t" in joined or b"\x0b" in joined or b"\x0c" in joined:
        return Names.of(names_of(heads))
    joined.decode("utf-8")  # (each name apart: the line ends and markers between them are ASCII)
    length = np.fromiter(map(len, heads), dtype=np.int64, count=len(heads)) - 1
    buf = joined[1:].replace(b"\n" + joined[:1], b"")  # (the headers' markers and the line ends between them)
    if int(length.min()) == 0 or len(buf) != int(length.sum()):
        raise IndexError("empty record name")
    return Names.joined(np.frombuffer(buf, dtype=np.uint8), length)


def simple_chunks(path: str, chunk: int, data: bytes | None = None, symbols: bytes = b"", stream=None,
                  packed: bool = False):
    """Fast path for the common layout: FASTA with one sequence line per record, or 4-line FASTQ, no CR,
    sequences of letters (and `symbols`), qualities '!'..'~', '+' lines bare or all repeating the header.
    Anything else
    raises NotSimple and the strict parser takes over from there. data: parse these bytes (a part of
    path holding whole records) instead of the file; stream: read this binary stream (stdin or a pipe,
    inflated), which the strict parser goes on reading after the NotSimple's pending bytes; packed: names and
    FASTQ qualities as Names (one buffer each), not a str per record."""
    seq_ok = pack.LETTERS + symbols + b"\n"
    if data is None and stream is None:
        with open(path, "rb") as fh:
            gz = fh.read(2) == b"\x1f\x8b"
    done = 0
    base = 0  # offset of the block's data (carry first) in the input
    opened = (contextlib.nullcontext(stream) if stream is not None else io.BytesIO(data) if data is not None
              else open_gz(path) if gz else open(path, "rb"))
    with opened as fh:
        carry = pending = b""
        step = None

        def stop():
            return NotSimple(done, base, done * (step or 2) + 1, pending)

        while True:
            parts = [carry]
            try:
                while True:  # blocks without a line end (a line longer than a block: unwrapped FASTA) joined
                    block = fh.read(_BLOCK)  # once the line has ended, in one copy
                    parts.append(block)
                    if not block or b"\n" in block:
                        break
            except READ_ERRORS:
                pending = b"".join(parts)  # (what stop() hands over)
                raise stop() from None  # the strict parser reports the damage with the record number
            data = pending = b"".join(parts)
            if b"\r" in data:
                raise stop()
            lines = data.split(b"\n")
            last = lines.pop()
            if not block and last:  # no newline at the end of the input
                lines.append(last)
                last = b""
            if step is None and lines:
                step = 2 if lines[0][:1] == b">" else 4
            if not step:
                if not block:
                    return
                base += len(data) - len(last)
                carry = last
                continue
            if not block:  # end of input: every line must belong to a whole record
                if len(lines) % step:
                    raise stop()
                whole = len(lines)
            else:  # hold the last record back: its sequence may go on in the next block
                whole = max(0, len(lines) // step - 1) * step
            carry = b"\n".join(lines[whole:] + [last])
            # check every complete line of the block (held-back ones too: the line after the last
            # record yielded must start the next record), then take the records up to `whole`
            heads = lines[0::step]
            try:
                if step == 2:
                    seqs = lines[1::step]
                    ok = _all_start(heads, b">") and not b"\n".join(seqs).translate(None, seq_ok)
                else:
                    n4 = len(lines) // 4
                    seqs, qb, plus = lines[1::4][:n4], lines[3::4][:n4], lines[2::4]
                    ok = (_all_start(heads, b"@") and _plus_lines(plus, heads[:len(plus)])
                          and list(map(len, seqs)) == list(map(len, qb))
                          and not b"\n".join(seqs).translate(None, seq_ok)
                          and not b"".join(qb).translate(None, pack.QUALITY))
                if not ok:
                    raise stop()
                k = whole // step
                heads, seqs = heads[:k], seqs[:k]
                if step == 2:
                    quals = [None] * k
                elif packed:
                    quals = Names.joined(np.frombuffer(b"".join(qb[:k]), dtype=np.uint8),
                                         np.fromiter(map(len, seqs), dtype=np.int64, count=k))
                else:
                    quals = [x.decode("ascii") for x in qb[:k]]
                names = packed_names(heads) if packed else names_of(heads)
            except (IndexError, UnicodeDecodeError):
                raise stop() from None
            for i in range(0, len(names), chunk):
                yield names[i:i + chunk], seqs[i:i + chunk], quals[i:i + chunk]
                done += len(names[i:i + chunk])
            if not block:
                return
            base += len(data) - len(carry)
