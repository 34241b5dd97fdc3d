"""Who aligns a runner's batches: the dispatchers `pairs` and `paf` are handed (stages.start_engines picks one,
stages.stream drives it, the same code for each).

- Here: this process's engine chain (the one-GPU or CPU run), `concurrent` batches at once, each from a
  thread of its own.
- devices.DeviceSet: this host's GPUs from this process (`--gpus`), a chain per device slot.
- cluster.ClusterAligner: Dask workers (`--scheduler`, `--cpu-workers`).

The interface (Dispatcher): submit(batch) -> a future whose result() is (AlignBatch, route counts), in any
order (the runner awaits them in input order); submit_task(fn, *args, pairs=n) -> a future of fn(engines, *args)
-> (value, counts) (genome's record pairs, search's chunks); window: how many to keep in flight; in_process:
whether the work stays in this process (then host_allocator() gives the batches' buffers); rows() and
stats (objects with a busy attribute, in seconds): the summary's rows and the align stage's busy time;
close(). search and genome hand their own units to DeviceSet and ClusterAligner the same way, and keep their
one-process paths (a search engine's chunk pipeline, killable CPU children per record pair).
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor

from .config import AlignConfig


class Dispatcher:
    """The interface the batch runners drive (see the module's docstring). Each dispatcher also has window (an
    int) and stats (a dict of objects with a busy attribute); submit_task's fn is given the dispatcher's
    engines first (Here, DeviceSet), or is a cluster_worker function run on a worker (ClusterAligner)."""

    in_process = True  # its work stays in this process

    def submit(self, batch) -> Future:
        raise NotImplementedError

    def submit_task(self, fn, *args, pairs: int = 1) -> Future:
        raise NotImplementedError

    def host_allocator(self):
        """alloc(count, dtype) for the batches' sequence buffers (numpy's: nothing in this process to pin for)."""
        import numpy as np

        return np.empty

    def rows(self) -> list[tuple[str, str]]:
        """The summary's rows about the dispatcher (per device slot, per worker)."""
        return []

    def settle(self) -> None:
        """Work begun in this process on engines the runner closes has ended, work not begun is dropped (stages.stream
        calls it before it returns or raises). Nothing for dispatchers that own their engines."""

    def close(self) -> None:
        pass


class _Busy:
    """Seconds of work done, added to from several threads."""

    def __init__(self):
        self.busy = 0.0
        self._lock = threading.Lock()

    def add(self, seconds: float) -> None:
        with self._lock:
            self.busy += seconds


class Here(Dispatcher):
    """This process's chain (started and closed by the runner: stages.running): as many batches at once as its
    first engine takes (`concurrent`), each aligning on a thread of its own; a batch's upload is started on the
    submitting thread (route.prefetch), so it overlaps the batch aligning before it."""

    def __init__(self, chain: list, cfg: AlignConfig):
        self.chain, self.cfg = chain, cfg
        self.window = max(1, int(chain[0].concurrent)) if chain else 1
        self._pool = ThreadPoolExecutor(self.window, thread_name_prefix="gpualign-align")
        self._busy = _Busy()
        self.stats = {"here": self._busy}

    def submit(self, batch, cfg: AlignConfig | None = None) -> Future:
        from .route import prefetch, run_chain

        cfg = cfg or self.cfg
        prefetch(batch, self.chain, cfg)
        return self.submit_task(lambda chain, b: run_chain(b, chain, cfg), batch)

    def submit_task(self, fn, *args, pairs: int = 1) -> Future:
        def timed():
            t0 = time.perf_counter()
            try:
                return fn(self.chain, *args)
            finally:
                self._busy.add(time.perf_counter() - t0)

        return self._pool.submit(timed)

    def host_allocator(self):
        from .engines import host_allocator

        return host_allocator(self.chain)

    def settle(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)

    def close(self) -> None:
        self.settle()
