"""FASTA/FASTQ records (plain, gzip, bgzip, '-' for stdin) in chunks, so that the Python work per
record stays small.

Strict 2-line FASTA / 4-line FASTQ take the fast path (fastx_fast.py), anything else the strict parser
(fastx_strict.py, whose docstring states the rules; both check the sequence characters). This module adds
what a user needs: a sniff that tells "empty", "compressed as gpualign cannot read" and "not FASTA/FASTQ"
apart, and errors that name the file, record and line. Big files are parsed in other processes by
fastx_parts.py; pair_reader.py makes PairBatches of two files.
"""

from __future__ import annotations

import contextlib
import gzip
import os
import sys
import zlib
from typing import Iterator

import numpy as np

from .. import pack
from ..errors import InputError, RecordError
from .bgzf import cut_short, members
from .fastx_fast import READ_ERRORS, NotSimple, open_gz_from, simple_chunks
from .fastx_strict import (compression_error, not_fastx, open_path, open_stream, prefixed, strict_chunks,
                           unsupported_compression)

STDIN = "-"


_SHOWN: dict = {}  # a spooled copy's path -> the name messages give its input (faidx.spool)


def display_name(path: str) -> str:
    return "stdin" if path == STDIN else _SHOWN.get(path, path)


def shown_as(path: str, name: str) -> None:
    """Messages about path give it as `name` (a copy of stdin or a pipe in the scratch directory)."""
    _SHOWN[path] = name


def gzipped(path: str) -> bool:
    """path starts with the gzip magic (gzip or bgzip)."""
    with open(path, "rb") as fh:
        return fh.read(2) == b"\x1f\x8b"


def streamed(path: str) -> bool:
    """Whether path can be read only once: stdin ('-'), a pipe (a shell's <(...)), a device."""
    return path == STDIN or (os.path.exists(path) and not os.path.isfile(path) and not os.path.isdir(path))


def sniff(path: str, empty_ok: bool = False) -> bool:
    """Raise InputError if path is missing, unreadable, empty (unless empty_ok) or not FASTA/FASTQ; a stream
    (stdin, a pipe) is not read here (its bytes would be gone): it is checked as it is read. Returns whether
    path is an empty file (nothing but whitespace)."""
    if streamed(path):
        return False
    name = display_name(path)  # (a scratch copy of stdin: 'stdin')
    if os.path.isdir(path):
        raise InputError(f"{name}: is a directory, not a FASTA/FASTQ file")
    try:
        with open(path, "rb") as fh:
            kind = unsupported_compression(fh.read(8))
        if kind:
            raise compression_error(name, kind)
        if cut_short(path):
            raise InputError(f"{name}: bgzip file without its end-of-file block: cut short, or other gzip data "
                             "after its blocks? (htslib: \"EOF marker is absent\"); copy or compress it again")
        opener = gzip.open if gzipped(path) else open
        with opener(path, "rb") as fh:
            head = fh.read(1 << 16)
            while head and not head.strip():
                head = fh.read(1 << 16)
    except FileNotFoundError:
        raise InputError(f"{name}: no such file") from None
    except PermissionError:
        raise InputError(f"{name}: permission denied") from None
    except (EOFError, zlib.error, gzip.BadGzipFile) as e:
        raise InputError(f"{name}: corrupt or truncated gzip data ({e})") from None
    except OSError as e:
        raise InputError(f"{name}: cannot read ({e.strerror or e})") from None
    first = head.lstrip()[:1]
    if not first:
        if empty_ok:
            return True
        raise empty_file(name)
    if first not in (b">", b"@"):
        raise not_fastx(name, head.lstrip())
    return False


def empty_file(name: str, why: str = "") -> InputError:
    return InputError(f"{name}: empty file (no FASTA/FASTQ records{'; ' + why if why else ''})")


CHUNK = 16384  # records per chunk


