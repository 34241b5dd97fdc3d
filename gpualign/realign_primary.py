"""`gpualign paf`: each read's candidates ranked as minimap2 ranks its own.

Each aligned candidate gets a score with a reward for the bases it aligns, so that a longer alignment can beat a
shorter one of fewer edits: a(query span + target span) - penalty, which is twice the Smith-Waterman-Gotoh score
equivalent to the gap-affine penalties (x = 2(a + b), o = 2q, e = 2e' + a) with a = min(x/6, e): a mismatch costs
twice a match's reward, as in minimap2's defaults (A = 2, B = 4). With the same spans, the order is the
penalty's (AS:i). In that order (ties: the first in the PAF; failed candidates and empty query ranges last), a
candidate whose query range overlaps a chosen one's by more than half the shorter range is secondary; the others
are chosen: the first is the read's primary, the rest supplementary (a chimeric read's other parts: minimap2's
mm_set_parent, mask level 0.5). When none aligned, the first in the PAF is primary. The writers read RANK_KEY
(SAM/BAM: FLAG 256 secondary, 2048 supplementary, secondary MAPQ 0, SA:Z on the chosen records of a read with
several; PAF: tp:A:P for the chosen, tp:A:S and MAPQ 0 for secondaries). The rule runs here, after alignment and
before any writer, on what the engines returned: the same for the CPU and GPU engines and a cluster.

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
from .records import OK, PRIMARY, RANK_KEY, SA_KEY, SECONDARY, SUPPLEMENTARY

KEEP_FULL = 2  # waiting batches (the newest) that keep their reads' bytes for SAM/BAM (refetch)
MASK_LEVEL = 0.5  # minimap2's -M: a query overlap above this share of the shorter range makes a secondary


def match_reward6(penalties) -> int:
    """6a for the penalties' equivalent score (module docstring): a = min(x/6, e)."""
    return min(penalties.mismatch, 6 * penalties.gap_extend)


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
    cands: list = dataclasses.field(default_factory=list)  # (sort key, input position, qs, qe, SA entry)
    ranks: dict | None = None  # input position -> rank, once decided
    sa: dict | None = None  # input position -> SA:Z value (SAM/BAM: the other chosen records of a read with several)

    def decide(self) -> None:
        order = sorted(self.cands)
        self.ranks, chosen = {}, []
        for key, pos, qs, qe, entry in order:
            if not chosen and not self.ranks:  # the best; the first in the PAF when none aligned
                rank = PRIMARY
            elif key[0] or any(min(qe, ce) - max(qs, cs) > MASK_LEVEL * min(qe - qs, ce - cs)
                               for _, _, cs, ce, _ in chosen):
                rank = SECONDARY
            else:
                rank = SUPPLEMENTARY
            self.ranks[pos] = rank
            if rank != SECONDARY and not key[0]:
                chosen.append((key, pos, qs, qe, entry))
        self.sa = {}
        if len(chosen) > 1 and all(c[4] is not None for c in chosen):
            for c in chosen:
                self.sa[c[1]] = "".join(o[4] for o in chosen if o is not c)


class Primaries:
    """The writer interface (submit, flush, discard) in front of sink: each batch's meta gets RANK_KEY (and
    SA_KEY with sa_entries), and batches are handed on in order once decided (module docstring). skipped: the
    run's list of skipped candidates' errors (P.CandidateError, --skip-bad), read as it grows. reward6:
    match_reward6 of the run's penalties."""

    def __init__(self, sink, several: dict, skipped: list, keep_seq: bool, reward6: int, refetch=None,
                 sa_entries=None):
        """refetch(candidates) -> [(full query, quality)]: what batch.meta holds of them for SAM/BAM
        (io.paf.Queries.get), dropped from batches waiting behind the newest KEEP_FULL and fetched again
        when they go on; None: nothing to drop (PAF output). sa_entries(batch, res, rows) -> the SA:Z entry
        of each row (SAM/BAM), None: no SA_KEY."""
        self.sink, self.several, self.skipped, self.keep_seq = sink, several, skipped, keep_seq
        self.reward6, self.refetch, self.sa_entries = reward6, refetch, sa_entries
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
        cands = batch.meta["cands"]  # (io.paf.Candidates)
        several = self.several
        rows = [i for i, name in enumerate(cands.qname) if hash(name) in several]
        if rows:
            ok = res.status == OK
            if res.has_cigar:  # an empty alignment (of an empty query range) is written unmapped: ranked as failed
                ok = ok & (np.asarray(res.cigar_len) > 0)
            qs, qe, ts, te = res.ranges(batch.q_len, batch.t_len)
            value = self.reward6 * (qe - qs + te - ts) - 6 * res.score.astype(np.int64)
            entries = self.sa_entries(batch, res, rows) if self.sa_entries is not None else [None] * len(rows)
            for i, entry in zip(rows, entries):
                c = cands[i]
                r = self._read(c.qname)
                r.pending -= 1
                # (global mode aligns an empty query range: deletions only; a zero-length target is written unmapped)
                aligned = bool(ok[i]) and c.qe > c.qs and c.tlen > 0
                key = (False, -int(value[i])) if aligned else (True, 0)
                r.cands.append((key, int(batch.index[i]), c.qs, c.qe, entry if aligned else None))
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
            rank = np.zeros(batch.n, dtype=np.int8)
            sa = [None] * batch.n
            if names:
                for i, qname in enumerate(batch.meta["cands"].qname):
                    r = self.reads.get(qname)
                    if r is not None:
                        if r.ranks is None:
                            r.decide()
                        pos = int(batch.index[i])
                        rank[i] = r.ranks.get(pos, SECONDARY)
                        sa[i] = r.sa.get(pos)
                for n in names:
                    r = self.reads[n]
                    r.unwritten -= 1
                    self._forget(n, r)
            meta = {**batch.meta, RANK_KEY: rank}
            if self.sa_entries is not None:
                meta[SA_KEY] = sa
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
