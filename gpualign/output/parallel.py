"""Text output (PAF, TSV, SAM) formatted in worker processes, written by the parent in input order.

Formatting a batch is numpy work over every line and CIGAR op; in the parent it competes for the
interpreter with reading and alignment. The pool is forked before any thread or the GPU exists
(start it right after the readers); each job carries the batch without its sequence bytes, and its text
comes back in a shared-memory block (shm: through the pool's pipe it crawled while the aligner threads
were busy).
"""

from __future__ import annotations

import dataclasses
from collections import deque

import numpy as np

from .. import shm, trace
from ..workers import can_fork, fork_pool

WORKERS_MAX = 8


SHARE_MIN = 1 << 20  # a result's CIGAR arrays of this many bytes or more go in a shared-memory block


def _outbound(res):
    """(res without its large CIGAR arrays (ops, engine-made text buffer), those arrays in one
    shared-memory block as (name, ops bytes, text bytes), or None). In the job they would be pickled
    in-band by the pool's feeder thread: a copy of tens of MB per batch of ONT candidates, made holding
    the interpreter lock; numpy fills the block instead, letting go of the lock for large copies."""
    ops = getattr(res, "cigar", None)
    text = getattr(res, "cigar_text", None)
    big_ops = ops is not None and ops.nbytes >= SHARE_MIN
    big_text = text is not None and text[0].nbytes >= SHARE_MIN
    if not (big_ops or big_text):
        return res, None
    empty = np.zeros(0, np.uint8)
    parts = [np.ascontiguousarray(ops).view(np.uint8) if big_ops else empty, text[0] if big_text else empty]
    block = shm.put(parts)
    res = dataclasses.replace(res, cigar=ops[:0] if big_ops else ops,
                              cigar_text=(None, *text[1:]) if big_text else text)
    return res, (block, len(parts[0]), len(parts[1]))


def _inbound(res, shared):
    """_outbound's res with its arrays back (taken from the block, which is unlinked)."""
    block, n_ops, n_text = shared
    data = shm.take(block, n_ops + n_text)
    if n_ops:
        res = dataclasses.replace(res, cigar=data[:n_ops].view(np.uint32))
    if n_text:
        res = dataclasses.replace(res, cigar_text=(data[n_ops:], *res.cigar_text[1:]))
    return res


def _render(fmt, batch, res, shared=None):
    """fmt.render(batch, res) in a formatting process (res's arrays from _outbound's block when shared):
    (the shared-memory block holding the text or None when empty, its size, lines)."""
    if shared is not None:
        res = _inbound(res, shared)
    data, n = fmt.render(batch, res)
    return (shm.put([data]) if data else None), len(data), n


def start_pool(threads: int, most: int = WORKERS_MAX):
    """A process pool of up to `most` formatters (one per 2 threads; None below 1 worker's worth, or
    without fork), all its processes started now."""
    workers = min(most, threads // 2)
    if workers < 1 or not can_fork():
        return None
    return fork_pool(workers)


class OrderedWriter:
    """writer.fmt.render(batch, res) run by the pool (in the calling thread without one); the
    rendered text written to writer.stream in submission order, at most `ahead` batches pending."""

    def __init__(self, writer, pool, parts: int = 1):
        """parts: jobs per batch, for formatters that can split one (fmt.split)."""
        self.writer, self.pool, self.parts = writer, pool, parts
        self.pending: deque = deque()
        self.ahead = 2 * WORKERS_MAX  # batches formatted or formatting before the oldest is written

    @trace.traced("write submit")
    def submit(self, batch, res, done) -> None:
        """Queue a batch; done(n_lines) is called once it has been written."""
        if self.pool is None:
            done(self.writer.write(batch, res))
            return
        for item, gpu in ((batch, "device_cols"), (res, "device_cigar")):  # GPU buffers: of no use to a
            if getattr(item, gpu, None) is not None:  # formatting process, freed now
                setattr(item, gpu, None)
        fmt = self.writer.fmt
        if not getattr(fmt, "needs_seq", False):  # PAF and TSV lines hold no sequence bytes: not sent
            batch = dataclasses.replace(batch, seq=np.zeros(0, np.uint8))
        if hasattr(fmt, "prepare"):  # the formatter's own say in what is sent
            batch, res = fmt.prepare(batch, res)
        jobs = fmt.split(batch, res, self.parts) if self.parts > 1 and hasattr(fmt, "split") else [(batch, res)]
        for batch, res in jobs:
            res, shared = _outbound(res)
            try:
                fut = self.pool.submit(_render, fmt, batch, res, shared)
            except BaseException:
                if shared is not None:
                    shm.discard(shared[0])
                raise
            self.pending.append((fut, done, shared))
        # written as soon as they are formatted (not left for the end, where the writes would add to the
        # run's wall time), and at most `ahead` pending
        while self.pending and (len(self.pending) > self.ahead or self.pending[0][0].done()):
            self._write_one()

    @trace.traced("write flush")
    def flush(self) -> None:
        while self.pending:
            self._write_one()

    def discard(self) -> None:
        """Drop the batches not written yet (the run failed): those formatted or formatting are waited
        for, and every shared-memory block of theirs is unlinked."""
        while self.pending:
            fut, _, shared = self.pending.popleft()
            try:
                block = None if fut.cancel() else fut.result()[0]
            except Exception:  # noqa: BLE001 - the run is already stopping for another reason
                block = None
            for name in (block, shared and shared[0]):
                if name:
                    shm.discard(name)

    @trace.traced("write one")
    def _write_one(self) -> None:
        fut, done, shared = self.pending.popleft()
        try:
            block, size, n = fut.result()
        except BaseException:
            if shared is not None:  # the job may have failed before it took its block
                shm.discard(shared[0])
            raise
        if block is not None:
            try:
                stream = self.writer.stream  # (SAM's: the header written first, which may fail)
            except BaseException:
                shm.discard(block)
                raise
            shm.write_to(block, size, stream)
        done(n)
