"""The fast path of the FASTA/FASTQ reader: strict 2-line FASTA or 4-line FASTQ (no CR), parsed in 8 MB
blocks with a few whole-block operations instead of a Python step per record. Anything else raises
_NotSimple(records already yielded), and htslib (fastx_htslib.py) takes over from there."""

from __future__ import annotations

import gzip
import io
import zlib

try:  # ISA-L's inflate (isal, optional): about twice zlib's speed, in a thread of its own beside the parsing
    from isal import igzip_threaded, isal_zlib

    def _open_gz(path: str):
        return igzip_threaded.open(path, "rb", threads=1)

    _READ_ERRORS: tuple = (EOFError, OSError, zlib.error, isal_zlib.error)
except ImportError:  # pragma: no cover - isal is a dependency; gzip when it is missing
    def _open_gz(path: str):
        return gzip.open(path, "rb")

    _READ_ERRORS = (EOFError, OSError, zlib.error)


class _NotSimple(Exception):
    """The file is not strict 2-line FASTA / 4-line FASTQ from here on (after `records` records)."""

    def __init__(self, records: int):
        super().__init__(records)
        self.records = records


_BLOCK = 1 << 23


def _all_start(lines: list, mark: bytes) -> bool:
    """Does every line start with the one-byte mark? (joined once: no Python step per line)"""
    return not lines or (lines[0][:1] == mark and b"\n".join(lines).count(b"\n" + mark) == len(lines) - 1)


def _names(heads: list) -> list:
    """Record names (the header up to the first whitespace, marker dropped) as str. Headers with no
    whitespace at all, the common case, are split in one step; IndexError for an empty name."""
    if not heads:
        return []
    text = b"\n".join(heads).decode("ascii")
    if " " in text or "\t" in text or "\x0b" in text or "\x0c" in text:
        names = [h[1:].split(None, 1)[0].decode("ascii") for h in heads]
    else:
        names = text[1:].split("\n" + text[0])
    if len(names) != len(heads) or "" in names:
        raise IndexError("empty record name")
    return names


def _simple_chunks(path: str, chunk: int, data: bytes | None = None):
    """Fast path for the common layout: FASTA with one sequence line per record, or 4-line FASTQ, no CR.
    Anything else raises _NotSimple(records already yielded) and htslib takes over from there.
    data: parse these bytes (a part of path holding whole records) instead of the file."""
    if data is None:
        with open(path, "rb") as fh:
            gz = fh.read(2) == b"\x1f\x8b"
    done = 0
    with (io.BytesIO(data) if data is not None else _open_gz(path) if gz else open(path, "rb")) as fh:
        carry = b""
        step = None
        while True:
            try:
                block = fh.read(_BLOCK)
            except _READ_ERRORS:
                raise _NotSimple(done) from None  # htslib reports the damage with the record number
            data = carry + block
            if b"\r" in data:
                raise _NotSimple(done)
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
                carry = last
                continue
            if not block:  # end of input: every line must belong to a whole record
                if len(lines) % step:
                    raise _NotSimple(done)
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
                    ok = _all_start(heads, b">") and (not seqs or b"\n>" not in b"\n" + b"\n".join(seqs))
                else:
                    n4 = len(lines) // 4
                    seqs, qb = lines[1::4][:n4], lines[3::4][:n4]
                    ok = (_all_start(heads, b"@") and _all_start(lines[2::4], b"+")
                          and list(map(len, seqs)) == list(map(len, qb)))
                if not ok:
                    raise _NotSimple(done)
                k = whole // step
                heads, seqs = heads[:k], seqs[:k]
                quals = [None] * k if step == 2 else [x.decode("ascii") for x in qb[:k]]
                names = _names(heads)
            except (IndexError, UnicodeDecodeError):
                raise _NotSimple(done) from None
            for i in range(0, len(names), chunk):
                yield names[i:i + chunk], seqs[i:i + chunk], quals[i:i + chunk]
                done += len(names[i:i + chunk])
            if not block:
                return
