"""Worker processes: every process pool of the program is made here (fork_pool), the same way.

Pools are forked where the platform can (the platform's default start method elsewhere), and a pool made
to start now forks every worker at once, before this process has threads or a CUDA context a child must
not inherit (the callers make theirs before the reader threads and the GPU). Forked children ignore SIGINT
and are ended by the parent (interrupt.py's fork hooks, once the CLI installed them)."""

from __future__ import annotations

import multiprocessing as mp
from concurrent.futures import ProcessPoolExecutor

from . import shm
from .errors import GpualignError


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


class Forked:
    """fn(*args) in one child process forked now (fork where the platform can): result() waits for its
    value or raises its exception; close() ends the child if it still runs (an aborted run does not wait for
    it). For one job beside this process's own work with no interpreter lock to share; fork it before this
    process has threads or a CUDA context. A bytes value of SHM_BYTES or more comes back in a shared-memory
    block, as a read-only uint8 array mapped from it (through the pipe it would come in 64 KB reads, each
    taking this process's interpreter lock back from its busy threads: shm.py)."""

    SHM_BYTES = 1 << 20

    def __init__(self, fn, *args):
        ctx = mp.get_context("fork") if can_fork() else mp.get_context()
        self._conn, child = ctx.Pipe(duplex=False)
        self._proc = ctx.Process(target=_call, args=(child, fn, args, self.SHM_BYTES), daemon=True)
        self._proc.start()
        child.close()
        self._outcome = None  # ("value", v), ("error", exception) or ("shm", block name, size)

    def result(self):
        if self._outcome is None:
            try:
                self._outcome = self._conn.recv()
            except EOFError:
                self._proc.join(timeout=5)
                self._outcome = ("error", GpualignError(f"a helper process ended unexpectedly (exit code "
                                                        f"{self._proc.exitcode})"))
            if self._outcome[0] == "shm":
                self._outcome = ("value", shm.view(*self._outcome[1:]))
            self.close()
        kind, value = self._outcome
        if kind == "error":
            raise value
        return value

    def close(self) -> None:
        """End the child if it still runs, and drop a block it sent that result() never took; safe more than
        once."""
        if self._proc.is_alive():
            self._proc.terminate()
        self._proc.join(timeout=5)
        if self._outcome is None and not self._conn.closed:
            try:
                if self._conn.poll():
                    sent = self._conn.recv()
                    if sent[0] == "shm":
                        shm.discard(sent[1])
            except (EOFError, OSError):
                pass
        self._conn.close()


def _call(conn, fn, args: tuple, shm_bytes: int) -> None:
    try:
        value = fn(*args)
        if isinstance(value, bytes) and len(value) >= shm_bytes:
            outcome = ("shm", shm.put([value]), len(value))
        else:
            outcome = ("value", value)
    except BaseException as err:  # noqa: BLE001 - handed to the parent, which raises it
        outcome = ("error", err)
    conn.send(outcome)
    conn.close()


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
