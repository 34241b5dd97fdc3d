"""One record pair of `gpualign genome`: its exact edit distance, or an optimal alignment, on the GPU (the kernel
chosen from a sampled divergence estimate: engines/gpu_long.py; the path: genome_path.py) or on the CPU
(engines/cpu_long.py, in a killable child process). What the runner (genome.py) and a Dask worker
(cluster_worker.genome_pair) both compute; no reading or writing here."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

import numpy as np

from . import interrupt, pack
from .config import AlignConfig
from .errors import DeviceError
from .hirschberg import edits
from .progress import duration, ticking


def apply_rule(q: np.ndarray, t: np.ndarray, n_mismatch: bool):
    """The character rule in the strings' bytes: with n_mismatch every letter other than A/C/G/T made a
    wildcard that matches nothing (copies); else the strings as they are."""
    if not n_mismatch:
        return q, t
    return pack.make_wild(q.copy(), pack.Q_WILD), pack.make_wild(t.copy(), pack.T_WILD)


BOUND_MIN_D = 200_000  # expected distances at least this large get an anchored upper bound first
BOUND_MAX_RATE = 0.30  # beyond this divergence (divergence.py's estimate) exact 16-mer anchors are too rare
# to help (G4 of scripts/bench_genome.py, 47% edits: 32.5%)
WARP_EXTEND_BELOW = 0.05  # divergence under which runs of matches are long enough for warp-wide extend
# cost models of the two GPU kernels (H100 measurements; they only choose, both are exact)
WFA_CELLS_PER_S = 1.5e11  # wavefront cells (diagonals x steps) per second, pruned with the bound
WFA_STEP_S = 1.1e-6  # seconds per wavefront step at least (close strings)
BP_STEP_S = 6.5e-8  # seconds per DP column: the banded bit-parallel kernel's sequential chain
BP_CELLS_PER_S = 1.5e13  # its DP cells (rows x band) per second when enough strips run at once
BP_SLACK = 1.25  # band from the estimate: this much above the estimated distance (too narrow: widened)
BP_PRUNED = (0.5, 0.75)  # share of the band's cells left by the kernel's pruning (a model): one pass, two halves


@dataclass
class KernelPlan:
    kernel: str  # "wfa" (tiled wavefront) or "bp" (banded bit-parallel)
    bound: bool  # compute the anchored upper bound first
    warp_extend: bool  # wavefront kernel: warp-wide extend
    guess: int  # an estimate of the distance (sampled)
    band_guess: int  # bit-parallel kernel without a bound: the band parameter to try first
    anchored: bool = False  # close enough for exact 16-mer anchors (the alignment path tries them)


def kernel_options(q: np.ndarray, t: np.ndarray) -> KernelPlan:
    """Which kernel, with which help, from a sampled divergence estimate. The wavefront kernel costs
    ~d^2/2 cells (with the bound) but at least one step per edit, the bit-parallel one ~n x band cells
    but at least one step per column (of half the target, met in the middle): wavefronts win on close
    strings (on 5 Mbp below ~3%), bit-parallel on distant ones. The bound halves the wavefront kernel's
    cells and narrows the bit-parallel band, but costs ~10 ms per Mbp: worth it when the distance is
    large and anchors can be found. Warp-wide extend pays where runs of matches are long (close
    strings)."""
    from .divergence import estimate as estimate_divergence
    from .engines import gpu_long

    n, m = len(q), len(t)
    top = max(n, m)
    rate = estimate_divergence(q, t)  # read in place (a copy of 2 x 48 Mbp took longer than the estimate)
    guess = int(rate * top)
    bound = rate <= BOUND_MAX_RATE and guess >= BOUND_MIN_D
    wfa_s = max(guess * guess / 2 / WFA_CELLS_PER_S, guess * WFA_STEP_S)
    band_guess = int(BP_SLACK * guess) + abs(n - m) + 1024
    width = min(top, band_guess + 1024)
    halves = 2 if m >= gpu_long.BP_SPLIT_MIN else 1  # two halves met in the middle: half the steps
    bp_s = max((m / halves + width) * BP_STEP_S, n * width / BP_CELLS_PER_S)
    return KernelPlan("bp" if bp_s < wfa_s else "wfa", bound, rate < WARP_EXTEND_BELOW, guess, band_guess,
                      rate <= BOUND_MAX_RATE)


def bp_split(n: int, m: int, width: int) -> bool:
    """Whether the bit-parallel distance runs as two halves met in the middle (gpu_long.bp_distance's split) for a
    band width wide: halves halve the kernel's sequential chain of columns, one pass prunes more of the band (a
    cell goes once its distance so far and the least cost to the end pass the bound, so one pass keeps about half
    the band's cells, two halves, each ending in the middle, about three quarters). Two halves win on narrow bands
    (5 Mbp at 10%), one pass on wide ones (48 Mbp at 8.4%, the E. coli pair at 52%: docs/benchmarks.md)."""
    from .engines import gpu_long

    if m < gpu_long.BP_SPLIT_MIN:
        return False
    cells = n * width / BP_CELLS_PER_S
    halves = max((m / 2 + width) * BP_STEP_S, BP_PRUNED[1] * cells)
    return halves < max((m + width) * BP_STEP_S, BP_PRUNED[0] * cells)


def gpu_bound(q: np.ndarray, t: np.ndarray, cfg: AlignConfig, detail: bool = False):
    """An upper bound on the distance (long_bound.py): anchors found on the device (engines/gpu_anchors.py),
    gaps aligned by the GPU eWFA engine (the strings already carry the character rule, so the gaps use plain
    bytes). detail: long_bound.upper_bound's whole dict (with the path behind the bound)."""
    from . import long_bound
    from .engines import gpu_anchors

    gap_cfg = AlignConfig(distance_only=True, device="gpu", threads=cfg.threads)
    r = long_bound.upper_bound(q, t, _gap_chain(), gap_cfg, find=gpu_anchors.anchors)
    return r if detail else r["bound"]


_gap_chains = threading.local()


def _gap_chain() -> list:
    """The engine chain that aligns the bound's gaps: one per thread and device, kept for the run (an engine
    per record pair started its streams and buffers again each time; one for the process would run its
    kernels, loaded on the first device, from --gpus slots on other devices, and from several slots at once)."""
    import cupy

    from .engines.gpu_edit import GpuEditEngine

    mine = _gap_chains.__dict__.setdefault("by_device", {})
    device = cupy.cuda.Device().id
    if device not in mine:
        mine[device] = [GpuEditEngine()]
    return mine[device]


def use_gpu(device: str) -> bool:
    from .gpu.kernels import gpu_status

    if device == "cpu":  # no CUDA context for a CPU run
        return False
    ok, what = gpu_status()
    if device == "gpu" and not ok:
        raise DeviceError(f"--device gpu: no usable GPU ({what})")
    return ok


def _bound(q, t, cfg, detail: bool = False):
    """gpu_bound, or None when the device runs out of memory for it (no bound: the same result)."""
    from .gpu.kernels import is_out_of_memory

    try:
        return gpu_bound(q, t, cfg, detail)
    except Exception as err:  # noqa: BLE001 - only memory errors are handled, the rest re-raised
        if not is_out_of_memory(err):
            raise
    return None


def _distance_gpu(q, t, cfg, prune, progress, on_notice, qn, tn, other=None):
    """(result dict, kernel) on the GPU, or (None, None) when the device runs out of memory. other: a second
    device for the bit-parallel kernel's backward half (gpu_long.bp_distance), or None."""
    from .engines import gpu_long
    from .gpu.kernels import is_out_of_memory

    plan = kernel_options(q, t)
    upper = _bound(q, t, cfg) if prune and plan.bound else None
    try:
        if plan.kernel == "bp" and prune:  # a guessed band is widened until it holds the result
            u = plan.band_guess if upper is None else min(upper, plan.band_guess)
            split = (other is not None and len(t) >= gpu_long.BP_SPLIT_MIN) or \
                bp_split(len(q), len(t), min(max(len(q), len(t)), u))  # (another device: a half each)
            r = gpu_long.bp_distance(q, t, upper=upper, guess=plan.band_guess, split=split, progress=progress,
                                     other=other)
            if r is not None:
                return r, "bp"
        return gpu_long.distance(q, t, prune=prune, progress=progress, upper=upper,
                                 warp_extend=plan.warp_extend), "wfa"
    except Exception as err:  # noqa: BLE001 - out of device memory: the CPU path instead
        if not is_out_of_memory(err):
            raise
        if on_notice:
            on_notice(f"warning: {qn} vs {tn}: out of GPU memory, computing on the CPU")
    return None, None


def _path_gpu(q, t, cfg, progress, on_notice, qn, tn, chain=None, spread=None):
    """(distance, packed CIGAR, cells, how) on the GPU, or None (the CPU path instead); chain, spread: as
    genome_path.gpu_path's."""
    from . import genome_path
    from .gpu.kernels import is_out_of_memory

    plan = kernel_options(q, t)
    bound = _bound(q, t, cfg, detail=True) if plan.anchored else None
    try:
        r = genome_path.gpu_path(q, t, cfg, plan, bound, progress, chain, spread)
    except Exception as err:  # noqa: BLE001 - out of device memory: the CPU path instead
        if not is_out_of_memory(err):
            raise
        if on_notice:
            on_notice(f"warning: {qn} vs {tn}: out of GPU memory, aligning on the CPU")
        return None
    if r is None:
        return None
    d, ops, stats = r
    return d, ops, stats["cells"], stats["how"]


UNRELATED = 0.45  # a sampled divergence from which the notice says the strands may be opposite (random DNA: ~52%)
LENGTHS_CLOSE = 0.25  # ... between records whose lengths differ by at most this share of the longer
UNRELATED_HINT = (" (as much as unrelated DNA: genome aligns the records end to end, forward strands, from the first "
                  "bases as given; if one record is the other's reverse complement, reverse-complement it first; a "
                  "circular genome written from another start must be rotated to a shared one, and genomes "
                  "rearranged beyond that have no meaningful end-to-end alignment: Ctrl-C stops the run)")


def _unrelated(rate: float, n: int, m: int) -> bool:
    """Whether the notice gives UNRELATED_HINT: a divergence of unrelated DNA between records of close lengths
    (where the lengths differ much, the estimate's floor |n - m| / max(n, m) says so, not the strands)."""
    return rate >= UNRELATED and min(n, m) > 0 and abs(n - m) <= LENGTHS_CLOSE * max(n, m)


def _on_cpu(q, t, cpu_method, with_path, progress, on_notice, qn, tn):
    """(distance, packed CIGAR or None, engine name) on the CPU, in a killable child process (the C
    call would hold this one, deaf to signals, until it returns)."""
    from .engines import cpu_long

    qb, tb = q.tobytes(), t.tobytes()
    method, rate, expected = cpu_long.plan(qb, tb, cpu_method)
    if with_path:
        expected *= cpu_long.PATH_FACTOR
    if on_notice and method == "trivial":
        on_notice(f"{qn} vs {tn}: cpu-trivial (an empty record)")
    elif on_notice:
        on_notice(f"{qn} vs {tn}: cpu-{method}{' alignment path' if with_path else ''}, sampled divergence "
                  f"{100 * rate:.1f}%: expected to take "
                  f"{'under a second' if expected < 0.5 else 'about ' + duration(expected)}"
                  + (UNRELATED_HINT if _unrelated(rate, len(qb), len(tb)) else ""))
    info = {"kernel": "cpu", "method": method, "pair": f"{qn} vs {tn}", "expected": expected}
    with ticking(progress, info):
        if with_path:
            ops, how = interrupt.killable(cpu_long.path, qb, tb, method)
            return edits(ops), ops, f"cpu-{how}"
        d, how = interrupt.killable(cpu_long.distance, qb, tb, method)
    return d, None, f"cpu-{how}"


def compute_pair(qn, tn, q, t, cfg, gpu: bool, prune: bool, cpu_method: str, progress=None, on_notice=None,
                 chain=None, spread=None):
    """One record pair (q, t: the character rule applied): (distance, packed CIGAR or None, cells or None,
    engine label, engine name, seconds); the alignment too unless cfg.distance_only (chain: the engines
    that align the path's leaves, genome_path.leaf_chain's, or None: started for this pair). spread: [(device,
    leaf chain), ...]: other devices that share the pair's work (genome_path.gpu_path's), or None."""
    start = time.perf_counter()
    r = ops = cells = None
    if gpu and not cfg.distance_only:
        r = _path_gpu(q, t, cfg, progress, on_notice, qn, tn, chain, spread)
        if r is not None:
            d, ops, cells, how = r
            engine = f"gpu-long:path:{how}"
    elif gpu:
        r, kernel = _distance_gpu(q, t, cfg, prune, progress, on_notice, qn, tn, spread[0][0] if spread else None)
        if r is not None:
            d, cells, engine = r["distance"], r["cells"], f"gpu-long:{kernel}"
    code = "gpu-long"
    if r is None:
        d, ops, engine = _on_cpu(q, t, cpu_method, not cfg.distance_only, progress, on_notice, qn, tn)
        cells, code = None, "cpu-long"
    return d, ops, cells, engine, code, time.perf_counter() - start


def device_set(cfg: AlignConfig, ids: list[int], context=None):
    """A devices.DeviceSet (not started) whose slots compute record pairs (on_slot), each keeping the path's leaf
    chain (genome_path.leaf_chain: its GPU engines made on the slot, its CPU rescue engine one for all the
    slots, started now, before the slots' threads, and closed after them); once every device has left the
    run, the CPU computes them. A slot's state: (where, leaf chain, device). context: as DeviceSet's."""
    from . import genome_path
    from .devices import DeviceSet

    cpu = None if cfg.distance_only else genome_path.leaf_chain(cfg)[-1]
    if cpu is not None:
        cpu.start()

    def open_slot(device):
        if device is None:
            return "cpu", [], None
        return "gpu", ([] if cpu is None else [*genome_path.leaf_chain(cfg)[:-1], cpu]), device

    ds = DeviceSet(ids, open_slot, lambda state: genome_path.close_chain(state[1][:-1]), cfg,
                   units=("pairs", "pairs"), context=context)
    if cpu is not None:
        ds.after.append(cpu.close)  # (once the slots, which share it, have stopped)
    return ds


def on_slot(state, qn, tn, q, t, cfg, prune, cpu_method, on_notice=None, peers=None):
    """One record pair on a device slot of device_set's (devices.DeviceSet's task): (compute_pair's tuple, {});
    its notices (out of GPU memory, the CPU path's) to on_notice, no per-pair progress (pairs run side by side).
    peers: the DeviceSet, when the pair's work is shared with the other live slots' devices (the runner sends
    one pair at a time then, so they are idle), or None. A shared device that fails leaves the run (DeviceSet.drop)
    and the pair is computed again without it: named by the part it ran (genome_path.PeerLost), or, for the
    bit-parallel distance's backward half, found by the pair computing on this slot's device alone."""
    from .devices import is_device_failure
    from .genome_path import PeerLost

    where, chain, _ = state
    while True:
        others = [s for s in (peers.states() if peers and where == "gpu" else []) if s is not state and s[0] == "gpu"]
        spread = [(s[2], s[1]) for s in others] or None
        try:
            return compute_pair(qn, tn, q, t, cfg, where == "gpu", prune, cpu_method, None, on_notice, chain or None,
                                spread), {}
        except PeerLost as lost:
            peers.drop(others[lost.index], lost.error)
        except Exception as err:  # noqa: BLE001 - a device failure with peers: this device alone tells whose
            if not spread or not is_device_failure(err):
                raise
            out = compute_pair(qn, tn, q, t, cfg, True, prune, cpu_method, None, on_notice, chain or None)
            peers.drop(others[0], err)  # (this device computed it: the failure was the backward half's device)
            return out, {}
