"""GPU engine 2: gap-affine WFA of pairs of any length (kernels/wfa_affine.cu).

One thread block per alignment (diagonals across its threads, a ring of the last rows in shared or
device memory, a work queue over resident blocks, longest pairs first), 4 backtrace bits per cell, then
a second kernel (a thread per pair) walks the backtrace into the CIGAR. It serves the affine metric,
the edit metric (x=1, o=0, e=1) for pairs the eWFA levels cannot hold, and ends-free alignment (query
end to end, at most t_free target bases skipped at each end: `gpualign paf`).

This module runs a batch: length groups, the estimated level, the fixed levels for what is left, the
results booked per pair. affine_plan.py holds the levels, caps and buffer sizes; affine_launch.py the
launches and the overlap of two batches. docs/engines.md explains the design.
"""

from __future__ import annotations

import threading

import numpy as np

from .. import trace
from ..config import AlignConfig
from ..gpu.kernels import load_module
from ..gpu.staging import Staging, free_rows, to_device
from ..records import AlignBatch, PairBatch
from ._device import BatchEngine, align_split
from ._results import Results, gather_kernel, text_kernels
from .affine_launch import WORKSPACE_MAX, Launcher, template_flag
from .affine_plan import (
    ESTIMATE_GAIN,
    ESTIMATE_MIN,
    HISTORY,
    HISTORY_MIN,
    LEVELS,
    RAISED,
    SAMPLE_EVERY,
    Plan,
    caps_from_rates,
    end_reach,
    estimated_caps,
    forced_gap,
    length_groups,
    longest_first,
    reduced,
    score_rates,
)

NAME = "gpu-affine"
CONCURRENT = 2  # batches aligned at once (GpuAffineEngine.concurrent)
# (file, names, defines): every kernel this engine loads (engines/variants.py); tune["min_blocks"] (a
# benchmark's register cap) adds a define, compiled on first use
_INSTANCES = tuple(f"wfa_affine<{', '.join(template_flag(x) for x in (b, f, s))}>"
                   for b in (0, 1) for f in (0, 1) for s in (0, 1))
KERNELS = ("wfa_affine.cu", (*_INSTANCES, "wfa_affine_cigar", "gather_ops", "cigar_measure", "cigar_write"), ())


