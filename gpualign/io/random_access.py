"""Random access by record name to any FASTA/FASTQ input, whatever its form (`gpualign paf`).

In place when the file allows it: plain FASTA/FASTQ through a memory map, bgzip FASTA through htslib
(io.faidx; the index beside the file, or in a temporary directory when its directory takes no files).
A pipe (a shell's <(...)) is first spooled as it comes into a scratch file, then read as that file.
Anything else (gzip that is not bgzip, bgzip FASTQ, whose qualities htslib does not give, a layout htslib's
indexer refuses, and stdin) is read once, in order, into a scratch copy: the sequences (checked and
case-folded), then per chunk their qualities, back to back without headers or line ends, and a .fai (one
line of one "line" per record, six columns when there are qualities) written alongside, so the copy opens
as any indexed file. The copy is
as large as the decompressed sequences and qualities and goes in io.faidx.scratch_dir() (under TMPDIR),
removed at exit; memory holds a chunk of records while copying, then the index (IndexedFasta), as
for an input indexed in place.
"""

from __future__ import annotations

import gzip

import numpy as np

from ..errors import InputError, RecordError
from ..records import Names
from . import fastx
from .faidx import (IndexedFasta, Unindexable, identity, plain_gzip, scratch_error, scratch_get, scratch_path,
                    scratch_put, spool)


def open_indexed(path: str, qualities: bool = False) -> IndexedFasta:
    """path by random access, checked first (fastx.sniff); qualities: a FASTQ's qualities are wanted
    (bgzip FASTQ is then copied). A pipe or a device is spooled as it comes first, then read as a file."""
    if path != fastx.STDIN and fastx.streamed(path):
        key = ("spool", identity(path))
        if scratch_get(key) is None:
            scratch_put(key, spool(path))
        try:
            fastx.sniff(scratch_get(key))
        except InputError as e:
            raise InputError(str(e).replace(scratch_get(key), path)) from None
        path = scratch_get(key)
    else:
        fastx.sniff(path)
    if path != fastx.STDIN and not _copied(path, qualities):
        try:
            return IndexedFasta(path)
        except Unindexable:  # (a layout htslib's indexer refuses: the reader takes it, into a copy)
            pass
    key = ("copy", path if path == fastx.STDIN else identity(path))  # forked readers find the copy
    if scratch_get(key) is None:
        scratch_put(key, _copy(path))
    return IndexedFasta(scratch_get(key))


def _copied(path: str, qualities: bool) -> bool:
    """Whether path cannot be read in place: gzip not bgzip, or bgzip FASTQ when qualities are wanted."""
    if plain_gzip(path):
        return True
    if not (qualities and fastx.gzipped(path)):
        return False
    try:
        with gzip.open(path, "rb") as fh:
            return fh.read(1 << 12).lstrip()[:1] == b"@"
    except (OSError, EOFError):
        return False  # the in-place path reports the damage


def _copy(path: str) -> str:
    """The scratch copy of path's records (module docstring); its .fai beside it."""
    name = fastx.display_name(path)
    out = scratch_path(path, ".seq")
    try:
        _write_copy(path, name, out)
    except OSError as e:
        raise scratch_error(path, e) from None
    scratch_put(identity(out), (out + ".fai", None))  # its index as written (whatever the two files' times)
    return out


def _write_copy(path: str, name: str, out: str) -> None:
    seen: set = set()
    fastq = None
    pos = done = 0
    with open(out, "wb") as data, open(out + ".fai", "w") as fai:
        for names, seqs, lengths, quals in fastx.encoded_chunks(path):
            if fastq is None:  # (the reader refuses a file of both kinds, and qualities of other lengths)
                fastq = quals[0] is not None
            for k, n in enumerate(names):
                if n in seen:
                    raise RecordError(name, done + k + 1, f"name {n!r} again: a name must tell its record apart")
                seen.add(n)
            offsets = pos + np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64)
            data.write(seqs)
            pos += len(seqs)
            cols = [names, lengths.tolist(), offsets.tolist(), lengths.tolist(), lengths.tolist()]
            if fastq:
                data.write(quals.packed() if isinstance(quals, Names) else "".join(quals).encode("latin-1"))
                cols.append((offsets + (pos - offsets[0])).tolist() if len(names) else [])
                pos += len(seqs)
            fai.writelines("\t".join(map(str, row)) + "\n" for row in zip(*cols))
            done += len(names)
    if not done:
        raise InputError(f"{name}: no FASTA/FASTQ records")
