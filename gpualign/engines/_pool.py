"""The worker-process pool the CPU engines share: a batch cut into chunks of about equal bases, each
aligned by a module-level function in a worker (several chunks per worker for balance), the parts
assembled in order. Small batches run inline; a larger one that is not cut (one process, one pair) runs in a
forked child (interrupt.killable), so that a signal is not held up by the C call."""

from __future__ import annotations

import importlib
import threading
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool

import numpy as np

from .. import interrupt
from ..errors import WorkerLost
from ..records import AlignBatch, PairBatch
from ..workers import fork_pool
from .base import Engine


def as_lists(*cols) -> tuple:
    """A chunk's columns as Python lists (the parent sends arrays; a worker's per-pair loop reads lists)."""
    return tuple(c.tolist() if isinstance(c, np.ndarray) else c for c in cols)


class Joined(Future):
    """A future over the chunk futures of one batch: assemble(parts) once all are done."""

    def __init__(self, futures, assemble):
        super().__init__()
        self._futures, self._assemble = futures, assemble

    def result(self, timeout=None) -> AlignBatch:
        try:
            parts = [f.result(timeout) for f in self._futures]
        except BrokenProcessPool as e:  # (a worker killed: the out-of-memory killer, most often)
            if not WorkerLost.died(e):
                raise
            raise WorkerLost() from e
        return self._assemble(parts)


class Done(Future):
    def __init__(self, value):
        super().__init__()
        self.set_result(value)


INLINE_BASES = 20_000  # a batch of at most this many bases is aligned in the calling thread


class ChunkPool(Engine):
    """Process pool (forked, created on first use or at start()) and the batch-splitting rule. A
    subclass names the module its workers import (``requires``). rescue: the engine is a GPU chain's last
    (select_engines), its pool forked at the first batch that needs one, not at start(): most GPU runs send it
    nothing or only small batches (aligned inline), and 16 forks of a process holding a CUDA context took
    ~0.06 s of the start's critical path, before the first batch could align."""

    requires = ""
    rescue = False

    @classmethod
    def available(cls) -> bool:
        try:
            importlib.import_module(cls.requires)
        except ImportError:
            return False
        return True

    def __init__(self, threads: int = 1, inline_bases: int = INLINE_BASES):
        self.threads = max(1, threads)
        self.inline_bases = inline_bases
        self._pool: ProcessPoolExecutor | None = None
        self._pool_lock = threading.Lock()  # (a rescue's pool is made by whichever aligner thread needs it first)

    def _get_pool(self) -> ProcessPoolExecutor:
        with self._pool_lock:
            if self._pool is None:
                self._pool = fork_pool(self.threads, start=False)
            return self._pool

    def start(self) -> None:
        """Create the worker pool now, before the aligner threads (a rescue's: at its first use)."""
        if self.threads > 1 and not self.rescue:  # with fork the pool forks every worker at its first job:
            self._get_pool().submit(int).result()  # that is now, not from an aligner thread

    def close(self) -> None:
        with self._pool_lock:  # (a pool being made by an aligner thread now is made, then shut down)
            if self._pool is not None:
                self._pool.shutdown(wait=True, cancel_futures=True)
                self._pool = None

    def align(self, batch: PairBatch, cfg) -> AlignBatch:
        return self.submit(batch, cfg).result()  # submit(batch, cfg) -> Future: the engine's own

    def run_chunks(self, batch: PairBatch, work, chunk_args, assemble) -> Future:
        """work(*chunk_args(sub)) for chunks sub of batch (in workers unless the batch is small), then
        assemble(list of the chunk results, in order)."""
        if batch.bases <= self.inline_bases:
            return Done(assemble([work(*chunk_args(batch))]))
        if self.threads == 1 or batch.n < 2:  # (WFA2-lib's, parasail's calls hold the interpreter until they
            # return, minutes for a long pair or huge penalties: in a child, a signal ends the run at once)
            return Done(assemble([interrupt.killable(work, *chunk_args(batch))]))
        cum = np.cumsum(batch.q_len + batch.t_len)
        n_chunks = min(batch.n, 4 * self.threads)
        cuts = np.searchsorted(cum, cum[-1] * np.arange(1, n_chunks) / n_chunks)
        bounds = [0, *sorted(set(int(c) + 1 for c in cuts if 0 <= c < batch.n - 1)), batch.n]
        pool = self._get_pool()
        futs = [pool.submit(work, *chunk_args(batch.take(np.arange(a, b))))
                for a, b in zip(bounds[:-1], bounds[1:])]
        return Joined(futs, assemble)
