"""`gpualign paf`: one primary record per read.

A read with several candidates gets one primary record: the candidate with the best re-aligned score
(the lowest penalty, AS:i the highest) among those aligned, ties to the first in the PAF; when none
aligned, the first. The others are secondary: SAM/BAM FLAG 256 (with 4 when unaligned), and in PAF
output a `tp:A` tag the candidate carries (minimap2 writes one: P, S, or I/i for an inversion's) is
rewritten to P or S. The rule runs here, after alignment and before any writer, on the scores the
engines returned: the same for the CPU and GPU engines and a cluster.

A read's candidates may be anywhere in the PAF. count_reads' first pass over the PAF counts the
candidates of each read (by a hash of its name, 8 bytes a line; only reads with several are kept). A
batch goes on to the writer, in order, once every read of it with several candidates has all of them
aligned or skipped (--skip-bad); batches wait meanwhile, without their sequence bytes unless the writer
needs them, and (but the newest two) without the reads SAM/BAM records hold, fetched again as they go
on. Candidates grouped by read (minimap2's order) hold back at most the batch that ends a read; a read
whose candidates are far apart (a PAF sorted by target) holds back the batches between them: their
candidates and alignments.
"""

from __future__ import annotations

import dataclasses
from collections import deque

import numpy as np

from .io import paf as P
from .records import OK

PRIMARY_KEY = "primary"  # batch.meta's array (the writers read it): True for a read's primary record
KEEP_FULL = 2  # waiting batches (the newest) that keep their reads' bytes for SAM/BAM (refetch)


def count_reads(path: str) -> tuple[dict, bool]:
    """(hash(read name) -> number of candidates, for the reads with more than one in the PAF at path (every
    line with a first column counts: a malformed one is counted and later skipped); whether each read's
    lines are together, as minimap2 writes them: SAM's GO:query)."""
    hashes = []
    for _, lines in P.line_chunks(path, lambda: 1 << 16):
        names = (P.first_column(x) for x in lines)
        hashes.append(np.fromiter((hash(n) for n in names if n is not None), dtype=np.int64))
    if not hashes:
        return {}, True
    h = np.concatenate(hashes)
    uniq, counts = np.unique(h, return_counts=True)
    several = counts > 1
    grouped = 1 + int(np.count_nonzero(h[1:] != h[:-1])) == len(uniq)  # (one run of lines a read)
    return dict(zip(uniq[several].tolist(), counts[several].tolist())), grouped


@dataclasses.dataclass
class _Read:
    pending: int  # candidates not aligned (nor skipped) yet
    unwritten: int  # candidates not handed on yet
    best: tuple | None = None  # (failed, penalty, input position) of the best candidate so far


class Primaries:
    """The writer interface (submit, flush, discard) in front of sink: each batch's meta gets
    PRIMARY_KEY, and batches are handed on in order once decided (module docstring). skipped: the run's
    list of skipped candidates' errors (P.CandidateError, --skip-bad), read as it grows."""

    def __init__(self, sink, several: dict, skipped: list, keep_seq: bool, refetch=None):
        """refetch(candidates) -> [(full query, quality)]: what batch.meta holds of them for SAM/BAM
        (io.paf.Queries.get), dropped from batches waiting behind the newest KEEP_FULL and fetched again
        when they go on; None: nothing to drop (PAF output)."""
        self.sink, self.several, self.skipped, self.keep_seq = sink, several, skipped, keep_seq
        self.refetch = refetch
        self.reads: dict = {}  # name -> _Read, for reads with several candidates not all handed on
        self.held: deque = deque()  # [batch, res, done, names of reads with several candidates]
        self.seen_skipped = 0

    def _read(self, name: str) -> _Read:
        r = self.reads.get(name)
        if r is None:
            n = self.several[hash(name)]
            r = self.reads[name] = _Read(n, n)
        return r

    def _take_skipped(self) -> None:
        while self.seen_skipped < len(self.skipped):
            name = getattr(self.skipped[self.seen_skipped], "qname", None)
            self.seen_skipped += 1
            if name is not None and hash(name) in self.several:
                r = self._read(name)
                r.pending -= 1
                r.unwritten -= 1
                self._forget(name, r)

    def _forget(self, name: str, r: _Read) -> None:
        if r.unwritten <= 0:
            del self.reads[name]

    def submit(self, batch, res, done) -> None:
        self._take_skipped()
        names = []
        ok = res.status == OK
        if res.has_cigar:  # an empty alignment (of an empty query range) is written unmapped: ranked with the failed
            ok = ok & (np.asarray(res.cigar_len) > 0)
        for i, c in enumerate(batch.meta["cands"]):
            if hash(c.qname) not in self.several:
                continue
            r = self._read(c.qname)
            r.pending -= 1
            key = (not ok[i], int(res.score[i]) if ok[i] else 0, int(batch.index[i]))
            if r.best is None or key < r.best:
                r.best = key
            names.append(c.qname)
        if names or not self.keep_seq:  # only the meta and the lengths are written while it waits (--cs: the
            # bytes too, copied out of the reader processes' shared memory, which the wait could hold without bound);
            # without --cs no batch keeps its bytes (a batch behind a waiting one would hold the reader's block,
            # or the GPU's copy where its sequences were laid out there)
            batch = dataclasses.replace(batch, seq=np.array(batch.seq) if self.keep_seq else np.zeros(0, np.uint8),
                                        device=None)
        self.held.append([batch, res, done, names])
        self._release(final=False)
        if self.refetch is not None and len(self.held) > KEEP_FULL:  # the reads' bytes not kept meanwhile
            entry = self.held[-KEEP_FULL - 1]
            if entry[0].meta.get("full_query") is not None:
                entry[0] = dataclasses.replace(entry[0], meta={**entry[0].meta, "full_query": None, "full_qual": None})

    def _release(self, final: bool) -> None:
        while self.held:
            batch, res, done, names = self.held[0]
            if not final and any(self.reads[n].pending > 0 for n in names):
                return
            self.held.popleft()
            primary = np.ones(batch.n, dtype=bool)
            if names:
                for i, c in enumerate(batch.meta["cands"]):
                    r = self.reads.get(c.qname)
                    if r is not None:
                        primary[i] = r.best is not None and r.best[2] == int(batch.index[i])
                for n in names:
                    r = self.reads[n]
                    r.unwritten -= 1
                    self._forget(n, r)
            meta = {**batch.meta, PRIMARY_KEY: primary}
            if "full_query" in meta and meta["full_query"] is None:
                meta["full_query"], meta["full_qual"] = (list(x) for x in zip(*self.refetch(meta["cands"])))
            batch.meta = meta
            self.sink.submit(batch, res, done)

    def flush(self) -> None:
        """Everything left handed on (a read whose count was not reached: the best of what came)."""
        self._take_skipped()
        self._release(final=True)
        self.sink.flush()

    def discard(self) -> None:
        self.held.clear()
        getattr(self.sink, "discard", lambda: None)()
