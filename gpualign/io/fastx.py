"""FASTA/FASTQ records (plain, gzip, bgzip, '-' for stdin) in chunks, so that the Python work per
record stays small.

Strict 2-line FASTA / 4-line FASTQ take the fast path (fastx_fast.py), anything else htslib's parser
(fastx_htslib.py). This module adds what a user needs: a sniff that tells "empty" from "not
FASTA/FASTQ", errors that name the file and record, and a check of the sequence bytes. Big files are
parsed in other processes by fastx_parts.py; pair_reader.py makes PairBatches of two files.
"""

from __future__ import annotations

import gzip
import os
import zlib
from typing import Iterator

import numpy as np

from .. import pack
from ..errors import InputError, RecordError
from .fastx_fast import _NotSimple, _simple_chunks
from .fastx_htslib import _htslib_chunks

STDIN = "-"


def display_name(path: str) -> str:
    return "stdin" if path == STDIN else path


def gzipped(path: str) -> bool:
    """path starts with the gzip magic (gzip or bgzip)."""
    with open(path, "rb") as fh:
        return fh.read(2) == b"\x1f\x8b"


def sniff(path: str) -> None:
    """Raise InputError if path is missing, unreadable, empty or not FASTA/FASTQ."""
    if path == STDIN:
        return
    if os.path.isdir(path):
        raise InputError(f"{path}: is a directory, not a FASTA/FASTQ file")
    try:
        opener = gzip.open if gzipped(path) else open
        with opener(path, "rb") as fh:
            head = fh.read(1 << 16)
            while head and not head.strip():
                head = fh.read(1 << 16)
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except PermissionError:
        raise InputError(f"{path}: permission denied") from None
    except (EOFError, zlib.error, gzip.BadGzipFile) as e:
        raise InputError(f"{path}: corrupt or truncated gzip data ({e})") from None
    except OSError as e:
        raise InputError(f"{path}: cannot read ({e.strerror or e})") from None
    first = head.lstrip()[:1]
    if not first:
        raise InputError(f"{path}: empty file (no FASTA/FASTQ records)")
    if first not in (b">", b"@"):
        raise InputError(f"{path}: not FASTA or FASTQ (first character {first.decode('latin-1')!r}, "
                         "expected '>' or '@')")


CHUNK = 16384  # records taken from htslib per Python step


def record_chunks(path: str, chunk: int = CHUNK, fast: bool = True) -> Iterator[tuple[list, list, list]]:
    """Yield (names, sequences (str or bytes), qualities or None) lists of up to chunk records each;
    errors name the file and record. Strict 2-line FASTA / 4-line FASTQ files take a fast path (many
    short records; fast=False skips it: it re-copies a record that spans its 8 MB blocks);
    any other layout (multi-line FASTA, CR line ends, damage) is parsed by htslib."""
    sniff(path)
    n = 0
    if path != STDIN and fast:
        try:
            for item in _simple_chunks(path, chunk):
                n += len(item[0])
                yield item
            return
        except _NotSimple as e:
            n = e.records
    yield from _htslib_chunks(path, chunk, n, display_name(path))


def records(path: str, chunk: int = CHUNK, fast: bool = True) -> Iterator[tuple[str, str, str | None]]:
    """(name, sequence, quality or None) per record (chunk=1, fast=False for genomes: one long record
    in memory at a time, read by htslib)."""
    for names, seqs, quals in record_chunks(path, chunk, fast):
        yield from zip(names, seqs, quals)


def encode(seqs: list, path: str, first_record: int) -> bytes:
    """Join, check and case-fold a chunk's sequences (str or bytes)."""
    if seqs and isinstance(seqs[0], bytes):
        raw = b"".join(seqs)
        bad = pack.first_bad_byte(np.frombuffer(raw, dtype=np.uint8))
        joined = raw.decode("latin-1") if bad >= 0 else ""
    else:
        joined = "".join(seqs)
        try:
            raw = joined.encode("ascii")
        except UnicodeEncodeError as e:
            bad = e.start
        else:
            bad = pack.first_bad_byte(np.frombuffer(raw, dtype=np.uint8))
    if bad >= 0:
        lens = np.fromiter((len(s) for s in seqs), dtype=np.int64, count=len(seqs))
        k = int(np.searchsorted(np.cumsum(lens), bad, side="right"))
        ch = joined[bad]
        raise RecordError(display_name(path), first_record + k,
                          f"invalid sequence character {ch!r} (code {ord(ch)}); printable ASCII only")
    return raw.translate(pack.FOLD)


def encoded_chunks(path: str, chunk: int = CHUNK) -> Iterator[tuple[list, bytes, np.ndarray, list]]:
    """(names, sequences joined + checked + case-folded, their lengths, qualities) per chunk."""
    n = 0
    for names, seqs, quals in record_chunks(path, chunk):
        buf = encode(seqs, path, n + 1)
        yield names, buf, np.fromiter(map(len, seqs), dtype=np.int64, count=len(seqs)), quals
        n += len(names)


def names_and_lengths(path: str) -> Iterator[tuple[str, int]]:
    """(name, length) of every record: the first pass SAM headers need."""
    for name, seq, _ in records(path):
        yield name, len(seq)
