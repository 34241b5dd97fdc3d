"""CPU search engine: sassy-rs (the Sassy library's SIMD bit-parallel search) in worker processes, each
searching every pattern-strand in a part of the chunk. sassy's `search_all` reports every end position
with cost <= k; its own CIGARs are not used (hits.py aligns every hit the same way for every engine)."""

from __future__ import annotations

import multiprocessing as mp
import signal

import numpy as np

from ..errors import DeviceError
from . import alphabet as A
from .hits import Cands

PART = 1 << 22  # bases per task at least

_worker: dict = {}


def _init(patterns: list, alphabet: str, text_table: bytes, k: int, worker: bool = True) -> None:
    if worker:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent ends the workers
    import sassy

    _worker.update(searcher=sassy.Searcher(alphabet, rc=False), patterns=patterns, table=text_table, k=k)


def _search(task: list) -> list:
    """[(piece, codes, first reported index, offset)] -> [(piece, pattern-strands, ends + offset, costs)]."""
    s, k, table = _worker["searcher"], _worker["k"], _worker["table"]
    out = []
    for piece, codes, report_from, offset in task:
        text = codes.translate(table)
        ps_l, j_l, d_l = [], [], []
        for i, pat in enumerate(_worker["patterns"]):
            for hit in s.search_all(pat, text, k):
                j = hit.text_end - 1
                if j >= report_from:
                    ps_l.append(i)
                    j_l.append(j + offset)
                    d_l.append(hit.cost)
        out.append((piece, np.array(ps_l, np.int32), np.array(j_l, np.int64), np.array(d_l, np.int32)))
    return out


class SassyEngine:
    name = "cpu-sassy"
    gpu = False

    @classmethod
    def make(cls, pats, cfg) -> "SassyEngine":
        return cls(pats, cfg.k, cfg.rule, cfg.n_threads)

    def __init__(self, pats, k: int, rule: str, threads: int):
        try:
            import sassy  # noqa: F401
        except ImportError:
            raise DeviceError("the CPU search engine needs sassy-rs (pip install sassy-rs)") from None
        alphabet, ptable, self.ttable = A.sassy_profile(rule)
        self.patterns = [c.tobytes().translate(ptable) for c in pats.codes]
        self.k, self.threads = k, threads
        self.context, self.gap = self.geometry(pats, k)
        self.alphabet = alphabet
        self.pool = None

    @staticmethod
    def geometry(pats, k: int) -> tuple[int, int]:
        """(context, gap) of the text chunks this engine needs: the longest pattern-strand + k - 1, 16 PAD bytes."""
        return int(pats.lengths.max()) + k - 1, 16

    def start(self) -> None:
        if self.threads > 1 and self.pool is None:
            self.pool = mp.get_context("fork").Pool(self.threads, _init,
                                                    (self.patterns, self.alphabet, self.ttable, self.k))
        elif self.threads <= 1:
            _init(self.patterns, self.alphabet, self.ttable, self.k, worker=False)

    def close(self) -> None:
        if self.pool is not None:
            self.pool.terminate()
            self.pool.join()
            self.pool = None

    def aligner(self):
        """No aligner of its own: hits.py aligns the hits here."""
        return None

    def submit(self, chunk):
        """(The GPU engine's two steps: here the search runs at collect.)"""
        return chunk

    def collect(self, chunk) -> Cands:
        return self.search(chunk)

    def search(self, chunk) -> Cands:
        """Every piece's candidates; a task holds PART bases or more (small contigs go together)."""
        tasks, task, size = [], [], 0
        for i in range(chunk.n):
            codes = chunk.piece(i)
            ctx, n = int(chunk.context[i]), int(chunk.length[i])
            step = max(PART, -(-n // (4 * max(1, self.threads))))
            for a in range(0, max(n, 1), step):
                lo = max(0, ctx + a - self.context)
                hi = min(ctx + n, ctx + a + step)
                if hi <= ctx + a:
                    continue
                task.append((i, codes[lo:hi].tobytes(), ctx + a - lo, lo))
                size += hi - lo
                if size >= PART:
                    tasks, task, size = tasks + [task], [], 0
        if task:
            tasks.append(task)
        run = self.pool.imap(_search, tasks) if self.pool is not None else map(_search, tasks)
        return Cands.concat([Cands(ps, np.full(len(ps), piece, np.int64), chunk.rec_start[piece] + j, d)
                             for done in run for piece, ps, j, d in done])
