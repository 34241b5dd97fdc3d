"""Worker processes: every process pool of the program is made here (fork_pool), the same way, and so is a
single helper process for one job (Forked).

Pools are forked where the platform can (the platform's default start method elsewhere), and a pool made
to start now forks every worker at once (a CPU chain's engine at its start, before the aligner threads; a GPU
chain's rescue engine at its first batch too large to align inline: engines/_pool.py). Forked children
ignore SIGINT and are ended by the parent (interrupt.py's fork hooks, once the CLI installed them), end on
their own once the parent process is gone (interrupt.end_with_parent: a parent killed outright), and never
use the CUDA context they may inherit (driver.py's fork hook waits for its making)."""

from __future__ import annotations

import multiprocessing as mp
import os
from concurrent.futures import ProcessPoolExecutor

from . import interrupt, shm
from .errors import GpualignError


def can_fork() -> bool:
    return "fork" in mp.get_all_start_methods()


def fork_pool(workers: int, initializer=None, initargs: tuple = (), start: bool = True) -> ProcessPoolExecutor:
    """A pool of `workers` processes, each running initializer(*initargs) first; start: every worker
    started before this returns (with fork the first job starts them all), else on the first job."""
    ctx = mp.get_context("fork") if can_fork() else None
    pool = ProcessPoolExecutor(workers, mp_context=ctx, initializer=_worker_start,
                               initargs=(os.getpid(), initializer, initargs))
    if start:
        for fut in [pool.submit(int) for _ in range(1 if ctx is not None else workers)]:
            fut.result()
    return pool


def _worker_start(parent: int, initializer, initargs: tuple) -> None:
    """A pool worker's first step: ended with its parent process (interrupt.end_with_parent: a parent killed
    by SIGKILL left its workers running for good), then initializer(*initargs)."""
    interrupt.end_with_parent(parent)
    if initializer is not None:
        initializer(*initargs)


class Forked:
    """fn(*args) in one child process forked now (fork where the platform can): result() waits for its
    value or raises its exception (one that cannot be pickled as a RuntimeError naming it); close() ends the
    child if it still runs (an aborted run does not wait for it). For one job beside this process's own work
    with no interpreter lock to share. A bytes value of SHM_BYTES or more comes back in a shared-memory block
    named here, as a read-only uint8 array mapped from it (through the pipe it would come in 64 KB reads,
    each taking this process's interpreter lock back from its busy threads: shm.py); close() removes a block
    result() never took. (driver.py's fork hook makes the fork wait for the CUDA context its thread makes.)"""

    SHM_BYTES = 1 << 20

    def __init__(self, fn, *args):
        ctx = mp.get_context("fork") if can_fork() else mp.get_context()
        big = self.SHM_BYTES if os.path.isdir(shm.SHM_DIR) else None  # (no /dev/shm: all through the pipe)
        self._block = interrupt.shm_name()
        self._conn, child = ctx.Pipe(duplex=False)
        try:
            self._proc = ctx.Process(target=_call, args=(os.getpid(), child, fn, args, big, self._block),
                                     daemon=True)
            self._proc.start()
        except BaseException:
            self._conn.close()
            raise
        finally:
            child.close()
        self._outcome = None  # ("value", v) or ("error", exception), once received

    def result(self):
        if self._outcome is None:
            try:
                sent = self._conn.recv()
                if sent[0] == "shm":
                    sent = ("value", shm.view(self._block, sent[1]))
            except EOFError:
                self._proc.join(timeout=5)
                sent = ("error", GpualignError(f"a helper process ended unexpectedly (exit code "
                                               f"{self._proc.exitcode})"))
            except Exception as err:  # noqa: BLE001 - an exception that came back but cannot be rebuilt here
                sent = ("error", RuntimeError(f"{type(err).__name__}: {err}"))
            self._outcome = sent
            self.close()
        kind, value = self._outcome
        if kind == "error":
            raise value
        return value

    def close(self) -> None:
        """End the child if it still runs, and remove a block result() did not take; safe more than once."""
        if self._proc is None:
            return
        if self._proc.is_alive():
            self._proc.terminate()
            self._proc.join(timeout=5)
            if self._proc.is_alive():
                self._proc.kill()
        self._proc.join()
        self._proc.close()
        self._proc = None
        self._conn.close()
        shm.discard(self._block)  # (gone already where result() took it)


def _call(parent: int, conn, fn, args: tuple, big: int | None, block: str) -> None:
    import pickle

    interrupt.end_with_parent(parent)
    try:
        value = fn(*args)
        if big is not None and isinstance(value, bytes) and len(value) >= big:
            shm.put([value], block)
            out = pickle.dumps(("shm", len(value)))
        else:
            out = pickle.dumps(("value", value))
    except BaseException as err:  # noqa: BLE001 - handed to the parent, which raises it
        out = pickle.dumps(("error", interrupt.portable(err)))
    conn.send_bytes(out)
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
