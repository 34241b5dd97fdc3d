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


ENGINE_BASES = 1 << 20  # input bases per CPU engine worker forked at least: below, a fork and a join
# (~3-6 ms each) cost about what a worker would save (the 300-pair demo, 233 kbp: none forked)
FORMAT_BASES = 8 << 20  # input bases per output formatter (PAF, SAM, TSV) forked


def sized(threads: int, bases: float | None, per: int, least: int = 1) -> int:
    """How many of `threads` worker processes an input of `bases` is worth: one per whole `per` bases, at
    least `least`, at most threads (all of them when bases is None: a stream, or a thread count the user
    chose)."""
    if bases is None:
        return threads
    return min(threads, max(least, int(bases) // per))


def for_input(threads: int, bases: float | None) -> tuple[int, int]:
    """(CPU engine processes, the formatters' thread budget: output.parallel.start_pool's threads) for an
    input of `bases` (None: all threads to each)."""
    return sized(threads, bases, ENGINE_BASES), 2 * sized(threads // 2, bases, FORMAT_BASES, 0)
