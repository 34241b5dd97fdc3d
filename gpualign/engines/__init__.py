"""The one place that decides which engines run (select_engines), and what engines share: out-of-memory
degrading, the page-locked allocator. What an engine is: engines/base.py."""

from __future__ import annotations

import numpy as np

from .. import trace
from ..config import AlignConfig
from ..errors import DeviceError
from ..gpu.kernels import gpu_status, is_out_of_memory
from ..records import EXCEEDED, AlignBatch, PairBatch
from .cpu_dp import CpuDpEngine
from .cpu_wfa import CpuWfaEngine


def align_degrading(align_once, batch: PairBatch, cfg: AlignConfig, min_pairs: int = 64) -> AlignBatch:
    """align_once(batch, cfg), halving the batch while the device runs out of memory; pairs that fail
    even alone-ish (below min_pairs) come back ``exceeded`` so the router rescues them on the CPU."""
    try:
        return align_once(batch, cfg)
    except Exception as err:  # noqa: BLE001 - only memory errors are handled, the rest re-raised
        if not is_out_of_memory(err):
            raise
    if batch.n <= min_pairs:
        res = AlignBatch.empty(batch.n, not cfg.distance_only)
        res.status[:] = EXCEEDED
        return res
    half = batch.n // 2
    parts = [(idx, align_degrading(align_once, batch.take(idx), cfg, min_pairs))
             for idx in (np.arange(half), np.arange(half, batch.n))]
    return AlignBatch.merge(batch.n, parts, not cfg.distance_only)


class CpuEngine(CpuWfaEngine):
    """The CPU engine accepts every pair: the end of every chain."""

    def accepts(self, batch: PairBatch, cfg: AlignConfig | None = None) -> np.ndarray:
        return np.ones(batch.n, dtype=bool)


def gpu_engines(cfg: AlignConfig) -> list:
    """GPU engines that can serve this config, in chain order (call only when a GPU is present):
    eWFA levels for short edit-distance pairs, then the affine WFA engine (affine metric, and edit
    pairs beyond eWFA's bounds)."""
    from .gpu_affine import GpuAffineEngine
    from .gpu_edit import GpuEditEngine

    return [e for e in (GpuEditEngine(), GpuAffineEngine()) if e.accepts_cfg(cfg)]


@trace.traced("select_engines")
def select_engines(cfg: AlignConfig) -> tuple[list, str]:
    """The engine chain for cfg and a one-line notice saying what runs where. General scoring (a match
    bonus, a matrix, protein, local or semi-global) goes to the gpu-dp engine, cpu-dp (parasail) behind
    it; the rest to the wavefront engines."""
    if cfg.general:
        return _general_chain(cfg)
    cpu = CpuEngine(cfg.n_threads)
    if not cpu.available():
        raise DeviceError("pywfa (WFA2-lib) is not installed: pip install pywfa")
    cpu_note = f"cpu-wfa (WFA2-lib, {cfg.n_threads} process{'es' if cfg.n_threads > 1 else ''})"
    if cfg.device == "cpu":
        return [cpu], f"engine: {cpu_note}"
    ok, what = gpu_status()
    if not ok:
        if cfg.device == "gpu":
            raise DeviceError(f"--device gpu: no usable GPU ({what})")
        return [cpu], f"engine: {cpu_note}; no GPU ({what})"
    gpus = gpu_engines(cfg)
    if not gpus:
        if cfg.device == "gpu":
            raise DeviceError(f"--device gpu: no GPU engine for --metric {cfg.metric} in this version")
        return [cpu], f"engine: {cpu_note}; GPU {what} present but no GPU engine for this metric"
    names = ", ".join(e.name for e in gpus)
    cpu.rescue = True
    return [*gpus, cpu], f"engines: {names} on {what}, rescue {cpu_note}"


def _general_chain(cfg: AlignConfig) -> tuple[list, str]:
    """gpu-dp first when a GPU is there (pairs beyond its limits go on to cpu-dp), else cpu-dp alone."""
    dp = CpuDpEngine(cfg.n_threads)
    if not dp.available():
        raise DeviceError("parasail is not installed: pip install parasail")
    cpu_note = f"cpu-dp (parasail, {cfg.n_threads} process{'es' if cfg.n_threads > 1 else ''})"
    if cfg.device == "cpu":
        return [dp], f"engine: {cpu_note}"
    ok, what = gpu_status()
    if ok:
        from .gpu_dp import MAX_LETTERS, GpuDpEngine

        gpu = GpuDpEngine()
        if gpu.accepts_cfg(cfg):
            dp.rescue = True
            return [gpu, dp], f"engines: gpu-dp on {what}, rescue {cpu_note}"
        what = f"{what} present but the matrix has over {MAX_LETTERS} letters"
    if cfg.device == "gpu":
        raise DeviceError(f"--device gpu: no GPU engine for this scoring ({what})")
    return [dp], f"engine: {cpu_note}; no GPU ({what})"


def host_allocator(chain):
    """alloc(n, dtype) for the sequence buffers of batches this chain aligns: page-locked memory when
    a GPU engine runs (the device reads it with no staging copy), else numpy's."""
    if any(e.pinned_input for e in chain):
        from ..gpu.staging import pinned_empty

        return pinned_empty
    return np.empty
