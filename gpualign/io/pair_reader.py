"""Record i of one FASTA/FASTQ file with record i of another, in PairBatches of bounded size."""

from __future__ import annotations

from collections import deque
from itertools import chain
from typing import Iterator

import numpy as np

from ..errors import InputError
from ..records import Names, PairBatch, offsets_from_lengths
from .fastx import CHUNK, STDIN, display_name
from .fastx_parts import PARALLEL_MIN_BYTES, Chunks

class _Buffered:
    """Encoded records of one file, taken in chunks and handed out in any count."""

    def __init__(self, path: str, min_bytes: int = PARALLEL_MIN_BYTES, workers: int = 1, symbols: bytes = b"",
                 start: tuple = (0, 0, 1)):
        self.chunks = Chunks(path, min_bytes, workers, symbols, start)
        self.pieces: deque = deque()  # [sequence bytes, lengths, Names, qualities] not yet taken
        self.lens = np.zeros(0, np.int64)  # lengths of every buffered record
        self.name_lens = np.zeros(0, np.int64)  # and of their names
        self.count = 0  # records buffered
        self.done = False

    def fill(self, want: int) -> int:
        while self.count < want and not self.done:
            try:
                n, buf, ln, q = next(self.chunks)
            except StopIteration:
                self.done = True
                break
            seq = buf if isinstance(buf, np.ndarray) else np.frombuffer(buf, dtype=np.uint8)
            names = Names.of(n)
            self.pieces.append([seq, ln, names, q])
            self.lens = np.concatenate([self.lens, ln])
            self.name_lens = np.concatenate([self.name_lens, names.length])
            self.count += len(ln)
        return self.count

    def take(self, k: int):
        """(Names, quals, sequence byte pieces (arrays, in order), lengths) of the next k records."""
        lens, self.lens, self.name_lens = self.lens[:k], self.lens[k:], self.name_lens[k:]
        self.count -= k
        names, quals, parts, need = [], [], [], k
        while need:
            buf, ln, nm, q = self.pieces[0]
            if len(ln) <= need:
                self.pieces.popleft()
                cut = len(buf)
            else:
                cut = int(ln[:need].sum())
                self.pieces[0] = [buf[cut:], ln[need:], nm[need:], q[need:]]
                ln, nm, q = ln[:need], nm[:need], q[:need]
            parts.append(buf[:cut])
            names.append(nm)
            quals.append(q)
            need -= len(ln)
        # (qualities: a list per chunk (None per record for FASTA; str from the strict parser), or Names: from the
        # fast path, copied out of a part's shared memory so that the batch does not keep the part mapped)
        if any(isinstance(q, Names) for q in quals):
            joined = Names.concat(quals)  # (several pieces: joined into a new buffer already)
            if len(quals) == 1:
                joined = Names.joined(np.array(joined.packed()), joined.length)
            return Names.concat(names), joined, parts, lens
        return Names.concat(names), list(chain.from_iterable(quals)), parts, lens

    def close(self) -> None:
        self.chunks.close()


def read_pairs(path_a: str, path_b: str, batch_bases: int, batch_pairs: int,
               parallel_min_bytes: int = PARALLEL_MIN_BYTES, workers: int = 1,
               symbols: bytes = b"") -> Iterator[PairBatch]:
    """Record i of A with record i of B, in batches of bounded size (bases and pairs). Big inputs start
    their parsing processes now (call this before starting threads or the GPU), batches come lazily;
    workers > 1: that many per plain or bgzip file, each parsing a part of it; symbols: the non-letter
    bytes sequences may hold (pack.symbols)."""
    if path_a == STDIN and path_b == STDIN:
        raise InputError("only one of the two inputs can be '-' (stdin)")
    return PairReader(path_a, path_b, batch_bases, batch_pairs, parallel_min_bytes, workers, symbols)


def read_on(path_a: str, path_b: str, starts: list, batch_bases: int, batch_pairs: int, symbols: bytes = b"",
            count: int = 0) -> Iterator[PairBatch]:
    """read_pairs' batches from a record of each file on: starts[i] = (byte offset, records before it, its
    line[, the file as a stream from there on]) of file i (in its inflated bytes, for gzip), count the pairs
    before them; parsed in this process (no worker forked)."""
    a, b = (_Buffered(path, 1 << 62, symbols=symbols, start=start) for path, start in zip((path_a, path_b), starts))
    return _batches(a, b, path_a, path_b, batch_bases, batch_pairs, lambda n: np.empty(n, np.uint8), count)


class PairReader:
    """The batches of read_pairs; abort() stops the parsing processes from any thread (on failure)."""

    def __init__(self, path_a, path_b, batch_bases, batch_pairs, parallel_min_bytes, workers=1, symbols=b""):
        self.a = _Buffered(path_a, parallel_min_bytes, workers, symbols)
        try:
            self.b = _Buffered(path_b, parallel_min_bytes, workers, symbols)
        except BaseException:
            self.a.chunks.abort()
            raise
        self.alloc = np.empty  # sequence buffers of the batches: set to engines.host_allocator(chain)
        self.gen = _batches(self.a, self.b, path_a, path_b, batch_bases, batch_pairs,
                            lambda n: self.alloc(n, dtype=np.uint8))

    def __iter__(self):
        return self

    def __next__(self) -> PairBatch:
        return next(self.gen)

    def abort(self) -> None:
        self.a.chunks.abort()
        self.b.chunks.abort()


def _batches(a: _Buffered, b: _Buffered, path_a: str, path_b: str, batch_bases: int,
             batch_pairs: int, alloc, count: int = 0) -> Iterator[PairBatch]:
    """PairBatches of a's and b's records; count: pairs before them (the first batch's index). A batch holds at
    most batch_bases bases and batch_bases bytes of names (so that long names cannot make a whole file one batch)."""
    try:
        while True:
            want = CHUNK
            while True:  # enough records buffered for one batch, or the end of a file
                avail = min(a.fill(want), b.fill(want))
                total = int(a.lens[:avail].sum() + b.lens[:avail].sum())
                names = int(a.name_lens[:avail].sum() + b.name_lens[:avail].sum())
                if avail < want or max(total, names) >= batch_bases or avail >= batch_pairs:
                    break
                want += CHUNK
            if avail == 0:
                if a.count or b.count:
                    longer, shorter = (path_a, path_b) if a.count else (path_b, path_a)
                    raise InputError(f"{display_name(longer)} has more records than {display_name(shorter)} "
                                     f"({display_name(shorter)} ends after {count} record{'s' * (count != 1)})")
                return
            # as many pairs as the size bounds allow (at least one)
            k = min(int(np.searchsorted(np.cumsum(a.lens[:avail] + b.lens[:avail]), batch_bases, side="left")),
                    int(np.searchsorted(np.cumsum(a.name_lens[:avail] + b.name_lens[:avail]), batch_bases,
                                        side="left"))) + 1
            k = max(1, min(k, avail, batch_pairs))
            qn, qq, qparts, ql = a.take(k)
            tn, _, tparts, tl = b.take(k)
            seq = alloc(sum(map(len, qparts)) + sum(map(len, tparts)))
            at = 0
            for part in qparts + tparts:  # one copy from the chunks into the batch
                seq[at:at + len(part)] = part
                at += len(part)
            nq = int(ql.sum())
            yield PairBatch(seq, offsets_from_lengths(ql), ql, offsets_from_lengths(tl) + nq, tl,
                            np.arange(count, count + k, dtype=np.int64), qn, tn, qq)
            count += k
    finally:
        a.close()
        b.close()
