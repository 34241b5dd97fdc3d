"""Worker processes: every process pool of the program is made here (fork_pool), the same way.

Pools are forked where the platform can (the platform's default start method elsewhere), and a pool made
to start now forks every worker at once, before this process has threads or a CUDA context a child must
not inherit (the callers make theirs before the reader threads and the GPU). Forked children ignore SIGINT
and are ended by the parent (interrupt.py's fork hooks, once the CLI installed them)."""

from __future__ import annotations

import multiprocessing as mp
from concurrent.futures import ProcessPoolExecutor


def can_fork() -> bool:
    return "fork" in mp.get_all_start_methods()


def fork_pool(workers: int, initializer=None, initargs: tuple = (), start: bool = True) -> ProcessPoolExecutor:
    """A pool of `workers` processes, each running initializer(*initargs) first; start: every worker
    started before this returns (with fork the first job starts them all), else on the first job."""
    ctx = mp.get_context("fork") if can_fork() else None
    pool = ProcessPoolExecutor(workers, mp_context=ctx, initializer=initializer, initargs=initargs)
    if start:
        for fut in [pool.submit(int) for _ in range(1 if ctx is not None else workers)]:
            fut.result()
    return pool