class GpuAffineEngine(Launcher, BatchEngine):
    name = NAME
    pinned_input = True  # batches' sequence bytes in page-locked memory (engines.host_allocator)
    # batches aligned at once (dispatch.Here: one thread each, each on a CUDA stream of its own): while
    # one batch's host work, last small launches and result copies run, the other's kernels fill the GPU
    concurrent = CONCURRENT

    def __init__(self, levels: tuple = LEVELS, estimate_min: int = ESTIMATE_MIN):
        """levels: score caps (edits per base, affine_plan.py); tests force small ones to exercise rescue.
        estimate_min: the smallest group given estimated caps (affine_plan.py)."""
        self._mod = None
        self._staging = Staging()
        self.levels = tuple(levels)
        self.estimate_min = estimate_min
        self._local = threading.local()  # per aligning thread: its CUDA stream and its last call's counts
        self._turn_lock = threading.Lock()  # held by the batch whose estimated levels run (_turn)
        self._turn_done = None  # event: the device work of the last turn
        self._ws = None  # the workspace of the estimated levels, kept from batch to batch (_workspace)
        self.workspace_max = WORKSPACE_MAX  # bytes of one launch's workspace at most (more pairs: more launches)
        self._history: dict = {}  # (penalties, ends-free, length class) -> latest score rates (affine_plan.py)
        # benchmark overrides: threads, per_sm (plan), min_blocks (register cap, before the first call);
        # timing=True: seconds per stage in timings; caps: per-pair reduced caps for the estimated level
        # (instead of the sample's; tests), estimate=False: no estimated level
        self.tune: dict = {}
        self.timings: dict = {}  # with tune["timing"]: seconds per kernel, summed over calls
        self._last = None

    def _module(self):
        if self._mod is None:
            file, names, defines = KERNELS
            if "min_blocks" in self.tune:
                defines = (*defines, f"WFA_AFFINE_MIN_BLOCKS={self.tune['min_blocks']}")
            self._mod = load_module(file, names, defines)
            import cupy

            attrs = cupy.cuda.Device().attributes
            self._sms, self._smem_optin = attrs["MultiProcessorCount"], attrs["MaxSharedMemoryPerBlockOptin"]
        return self._mod

    def _mark(self, what: str) -> None:
        """With tune["timing"]: seconds since the previous mark (device synchronised), added to
        timings[what]; "start" only sets the clock."""
        if not self.tune.get("timing"):
            return
        import time

        import cupy

        cupy.cuda.Device().synchronize()
        now = time.perf_counter()
        if what != "start":
            self.timings[what] = self.timings.get(what, 0.0) + now - self._last
        self._last = now

    @trace.traced("engine warm")
    def warm(self, cfg: AlignConfig) -> None:
        super().warm(cfg)
        self._history.clear()  # the warm-up's made-up pairs say nothing of the user's

    def accepts_cfg(self, cfg: AlignConfig) -> bool:
        return True  # both metrics, end to end and ends-free

    def accepts(self, batch: PairBatch, cfg: AlignConfig) -> np.ndarray:
        return np.ones(batch.n, dtype=bool)

    @property
    def last_counts(self) -> dict:
        """Pairs per kernel level of this thread's last align() call."""
        return self._local.__dict__.setdefault("counts", {})

    @property
    def last_sampled(self) -> int:
        """Pairs this thread's last align() call ran as estimate samples."""
        return self._local.__dict__.get("sampled", 0)

    def align(self, batch: PairBatch, cfg: AlignConfig) -> AlignBatch:
        self._local.counts, self._local.sampled = {}, 0
        with self._stream():
            return align_split(self._align_device, batch, cfg)

    def _align_device(self, batch: PairBatch, cfg: AlignConfig) -> AlignBatch:
        self._module()
        p = cfg.effective_penalties
        pen, g = reduced(p.mismatch, p.gap_open, p.gap_extend)
        want_cigar = not cfg.distance_only
        ef = cfg.ends_free_target
        self._mark("start")
        d_raw, d_meta = self._staging.upload(batch, cfg)
        free = d_free = None
        if ef:  # free target bases at each end: staged with the batch (rows 4 and 5)
            free = np.stack(free_rows(batch), axis=1)
            d_free = (d_meta[4], d_meta[5])
        self._mark("upload")
        n = batch.n
        res = Results(n, want_cigar)
        span = np.zeros((n, 2), np.int64)
        span[:, 1] = batch.t_len
        longest = np.maximum(batch.q_len, batch.t_len)
        gap = forced_gap(batch.q_len, batch.t_len, pen[1], pen[2], bool(ef))
        final = np.full(n, -1, np.int64)  # reduced score of each pair a level found

        def launch(key, todo, plan, d_ucap=None):
            """Queue todo at one plan; returns book(): waits for the results, books the pairs done and
            returns the rest and the reduced scores."""
            collect = self._launch(plan, pen, d_raw, d_meta, d_free, todo, want_cigar, d_ucap)

            def book():
                s, cnt, parts, part, off, tspan = collect()
                done = res.record(todo, s, cnt, parts, off, part, scale=g)
                final[todo[done]] = s[done]
                if want_cigar and ef:
                    good = done & (cnt >= 0)
                    span[todo[good]] = tspan[good]
                self.last_counts[key] = self.last_counts.get(key, 0) + int(done.sum())
                return todo[~done], s

            return book

        def level(key, todo, plan, d_ucap=None):
            """Run todo at one plan now: launch(...)()."""
            return launch(key, todo, plan, d_ucap)()

        reach = end_reach(batch.q_len, batch.t_len, free)

        def plan_for(todo, f, s_cap=None):
            diff = np.abs(batch.q_len[todo] - batch.t_len[todo])
            fbmax = int(free[todo, 0].max()) if ef else 0
            return Plan(f, int(longest[todo].max()), int(diff.max()), pen, want_cigar, fbmax, s_cap,
                        int(reach[todo].max()))

        # per length group: the estimated level (affine_plan.py), then level E2 and the fixed levels for what
        # it left; the few pairs the estimated levels leave run together (one launch per level, not one per
        # group) when they fit one wave of blocks (one per SM at worst). The estimated levels are queued in the
        # turn and their results collected after it (_turn: the next batch's are queued meanwhile).
        groups, left = [], []
        raised = np.full(n, -1, np.int64)  # per pair, level E2's cap (-1: none; _estimated_level sets them)
        with self._turn():
            for members in length_groups(longest):
                todo, skip, book = longest_first(members, longest), members[:0], None
                key = (pen, bool(ef), (max(1, int(longest[members].max())) - 1).bit_length())
                estimated = len(todo) >= max(1, self.estimate_min) and self.tune.get("estimate", True)
                if estimated:
                    todo, skip, book = self._estimated_level(todo, longest, gap, pen, plan_for, level, launch, key,
                                                             raised)
                groups.append((members, key))
                left.append((todo, skip, estimated, book))
        left = [(book()[0] if book else todo, skip, est) for todo, skip, est, book in left]
        rescue = [(t, k) for t, k, est in left if est]
        if len(rescue) > 1 and sum(len(t) + len(k) for t, k in rescue) <= self._sms:
            rescue = [(np.concatenate([t for t, _ in rescue]), np.concatenate([k for _, k in rescue]))]
        for todo, skip in rescue + [(t, k) for t, k, est in left if not est]:
            todo = self._raised_level(todo, raised, longest, plan_for, level)
            for li, f in enumerate(self.levels):
                if li == 1 and len(skip):  # sample pairs above level 0 join here
                    todo = np.concatenate([todo, skip])
                if len(todo):
                    todo, _ = level(f"{NAME}:L{li}", longest_first(todo, longest), plan_for(todo, f))
        for members, key in groups:
            rates = score_rates(final[members], longest[members], gap[members])
            self._history[key] = np.concatenate([self._history.get(key, rates[:0]), rates])[-HISTORY:]
        self._mark("start")
        out = res.finish(gather_kernel(self._mod.get_function("gather_ops")), NAME, text_kernels(self._mod))
        if ef:
            out.t_start, out.t_end = span[:, 0].copy(), span[:, 1].copy()
        self._mark("assemble")
        return out

    def _raised_level(self, todo, raised, longest, plan_for, level):
        """Level E2 (affine_plan.py) for the pairs of todo above their estimated caps (raised[i] >= 0: their
        E2 caps), where its largest cap stays below ESTIMATE_GAIN of level 0's; returns the pairs left for
        the fixed levels (those E2 could not hold, and the pairs it did not take)."""
        has = raised[todo] >= 0
        if not has.any():
            return todo
        some = todo[has]
        s_cap = int(raised[some].max())
        if s_cap >= ESTIMATE_GAIN * plan_for(some, self.levels[0]).s_cap:
            return todo
        d_ucap = to_device(np.clip(raised, 0, s_cap), np.int32)
        above, _ = level(f"{NAME}:E2", longest_first(some, longest), plan_for(some, 0.0, s_cap), d_ucap)
        return np.concatenate([above, todo[~has]])

    @trace.traced("estimated level")
    def _estimated_level(self, todo, longest, gap, pen, plan_for, level, launch, key, raised):
        """Level E (affine_plan.py): the others with caps from the history of key's rates when it holds
        enough of them, else from a sample run first at level 0. Returns the pairs for level 0, the
        sample pairs that level 0 could not hold (for level 1), both longest first, and the queued
        level E's book() (None when it does not run; else the pairs for level E2 and level 0 are what
        book() returns, and raised[todo] their level E2 caps: RAISED times level E's, at least one more)."""
        caps, skip = self.tune.get("caps"), todo[:0]
        forced = caps is not None
        worst = max(pen[0], pen[1] + pen[2])
        past = self._history.get(key)
        if not forced and past is not None and len(past) >= HISTORY_MIN:
            caps = caps_from_rates(past, longest, gap, worst)
        if caps is None:
            step = max(1, min(SAMPLE_EVERY, len(todo) // 16))
            pick = np.zeros(len(todo), bool)
            pick[::step] = True
            sample, todo = todo[pick], todo[~pick]
            self._local.sampled = self.last_sampled + len(sample)
            skip, s = level(f"{NAME}:L0", sample, plan_for(sample, self.levels[0]))
            caps = estimated_caps(s, longest[sample], gap[sample], longest, gap, worst)
            if caps is None or len(todo) == 0:
                return todo, skip, None
        if not forced and caps[todo].max() >= ESTIMATE_GAIN * plan_for(todo, self.levels[0]).s_cap:
            return todo, skip, None
        caps = np.asarray(caps)
        s_cap = max(0, int(caps[todo].max()))
        d_ucap = to_device(np.clip(caps, 0, s_cap), np.int32)
        raised[todo] = np.maximum(np.ceil(RAISED * np.maximum(caps[todo], 0)), np.maximum(caps[todo], 0) + 1)
        return todo, skip, launch(f"{NAME}:E", todo, plan_for(todo, 0.0, s_cap), d_ucap)