def record_chunks(path: str, chunk: int = CHUNK, fast: bool = True, symbols: bytes = b"",
                  start: tuple = (0, 0, 1), packed: bool = False) -> Iterator[tuple[list, list, list]]:
    """Yield (names, sequences (bytes, as written), qualities (str) or None) lists of up to chunk records
    each; errors name the file, record and line. Sequences hold letters and `symbols` (pack.symbols).
    Strict 2-line FASTA / 4-line FASTQ files take a fast path (many short records; fast=False skips it:
    it re-copies a record that spans its 8 MB blocks); the strict parser reads any other layout
    (multi-line records, CR line ends) and stdin, and finds the line of an error. start: (byte offset,
    records before it, its line number[, a binary stream of the file from there on]) of a record's start (in
    the inflated bytes of gzip), to read on from there. packed: the fast path gives names and FASTQ qualities
    as Names (one buffer each; the strict parser's are lists still)."""
    sniff(path)
    name = display_name(path)
    if start[0]:
        yield from _chunks_from(path, name, chunk, symbols, *start, packed=packed)
        return
    if streamed(path):
        try:
            raw = sys.stdin.buffer if path == STDIN else open(path, "rb")
        except OSError as e:
            raise InputError(f"{name}: cannot read ({e.strerror or e})") from None
        with contextlib.nullcontext(raw) if path == STDIN else raw:
            fh, n, line = open_stream(raw, name), 0, 1
            if fast:
                try:
                    for item in simple_chunks(path, chunk, symbols=symbols, stream=fh, packed=packed):
                        n += len(item[0])
                        yield item
                    if n == 0:  # (as the strict parser says it; a file's emptiness is found by sniff)
                        raise InputError(f"{name}: no FASTA/FASTQ records (empty input)")
                    return
                except NotSimple as e:  # the strict parser reads on from the bytes the fast path held
                    n, line, fh = e.records, e.line, prefixed(e.pending, fh)
            yield from strict_chunks(fh, chunk, name, symbols, n, line)
        return
    n, offset, line = 0, 0, 1
    if fast:
        try:
            for item in simple_chunks(path, chunk, symbols=symbols, packed=packed):
                n += len(item[0])
                yield item
            return
        except NotSimple as e:
            n, offset, line = e.records, e.offset, e.line
    fh, skip = _open_near(path, offset)
    with fh:
        try:
            _skip(fh, skip, not gzipped(path))
        except READ_ERRORS as e:  # (inflated again up to where the fast path stopped, it stops before: a
            # threaded inflater reading ahead of what is asked met the damage that stopped the fast path)
            raise RecordError(name, n + 1, f"corrupt or truncated input in this record or a later one ({e})",
                              line) from None
        yield from strict_chunks(fh, chunk, name, symbols, n, line)


def _chunks_from(path: str, name: str, chunk: int, symbols: bytes, offset: int, n: int, line: int,
                 stream=None, packed: bool = False):
    """record_chunks of a file from a record starting at byte offset (of the inflated bytes, for gzip: read
    again up to there, for bgzip from the member holding it, unless stream, a binary stream of the file from
    that offset on, is given; it is closed at the end) after n records, at line."""
    skip = offset
    if stream is None:
        try:
            fh, skip = _open_near(path, offset)
        except OSError as e:
            raise InputError(f"{name}: cannot read ({e.strerror or e})") from None
    else:
        fh = stream
    with fh:
        try:
            if stream is None:
                _skip(fh, skip, not gzipped(path))
        except READ_ERRORS as e:  # (the first inflater read up to here: the damage is further on, where
            # inflating it again stopped, reading ahead)
            raise RecordError(name, n + 1, f"corrupt or truncated input in this record or a later one ({e})",
                              line) from None
        try:
            yield from simple_chunks(path, chunk, symbols=symbols, stream=fh, packed=packed)
            return
        except NotSimple as e:  # the strict parser reads on from the bytes the fast path held
            n, line, rest = n + e.records, line + e.line - 1, prefixed(e.pending, fh)
        yield from strict_chunks(rest, chunk, name, symbols, n, line)


def _open_near(path: str, offset: int):
    """(path's bytes (inflated) as a binary stream from at most `offset`, the bytes to go past in it): a bgzip
    file from the member that holds offset (its index: bgzf.members, walked only for an offset past 0), any other
    from its start."""
    index = members(path) if offset and gzipped(path) else None
    if index is None:
        return open_path(path), offset
    coff, uoff = index
    i = int(np.searchsorted(uoff, offset, "right")) - 1
    return open_gz_from(path, int(coff[i])), offset - int(uoff[i])


def _skip(fh, n: int, plain: bool) -> None:
    """Go past the first n bytes of fh (inflated input: read them)."""
    if plain:
        fh.seek(n)
        return
    while n > 0:
        n -= len(fh.read(min(n, 1 << 23))) or n


