"""What the batch GPU engines (eWFA, affine WFA) share around their kernels: start-up and warm-up
(BatchEngine) and batches split to fit the device (align_split). Transfers live in staging.py, the
per-pair results of the kernel levels in _results.py."""

from __future__ import annotations

import numpy as np

from .. import trace
from ..config import AlignConfig
from ..records import AlignBatch, PairBatch
from .base import Engine

MAX_BATCH_BASES = 1 << 30  # sequence bytes per device launch set (offsets are 32-bit on the device)


def warm_up(align_device, cfg: AlignConfig) -> None:
    """align_device(batch, cfg) on a few pairs (matching, mutated, with N, far apart): the first use of
    each path (cupy compiles or loads its own kernels then) happens at start, not in the first batch."""
    rng = np.random.default_rng(0)
    q = [bytes(rng.choice(np.frombuffer(b"ACGT", np.uint8), ln)) for ln in (1, 50, 150, 300)]
    t = [q[0], q[1], q[2][:70] + b"N" + q[2][71:], bytes(rng.choice(np.frombuffer(b"ACGT", np.uint8), 300))]
    batch = PairBatch.from_sequences(q * 300, t * 300)  # over 1,024 pairs: the eWFA start level is sampled
    align_device(batch, cfg)


class BatchEngine(Engine):
    """What the batch GPU engines (eWFA, affine WFA, gpu-dp) share around their own _module() (load the
    kernels), _align_device(batch, cfg) and _staging (a Staging)."""

    @trace.traced("engine start")
    def start(self) -> None:
        """Load the kernels (and start the CUDA context) now, while the readers parse the first records."""
        self._module()

    def warm(self, cfg: AlignConfig) -> None:
        """Run a few pairs through cfg's path once (cupy's own kernels load on first use); a device out of
        memory now only skips it (align() degrades on its own)."""
        from ..gpu.kernels import is_out_of_memory

        self._module()
        try:
            warm_up(self._align_device, cfg)
        except Exception as err:  # noqa: BLE001 - only memory errors are let go
            if not is_out_of_memory(err):
                raise

    def _stream(self):
        """The calling thread's own CUDA stream (non-blocking; self._local is a threading.local): the
        batches of concurrent threads (the engine's `concurrent`, dispatch.Here) overlap on the device."""
        import cupy

        if getattr(self._local, "stream", None) is None:
            self._local.stream = cupy.cuda.Stream(non_blocking=True)
        return self._local.stream

    def prefetch(self, batch: PairBatch, cfg: AlignConfig) -> None:
        """Start uploading a batch that align() will get next (overlaps the kernels before it)."""
        if self.accepts_cfg(cfg):
            self._staging.prefetch(batch, cfg)


def align_split(align_device, batch: PairBatch, cfg: AlignConfig) -> AlignBatch:
    """align_device(batch, cfg), with batches over MAX_BATCH_BASES split first, and device
    out-of-memory halving the batch (down to a few pairs, then CPU rescue: align_degrading)."""
    from ..gpu.kernels import is_out_of_memory
    from . import align_degrading

    if batch.n > 1 and batch.seq_size > MAX_BATCH_BASES:  # the whole buffer goes over (take() compacts it)
        half = batch.n // 2
        parts = [(idx, align_split(align_device, batch.take(idx), cfg))
                 for idx in (np.arange(half), np.arange(half, batch.n))]
        return AlignBatch.merge(batch.n, parts, not cfg.distance_only)

    def once(b, c):
        try:
            return align_device(b, c)
        except Exception as err:
            if is_out_of_memory(err):  # give the pool's cached blocks back before the smaller retry
                import cupy

                cupy.get_default_memory_pool().free_all_blocks()
            raise

    return align_degrading(once, batch, cfg)
