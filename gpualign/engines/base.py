"""The engine contract: what route.run_chain and the runners (pipeline, cluster_worker, api, genome_path)
call on every engine of a chain, with the defaults of an engine that needs none of the hooks.

An engine is asked, in this order: start() (every engine of the chain, the CPU ones first: their worker
processes are forked before the GPU is used), warm(cfg) (the chain's first engine: its path run once),
then per batch prefetch(batch, cfg) (the first engine, on the queueing thread, while the batch before
aligns), accepts(batch, cfg) and align(batch, cfg) (route.run_chain; `concurrent` batches at once, each
from a thread of its own), and close() at the end, whatever happened."""

from __future__ import annotations

import numpy as np

from ..config import AlignConfig
from ..records import AlignBatch, PairBatch


class Engine:
    name = ""  # its records.ENGINE_NAMES entry
    concurrent = 1  # batches it aligns at once, each from a thread of its own (dispatch.Here, devices.DeviceSet)
    pinned_input = False  # it wants batches' sequence bytes in page-locked memory (engines.host_allocator)

    def accepts_cfg(self, cfg: AlignConfig) -> bool:
        """Whether it can align anything under cfg (metric, scoring, options)."""
        return True

    def accepts(self, batch: PairBatch, cfg: AlignConfig) -> np.ndarray:
        """Per pair: whether it takes the pair (a bool array of batch.n)."""
        raise NotImplementedError

    def align(self, batch: PairBatch, cfg: AlignConfig) -> AlignBatch:
        """The batch's results: OK, EXCEEDED (the next engine of the chain tries it) or FAILED per pair."""
        raise NotImplementedError

    def start(self) -> None:
        """Make what it runs on (worker processes, kernels) before the first batch."""

    def warm(self, cfg: AlignConfig) -> None:
        """Run cfg's path once on a few pairs (what loads on first use loads now)."""

    def prefetch(self, batch: PairBatch, cfg: AlignConfig) -> None:
        """Start moving a batch align() gets next (to the device), while the one before aligns."""

    def close(self) -> None:
        """Release what start() made (idempotent)."""