def records(path: str, chunk: int = CHUNK, fast: bool = True,
            symbols: bytes = b"") -> Iterator[tuple[str, bytes, str | None]]:
    """(name, sequence, quality or None) per record (chunk=1, fast=False for genomes: one long record
    in memory at a time, read by the strict parser)."""
    for names, seqs, quals in record_chunks(path, chunk, fast, symbols):
        yield from zip(names, seqs, quals)


def encode(seqs: list) -> bytes:
    """A chunk's sequences (checked by the reader) joined and case-folded."""
    return b"".join(seqs).translate(pack.FOLD)


def folded_letters(seq: bytes) -> np.ndarray:
    """A sequence of letters only (the reader's, checked with no symbols) case-folded, as uint8: ASCII's
    lower-case bit cleared (a fifth of a translate's time on 48 Mbp)."""
    return np.bitwise_and(np.frombuffer(seq, np.uint8), np.uint8(0xDF))


def encoded_chunks(path: str, chunk: int = CHUNK, symbols: bytes = b"",
                   start: tuple = (0, 0, 1)) -> Iterator[tuple[list, bytes, np.ndarray, list]]:
    """(names, sequences joined + case-folded, their lengths, qualities) per chunk (start: record_chunks'); names
    and qualities are Names where the fast path read them."""
    for names, seqs, quals in record_chunks(path, chunk, symbols=symbols, start=start, packed=True):
        yield names, encode(seqs), np.fromiter(map(len, seqs), dtype=np.int64, count=len(seqs)), quals


def names_and_lengths(path: str, symbols: bytes = b"") -> Iterator[tuple[str, int]]:
    """(name, length) of every record: the first pass SAM headers need."""
    for name, seq, _ in records(path, symbols=symbols):
        yield name, len(seq)


def target_lengths(path: str, symbols: bytes = b"", unique: bool = False, sequences: bool = True) -> dict:
    """Target names -> lengths for a SAM header (@SQ): a name twice with different lengths or different
    sequences (same_sequences) is an error, and with unique a name twice at all (genome: record i of the
    targets is a sequence of its own, which one @SQ line could not tell from another of its name); sequences
    False: a name's records not compared (genome --target-record: one record aligned). A chunk of records at a
    time (a dict of it, merged when no name in it is seen twice), one record at a time only in a
    chunk that repeats a name."""
    targets: dict = {}
    repeated: set = set()
    done = 0  # records before the chunk
    for names, seqs, _ in record_chunks(path, CHUNK, symbols=symbols):
        chunk = dict(zip(names, map(len, seqs)))
        if len(chunk) == len(names) and not (len(targets) and not chunk.keys().isdisjoint(targets.keys())):
            targets.update(chunk)
            done += len(names)
            continue
        for i, (name, seq) in enumerate(zip(names, seqs)):
            if name in targets:
                if unique:
                    raise InputError(f"{display_name(path)}: record {done + i + 1}: target name {name!r} appears "
                                     "twice: SAM/BAM name each target once (@SQ); rename it, or write PAF or TSV")
                repeated.add(name)
            old = targets.setdefault(name, len(seq))
            if old != len(seq):
                raise InputError(f"{display_name(path)}: target name {name!r} appears twice with different "
                                 f"lengths ({old} and {len(seq)}); SAM needs unique names (use PAF or TSV output)")
        done += len(names)
    if repeated and sequences:
        same_sequences(path, repeated, symbols)
    return targets


def same_sequences(path: str, repeated: set, symbols: bytes = b"") -> None:
    """An InputError unless each record of a name in repeated holds the letters (case aside) of the first
    record of that name: one @SQ line stands for one sequence. A second reading of the file, made only when a
    target name repeats (the names' lengths already agree)."""
    first: dict = {}  # name -> (its first record's number, that record as written)
    done = 0
    for names, seqs, _ in record_chunks(path, CHUNK, symbols=symbols):
        for i, (name, seq) in enumerate(zip(names, seqs)):
            if name in repeated:
                was = first.get(name)
                if was is None:
                    first[name] = (done + i + 1, seq)
                elif seq != was[1] and seq.translate(pack.FOLD) != was[1].translate(pack.FOLD):
                    raise InputError(f"{display_name(path)}: record {done + i + 1}: target name {name!r} appears "
                                     f"again with a different sequence (record {was[0]} has the same name and "
                                     "length); SAM/BAM give a name one sequence (@SQ): rename one, or write PAF "
                                     "or TSV")
        done += len(names)
