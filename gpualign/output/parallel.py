"""Text output (PAF, TSV, SAM) formatted in worker processes, written by the parent in input order.

Formatting a batch is numpy work over every line and CIGAR op; in the parent it competes for the
interpreter with reading and alignment. The pool is forked before any thread or the GPU exists
(start it right after the readers); each job carries the batch without its sequence bytes.
"""

from __future__ import annotations

import dataclasses
from collections import deque

import numpy as np

WORKERS_MAX = 8


def start_pool(threads: int, most: int = WORKERS_MAX):
    """A process pool of up to `most` formatters (one per 2 threads; None below 1 worker's worth, or
    without fork), all its processes started now."""
    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor

    workers = min(most, threads // 2)
    if workers < 1 or "fork" not in mp.get_all_start_methods():
        return None
    pool = ProcessPoolExecutor(workers, mp_context=mp.get_context("fork"))
    pool.submit(int).result()  # with fork, the first job starts every worker process
    return pool


class OrderedWriter:
    """writer.fmt.render(batch, res) run by the pool (in the calling thread without one); the
    rendered text written to writer.stream in submission order, at most `ahead` batches pending."""

    def __init__(self, writer, pool):
        self.writer, self.pool = writer, pool
        self.pending: deque = deque()
        self.ahead = 2 * WORKERS_MAX  # batches formatted or formatting before the oldest is written

    def submit(self, batch, res, done) -> None:
        """Queue a batch; done(n_lines) is called once it has been written."""
        if self.pool is None:
            done(self.writer.write(batch, res))
            return
        fmt = self.writer.fmt
        if not getattr(fmt, "needs_seq", False):  # PAF and TSV lines hold no sequence bytes: not sent
            batch = dataclasses.replace(batch, seq=np.zeros(0, np.uint8))
        if hasattr(fmt, "prepare"):  # the formatter's own say in what is sent
            batch, res = fmt.prepare(batch, res)
        self.pending.append((self.pool.submit(fmt.render, batch, res), done))
        while len(self.pending) > self.ahead:
            self._write_one()

    def flush(self) -> None:
        while self.pending:
            self._write_one()

    def _write_one(self) -> None:
        fut, done = self.pending.popleft()
        data, n = fut.result()
        self.writer.stream.write(data)
        done(n)
