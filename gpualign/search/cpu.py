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


def _search(task: tuple) -> tuple:
    piece, codes, report_from, offset = task
    text = codes.translate(_worker["table"])
    s, k = _worker["searcher"], _worker["k"]
    ps_l, j_l, d_l = [], [], []
    for i, pat in enumerate(_worker["patterns"]):
        for hit in s.search_all(pat, text, k):
            j = hit.text_end - 1
            if j >= report_from:
                ps_l.append(i)
                j_l.append(j + offset)
                d_l.append(hit.cost)
    return piece, np.array(ps_l, np.int32), np.array(j_l, np.int64), np.array(d_l, np.int32)


class SassyEngine:
    name = "cpu-sassy"

    def __init__(self, pats, k: int, rule: str, threads: int):
        try:
            import sassy  # noqa: F401
        except ImportError:
            raise DeviceError("the CPU search engine needs sassy-rs (pip install sassy-rs)") from None
        alphabet, ptable, self.ttable = A.sassy_profile(rule)
        self.patterns = [c.tobytes().translate(ptable) for c in pats.codes]
        self.k, self.threads = k, threads
        self.context = int(pats.lengths.max()) + k - 1
        self.alphabet = alphabet
        self.pool = None

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

    def search(self, chunk) -> Cands:
        self.start()
        tasks = []
        for i in range(chunk.n):
            codes = chunk.piece(i)
            ctx, n = int(chunk.context[i]), int(chunk.length[i])
            step = max(PART, -(-n // (4 * max(1, self.threads))))
            for a in range(0, max(n, 1), step):
                lo = max(0, ctx + a - self.context)
                hi = min(ctx + n, ctx + a + step)
                if hi <= ctx + a:
                    continue
                tasks.append((i, codes[lo:hi].tobytes(), ctx + a - lo, lo))
        run = self.pool.imap(_search, tasks) if self.pool is not None else map(_search, tasks)
        parts = []
        for piece, ps, j, d in run:
            parts.append(Cands(ps, np.full(len(ps), piece, np.int64),
                               chunk.rec_start[piece] + j, d))
        return Cands.concat(parts)
