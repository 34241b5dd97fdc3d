"""The search hits' alignments on the GPU (kernels/search_align.cu, one thread per hit): what hits.align and
hits.packed_cigars compute on the host, the same numbers, on the aligner's own stream so that it runs
beside the search kernels of the next chunk."""

from __future__ import annotations

import numpy as np

from .. import cigar as C
from ..gpu.kernels import is_out_of_memory, load_module
from ..records import offsets_from_lengths
from .hits import align_job

BLOCK = 128
PRIORITY = -100  # the stream's (lower is sooner)
KERNELS = ("search_align.cu", ("align_hits",), ())  # (file, names, defines): engines/variants.py


class GpuHitAligner:
    """hits.trace's aligner, called as hits.align_job is: a job (pattern [n, m], window [n, L], first, match
    table: the one given here) -> (cost, start column, packed CIGARs, their offsets and lengths, {X, I, D:
    counts}) for its n hits (trace sizes the jobs: hits.TRACE_BYTES of DP scratch at most)."""

    def __init__(self, table: np.ndarray):
        import cupy

        self.cp = cupy
        # the greatest priority (CUDA clamps a number below its range to it): the aligner's blocks go to the
        # SMs as soon as the running search kernel's free them, not after the last of those has started
        self.stream = cupy.cuda.Stream(non_blocking=True, priority=PRIORITY)
        self.kernel = load_module(*KERNELS).get_function("align_hits")
        with self.stream:
            self.miss = cupy.asarray((~table).astype(np.uint8).reshape(-1))

    def __call__(self, job: tuple) -> tuple:
        """(Out of device memory: the host's traceback, which gives the same numbers.)"""
        try:
            return self._align(job)
        except Exception as err:  # noqa: BLE001 - only memory errors are handled, the rest re-raised
            if not is_out_of_memory(err):
                raise
        self.cp.get_default_memory_pool().free_all_blocks()
        return align_job(job)

    def _align(self, job: tuple) -> tuple:
        cp = self.cp
        pattern, window, first, _ = job
        n, m = pattern.shape
        L = window.shape[1]
        with self.stream:
            pt = cp.asarray(np.ascontiguousarray(pattern.T))
            wt = cp.asarray(np.ascontiguousarray(window.T))
            fd = cp.asarray(first.astype(np.int32))
            scratch = cp.empty((m + 1) * (L + 1) * n, np.int16)
            out = cp.empty((6, n), np.int32)  # cost, start, runs, mismatches, insertions, deletions: one copy back
            slots = cp.empty((n, m + L), np.uint32)
            self.kernel((-(-n // BLOCK),), (BLOCK,), (pt, wt, fd, self.miss, np.int32(n), np.int32(m), np.int32(L),
                                                       scratch, out[0], out[1], out[2], out[3:], slots))
            cost, start, per, x, ins, dels = out.get().astype(np.int64)
            slots = slots.get()
        cigar = slots[np.arange(m + L)[None, :] < per[:, None]]
        return cost, start, cigar, offsets_from_lengths(per), per, {C.X: x, C.I: ins, C.D: dels}
