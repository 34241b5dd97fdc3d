"""CPU search engine: sassy-rs (the Sassy library's SIMD bit-parallel search) in worker processes, each
searching every pattern-strand in a part of the chunk. sassy's `search_all` reports every end position
with cost <= k; its own CIGARs are not used (hits.py aligns every hit the same way for every engine)."""

from __future__ import annotations

import signal
from operator import attrgetter

import numpy as np

from ..errors import DeviceError
from ..workers import fork_pool
from . import alphabet as A
from .engines import SearchEngine
from .hits import Cands

PART = 1 << 18  # bases per task at least (a task's cost beyond its search: a call per pattern-strand)

_worker: dict = {}


def _init(patterns: list, alphabet: str, text_table: bytes, k: int, worker: bool = True) -> None:
    if worker:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent ends the workers
    import sassy

    _worker.update(searcher=sassy.Searcher(alphabet, rc=False), patterns=patterns, table=text_table, k=k)


_END, _COST = attrgetter("text_end"), attrgetter("cost")  # (a sassy match's fields, read by map)


def _search(task: tuple) -> tuple:
    """(codes, first reported index, offset) -> (pattern-strands, ends + offset, costs): every pattern-strand's end
    positions with cost <= k in codes, from the first reported one on. (Each match's fields are read by map in C,
    not by a Python loop: a poly-A pattern has a match at nearly every base.)"""
    s, k, table = _worker["searcher"], _worker["k"], _worker["table"]
    codes, report_from, offset = task
    text = codes.translate(table)
    ps_l, j_l, d_l = [], [], []
    for i, pat in enumerate(_worker["patterns"]):
        found = s.search_all(pat, text, k)
        if not found:
            continue
        j = np.fromiter(map(_END, found), np.int64, len(found)) - 1
        keep = np.flatnonzero(j >= report_from)
        ps_l.append(np.full(len(keep), i, np.int32))
        j_l.append(j[keep] + offset)
        d_l.append(np.fromiter(map(_COST, found), np.int32, len(found))[keep])
    if not ps_l:
        return np.zeros(0, np.int32), np.zeros(0, np.int64), np.zeros(0, np.int32)
    return np.concatenate(ps_l), np.concatenate(j_l), np.concatenate(d_l)


class SassyEngine(SearchEngine):
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
        """(context, gap) of the text chunks this engine needs: the longest pattern-strand + k - 1, and more than k
        PAD bytes between pieces (search)."""
        return int(pats.lengths.max()) + k - 1, k + 16

    def start(self) -> None:
        if self.threads > 1 and self.pool is None:
            self.pool = fork_pool(self.threads, _init, (self.patterns, self.alphabet, self.ttable, self.k))
        elif self.threads <= 1:
            _init(self.patterns, self.alphabet, self.ttable, self.k, worker=False)

    def close(self) -> None:
        if self.pool is not None:
            self.pool.shutdown(wait=True, cancel_futures=True)
            self.pool = None

    def aligner(self):
        """No aligner of its own: hits.py aligns the hits here."""
        return None

    def submit(self, chunk):
        """The chunk's tasks handed to the workers now (the search runner submits a chunk before it collects the
        one before: the workers go on from one chunk's tasks to the next's without waiting); without workers,
        the search runs at collect."""
        tasks = self._tasks(chunk)
        if self.pool is None:
            return chunk, None, tasks
        return chunk, [self.pool.submit(_search, t) for t in tasks], None

    def collect(self, submitted) -> Cands:
        chunk, futs, tasks = submitted
        return self._cands(chunk, [f.result() for f in futs] if futs is not None else list(map(_search, tasks)))

    def search(self, chunk) -> Cands:
        return self.collect(self.submit(chunk))

    def _tasks(self, chunk) -> list:
        """The chunk's buffer in parts of PART bytes or more (a quarter of a worker's share of the chunk), however
        many pieces they hold, each with `context` bytes before it: (bytes, first reported index, offset)."""
        size = len(chunk.codes)
        step = max(PART, -(-size // (4 * max(1, self.threads))))
        return [(chunk.codes[max(0, a - self.context):a + step].tobytes(), a - max(0, a - self.context),
                 max(0, a - self.context)) for a in range(0, size, step)]

    def _cands(self, chunk, found: list) -> Cands:
        """Every piece's candidates from its tasks' ends: the ends found outside the pieces' reported bases are
        dropped. The PAD between pieces matches nothing and is longer than k (this engine's geometry) or than the
        patterns (the GPU engine's): an alignment across it costs more than k, or more than m, which one within
        the piece never needs (the pattern's bases all unmatched), so each end's distance is its piece's."""
        ps, j, d = (np.concatenate(x) for x in zip(*found)) if found else (np.zeros(0, np.int64),) * 3
        piece = np.searchsorted(chunk.buf, j, side="right") - 1
        low = chunk.buf[np.maximum(piece, 0)] + chunk.context[np.maximum(piece, 0)]
        keep = np.flatnonzero((piece >= 0) & (j >= low) & (j < low + chunk.length[np.maximum(piece, 0)]))
        piece = piece[keep]
        return Cands(ps[keep].astype(np.int32), piece, chunk.rec_start[piece] + j[keep] - chunk.buf[piece],
                     d[keep].astype(np.int32))
