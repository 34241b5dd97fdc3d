"""GPU engine 2: gap-affine WFA of pairs of any length (kernels/wfa_affine.cu).

One thread block per alignment, each thread taking two adjacent diagonals per pass, a ring of the
last max(x, o+e) + 1 M rows and e + 1 I/D rows (shared memory when it fits, else a per-block slot in
device memory; int16 cells up to 32 kbp), a work queue over resident blocks (longest pairs first),
4 backtrace bits per cell in a per-pair workspace, then a second kernel (a thread per pair) walks the
backtrace and replays it into the CIGAR. It serves the affine metric, the edit metric (x=1, o=0, e=1) for
pairs the eWFA levels cannot hold, and ends-free alignment (query end to end, at most t_free
target bases skipped at each end: `gpualign paf`).

Bounds: pairs are grouped by length (within a factor 2); each group runs at the levels of
LEVELS, a level's score cap being f * longest * max(x, o+e) plus the gap the length difference
forces. A pair above the cap comes back ``exceeded`` and goes to the next level, then to the CPU
engine (WFA2-lib) through the router. Device memory for the backtrace is sized from the cap,
within a share of the free memory; a level that cannot hold even one pair is skipped. The few pairs
that the estimated levels (below) of several groups leave run at the levels together, one launch per
level, when they fit one wave of blocks.

Estimated caps (level "E", groups of ESTIMATE_MIN pairs or more): a sample of the group (every
SAMPLE_EVERY-th pair) runs first at level 0; the CAP_QUANTILE quantile of its scores per base then
gives every other pair its own cap U (its length times that rate, plus its forced gap). The kernel
prunes the cells that cannot end within U (a diamond instead of a triangle: with U near the score,
~40% fewer cells) and the backtrace is sized from the largest U (a smaller cap, quadratically less
memory per pair). A pair whose score is above its U comes back exceeded and runs at level 0: the
estimate only decides speed, never a result. The engine keeps the rates of the latest HISTORY pairs
(their final scores, whatever level found them; infinite for pairs no level held) per penalties, mode
and length class; once it holds HISTORY_MIN of them, a group takes its caps from their quantile and
skips the sample (a launch of a few pairs at level 0, with most of the GPU idle).

Two batches at once (CONCURRENT; pipeline.stream gives each a thread, the engine each thread a CUDA
stream of its own). Alone, a batch left the GPU idle for about a quarter of its time: host work before
and between the levels, the last small launches (the rescue levels: a few pairs, most SMs idle) and
the result copies. The estimated levels, nearly all of the kernel time, run one batch at a time (the
turn, with one workspace kept for them from batch to batch: a pool per stream would hold one each):
a batch queues them and lets the next batch queue its own behind them, then collects its results and
does everything else while the device runs the next batch's. The engine's own results are kept on the
host and its transfers page-lock nothing: with several threads, each new page-locked buffer took
30-120 ms and held up the other threads' CUDA calls (cupy.asarray takes its staging buffers from the
same pinned pool, a new one for each new size, so to_device copies with ndarray.set instead).
"""

from __future__ import annotations

import contextlib
import math
import threading

import numpy as np

from .. import trace
from ..config import AlignConfig
from ..records import AlignBatch, PairBatch
from ._cuda import load_module
from ._device import BatchEngine, Results, Staging, align_split, free_rows, gather_kernel, text_kernels, to_device

NAME = "gpu-affine"
LEVELS = (0.15, 0.6)  # score cap per level, in edits per base of the longest sequence (see module doc)
SMEM_PER_SM = 227 * 1024
SMEM_RING_MAX = SMEM_PER_SM - 8 * 1024  # rings up to this size live in shared memory
SHORT_MAX = 32767  # pairs up to this length keep int16 rings
MEMORY_SHARE = 0.5  # of the free device memory, for backtrace slots and rings
ESTIMATE_MIN = 128  # groups of at least this many pairs get the estimated-cap level (module doc)
SAMPLE_EVERY = 64
CAP_QUANTILE = 0.99
ESTIMATE_GAIN = 0.8  # the estimated level runs only when its largest cap is below this share of level 0's
HISTORY = 4096  # score rates of the latest pairs kept per setting and length class (module doc)
HISTORY_MIN = 512  # rates needed before a group's caps come from them instead of a sample
WORKSPACE_MAX = 32 << 30  # backtrace + CIGAR memory of one launch at most (_launch sizes it)
CONCURRENT = 2  # batches aligned at once (GpuAffineEngine.concurrent)


def _b(flag) -> str:
    return "true" if flag else "false"


def reduced(x: int, o: int, e: int) -> tuple[tuple[int, int, int], int]:
    """Penalties divided by their common divisor (fewer, equivalent score steps) and the divisor."""
    g = math.gcd(x, math.gcd(o, e))
    return (x // g, o // g, e // g), g


def kbound(s: np.ndarray, o: int, e: int, kcap: int) -> np.ndarray:
    """Widest diagonal |k| a cell of score s can have (kernel's kbound)."""
    s = np.asarray(s, dtype=np.int64)
    k = np.where(s < o + e, 0, (s - o) // max(e, 1))
    return np.minimum(k, kcap)


@trace.traced("length_groups")
def length_groups(longest: np.ndarray) -> list:
    """Pair ids grouped by ceil(log2(length)) (lengths within a factor 2 share a plan), shortest
    group first; one group at once when the batch's extremes share a class (the common case)."""
    lo, hi = int(longest.min(initial=1)), int(longest.max(initial=1))
    if (max(lo, 1) - 1).bit_length() == (max(hi, 1) - 1).bit_length():
        return [np.arange(len(longest))]
    group = np.ceil(np.log2(np.maximum(longest, 1))).astype(np.int64)
    return [np.nonzero(group == g)[0] for g in np.nonzero(np.bincount(group))[0]]


def forced_gap(q_len: np.ndarray, t_len: np.ndarray, o: int, e: int, ends_free: bool) -> np.ndarray:
    """The least score the length difference forces (a gap of |n - m|; none when target ends are free)."""
    diff = np.abs(q_len.astype(np.int64) - t_len)
    return np.zeros_like(diff) if ends_free else np.where(diff > 0, o + e * diff, 0)


def score_rates(s: np.ndarray, length: np.ndarray, gap: np.ndarray) -> np.ndarray:
    """(score - forced gap) per base of the longest sequence; infinite where s < 0 (above every cap tried)."""
    return np.where(s >= 0, (s - gap) / np.maximum(length, 1), np.inf)


def estimated_caps(sample_s: np.ndarray, sample_len: np.ndarray, sample_gap: np.ndarray, longest: np.ndarray,
                   gap: np.ndarray, worst: int, quantile: float = CAP_QUANTILE):
    """Per-pair score caps from a sample's scores (reduced units, -1 = above the sample's cap): see
    caps_from_rates."""
    return caps_from_rates(score_rates(sample_s, sample_len, sample_gap), longest, gap, worst, quantile)


def caps_from_rates(rates: np.ndarray, longest: np.ndarray, gap: np.ndarray, worst: int,
                    quantile: float = CAP_QUANTILE):
    """Per-pair score caps: the quantile of the rates (score_rates of a sample or of earlier pairs)
    times each pair's length, plus its forced gap and one operation of slack. None when the rates say
    too little (none, or more than 1 - quantile of them infinite)."""
    if len(rates) == 0:
        return None
    q = float(np.quantile(rates, quantile, method="lower"))
    if not np.isfinite(q):
        return None
    return (np.ceil(max(q, 0.0) * longest) + gap + worst).astype(np.int64)


def end_reach(q_len: np.ndarray, t_len: np.ndarray, free: np.ndarray | None) -> np.ndarray:
    """Per pair, how far its end diagonals lie outside its start diagonals: |m - n| end to end; ends-free
    (starts k in [0, fb], ends in [m - n - fe, m - n]) the larger of m - n - fb and n - m + fe, at least 0."""
    d = t_len.astype(np.int64) - q_len
    if free is None:
        return np.abs(d)
    return np.maximum(np.maximum(d - free[:, 0], free[:, 1] - d), 0)


@trace.traced("longest_first")
def longest_first(ids: np.ndarray, longest: np.ndarray) -> np.ndarray:
    """ids (int32) by decreasing length, the order in which resident blocks take them (long pairs
    first balance the load). Sorted by a 16-bit key (radix sort, ~6x faster than a 64-bit one),
    coarsened when the lengths spread wider: only speed depends on the order."""
    ln = longest[ids]
    if len(ln) == 0:
        return ids.astype(np.int32)
    key = ln.max() - ln
    shift = max(0, int(key.max()).bit_length() - 16)
    return ids[np.argsort((key >> shift).astype(np.uint16), kind="stable")].astype(np.int32)


class Plan:
    """Buffer sizes for one group at one level."""

    def __init__(self, f: float, longest: int, maxdiff: int, pen: tuple[int, int, int], want_cigar: bool,
                 fbmax: int = 0, s_cap: int | None = None, dmax: int | None = None):
        """fbmax: the most free target bases at the start of any pair (ends-free; 0 end to end): every
        row holds that many more diagonals. s_cap: given instead of f (the estimated level).
        dmax: the farthest any pair's end diagonals lie from its start diagonals (end_reach; maxdiff
        when not given)."""
        x, o, e = pen
        self.fbmax = int(fbmax)
        worst = max(x, o + e)
        if s_cap is None:
            s_cap = int(math.ceil(f * longest * worst)) + (o + e * maxdiff if maxdiff else 0) + 2 * worst
        self.s_cap = int(s_cap)
        # A live cell is reachable (s >= o + e * distance from the start diagonals) and can still end
        # within the cap (s + e * distance to the end diagonals <= s_cap: the kernel's diamond), so it
        # lies at most ((s_cap - o) / e + dmax) / 2 from the start diagonals: half the triangle's width.
        dmax = int(maxdiff if dmax is None else dmax)
        self.kcap = int(min(longest, (max(0, self.s_cap - o) // e + dmax + 1) // 2 + 1))
        self.rm, self.ri = worst + 1, e + 1
        cells = (self.rm + 2 * self.ri) * (2 * self.kcap + 3 + self.fbmax)
        # int16 rings in shared memory when the pair length and the size allow, else int32 in device memory
        self.in_smem = longest <= SHORT_MAX and 2 * cells <= SMEM_RING_MAX
        self.ring_bytes = (2 if self.in_smem else 4) * cells
        # backtrace rows: 4-bit cells, each row rounded up to whole bytes (kernel: rb)
        widths = (2 * kbound(np.arange(self.s_cap + 1), o, e, self.kcap) + 2 + self.fbmax) & ~1
        self.rowbase = np.zeros(self.s_cap + 2, np.int64)
        np.cumsum(widths, out=self.rowbase[1:])
        max_ops = self.s_cap // min(x, e)
        self.slot_bt = int(self.rowbase[-1]) // 2 if want_cigar else 0
        self.tok_cap = 2 * max_ops + 8 if want_cigar else 0
        self.cig_cap = min(2 * max_ops + 1, 4 * longest + 1) if want_cigar else 0
        # a power of 2 (64..1024) near an eighth of the widest wavefront (2 kcap): smaller blocks beat
        # fuller ones (H100, 10 kbp at 10%, distance: 256 threads 0.248 s, 512 0.275 s, 1024 0.382 s)
        self.threads = int(min(1024, max(64, 1 << max(1, self.kcap // 4).bit_length() - 1)))

    def pair_bytes(self) -> int:
        """Device memory per pair of a launch (backtrace rows, path tokens, CIGAR)."""
        return self.slot_bt + self.tok_cap + 4 * self.cig_cap

    def resident_per_sm(self) -> int:
        """Blocks per SM: shared-memory rings by occupancy; device-memory rings (long pairs) 2 per SM,
        so that the rings in use stay in L2."""
        by_threads = 2048 // self.threads
        by_mem = SMEM_PER_SM // (self.ring_bytes + 1024) if self.in_smem else 2
        return max(0, min(32, by_threads, by_mem))


class GpuAffineEngine(BatchEngine):
    name = NAME
    pinned_input = True  # batches' sequence bytes in page-locked memory (engines.host_allocator)
    # batches aligned at once (pipeline.stream: one thread each, each on a CUDA stream of its own): while
    # one batch's host work, last small launches and result copies run, the other's kernels fill the GPU
    concurrent = CONCURRENT

    def __init__(self, levels: tuple = LEVELS, estimate_min: int = ESTIMATE_MIN):
        """levels: score caps (edits per base, see module doc); tests force small ones to exercise rescue.
        estimate_min: the smallest group given estimated caps (module doc)."""
        self._mod = None
        self._staging = Staging()
        self.levels = tuple(levels)
        self.estimate_min = estimate_min
        self._local = threading.local()  # per aligning thread: its CUDA stream and its last call's counts
        self._turn_lock = threading.Lock()  # held by the batch whose estimated levels run (_turn)
        self._turn_done = None  # event: the device work of the last turn
        self._ws = None  # the workspace of the estimated levels, kept from batch to batch (_workspace)
        self._history: dict = {}  # (penalties, ends-free, length class) -> latest score rates (module doc)
        # benchmark overrides: threads, per_sm (plan), min_blocks (register cap, before the first call);
        # timing=True: seconds per stage in timings; caps: per-pair reduced caps for the estimated level
        # (instead of the sample's; tests), estimate=False: no estimated level
        self.tune: dict = {}
        self.timings: dict = {}  # with tune["timing"]: seconds per kernel, summed over calls
        self._last = None

    def _module(self):
        if self._mod is None:
            names = tuple(f"wfa_affine<{_b(b)}, {_b(f)}, {_b(s)}>" for b in (0, 1) for f in (0, 1) for s in (0, 1))
            defines = (f"WFA_AFFINE_MIN_BLOCKS={self.tune['min_blocks']}",) if "min_blocks" in self.tune else ()
            self._mod = load_module("wfa_affine.cu", (*names, "wfa_affine_cigar", "gather_ops", "cigar_measure",
                                                      "cigar_write"), defines)
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

    def _stream(self):
        """The calling thread's own CUDA stream (non-blocking): the batches of concurrent threads overlap
        on the device."""
        import cupy

        if getattr(self._local, "stream", None) is None:
            self._local.stream = cupy.cuda.Stream(non_blocking=True)
        return self._local.stream

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

        # per length group: the estimated level (module doc), then the fixed levels for what it left;
        # the few pairs the estimated levels leave run together (one launch per level, not one per group)
        # when they fit one wave of blocks (one per SM at worst). The estimated levels are queued in the
        # turn and their results collected after it (_turn: the next batch's are queued meanwhile).
        groups, left = [], []
        with self._turn():
            for members in length_groups(longest):
                todo, skip, book = longest_first(members, longest), members[:0], None
                key = (pen, bool(ef), (max(1, int(longest[members].max())) - 1).bit_length())
                estimated = len(todo) >= max(1, self.estimate_min) and self.tune.get("estimate", True)
                if estimated:
                    todo, skip, book = self._estimated_level(todo, longest, gap, pen, plan_for, level, launch, key)
                groups.append((members, key))
                left.append((todo, skip, estimated, book))
        left = [(book()[0] if book else todo, skip, est) for todo, skip, est, book in left]
        rescue = [(t, k) for t, k, est in left if est]
        if len(rescue) > 1 and sum(len(t) + len(k) for t, k in rescue) <= self._sms:
            rescue = [(np.concatenate([t for t, _ in rescue]), np.concatenate([k for _, k in rescue]))]
        for todo, skip in rescue + [(t, k) for t, k, est in left if not est]:
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

    @contextlib.contextmanager
    def _turn(self):
        """The estimated levels (nearly all of a batch's kernel time) of one batch at a time: the holder
        queues them (its stream first waits for the last holder's: the workspace is theirs in turn) and
        lets go; their results are collected after the turn. So the next batch's estimated levels are
        queued while the device still runs these, and the holder's host work between its levels, its
        last few launches (fixed levels) and its result copies overlap the next batch's kernels (H100,
        50,000 ONT candidates: the device idle 0.83 s of 3.97 s aligning with the results collected
        inside the turn, 0.43 s of 3.55 s with them collected after it)."""
        import cupy

        with self._turn_lock:
            stream = cupy.cuda.get_current_stream()
            if self._turn_done is not None:
                stream.wait_event(self._turn_done)
            self._local.in_turn = True
            try:
                yield
            finally:
                self._local.in_turn = False
                self._turn_done = stream.record()

    def _workspace(self, nbytes: int):
        """nbytes of device memory for one launch: within the turn, the engine's own buffer (grown when
        needed; each thread's stream has its own pool of cached memory, so one buffer per thread
        would hold twice as much); else a new one."""
        import cupy

        if not getattr(self._local, "in_turn", False):
            return cupy.empty(nbytes, dtype=cupy.uint8)
        if self._ws is None or self._ws.nbytes < nbytes:
            # back to the pool before the larger one is asked for, once this stream's kernels are done with
            # it (the pool may hand it to the stream that first allocated it, another thread's)
            cupy.cuda.get_current_stream().synchronize()
            self._ws = None
            self._ws = cupy.empty(nbytes, dtype=cupy.uint8)
        return self._ws[:nbytes]

    @trace.traced("estimated level")
    def _estimated_level(self, todo, longest, gap, pen, plan_for, level, launch, key):
        """Level E (module doc): the others with caps from the history of key's rates when it holds
        enough of them, else from a sample run first at level 0. Returns the pairs for level 0, the
        sample pairs that level 0 could not hold (for level 1), both longest first, and the queued
        level E's book() (None when it does not run; else the pairs for level 0 are what book()
        returns)."""
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
        s_cap = max(0, int(np.asarray(caps)[todo].max()))
        d_ucap = to_device(np.clip(caps, 0, s_cap), np.int32)
        return todo, skip, launch(f"{NAME}:E", todo, plan_for(todo, 0.0, s_cap), d_ucap)

    @trace.traced("affine level queued")
    def _launch(self, plan: Plan, pen, d_raw, d_meta, d_free, ids: np.ndarray, want_cigar: bool, d_ucap=None):
        """One level over ids, queued in launches bounded by memory (nothing waits for the device here).
        Returns collect(), which waits for them and returns per id: reduced score (-1 exceeded), CIGAR op
        count, then the launches' compacted device CIGAR buffers (a list) with per id the launch's index
        and the offset in its buffer, and (ends-free) the aligned target span. d_ucap: per pair id, a cap
        below the plan's (the estimated level). Each launch's backtrace is read by its CIGAR kernel, queued
        right behind it: within the turn, the next holder's launches may reuse the workspace once those are
        done (_turn); the CIGARs go to a buffer of the launch's own, compacted by collect()."""
        import cupy

        nl = len(ids)
        s_out = np.full(nl, -1, np.int32)
        cnt_out = np.zeros(nl, np.int32)
        off_out = np.zeros(nl, np.int64)
        part_out = np.zeros(nl, np.int64)
        span_out = np.zeros((nl, 2), np.int64)
        cig_parts: list = []
        out = (s_out, cnt_out, cig_parts, part_out, off_out, span_out)  # filled in by collect() below
        threads = self.tune.get("threads", plan.threads)
        slots = self._sms * self.tune.get("per_sm", plan.resident_per_sm())
        pool = cupy.get_default_memory_pool()
        held = self._ws.nbytes if getattr(self._local, "in_turn", False) and self._ws is not None else 0
        budget = int(MEMORY_SHARE * (cupy.cuda.runtime.memGetInfo()[0] + pool.free_bytes() + held))
        budget -= 0 if plan.in_smem else slots * plan.ring_bytes
        # what the level needs, rounded up to a power of two (repeated sizes: the pool hands back the same
        # block), within the budget (whole GiB when possible)
        need = 1 << max(12, (nl * plan.pair_bytes() - 1).bit_length())
        ws_bytes = min(budget, WORKSPACE_MAX, need)
        ws_bytes = (ws_bytes >> 30 << 30 if ws_bytes >= 1 << 30 else ws_bytes >> 12 << 12) if want_cigar else 0
        chunk = min(nl, ws_bytes // max(1, plan.pair_bytes())) if want_cigar else nl
        if slots <= 0 or chunk <= 0:  # not even one pair fits: every pair goes on (next level / CPU)
            return lambda: out
        ef = d_free is not None
        kern = self._mod.get_function(f"wfa_affine<{_b(want_cigar)}, {_b(ef)}, {_b(plan.in_smem)}>")
        smem = plan.ring_bytes if plan.in_smem else 0
        if smem > 48 * 1024 and smem > kern.max_dynamic_shared_size_bytes:
            # the function's cap (not this launch's size), raised once to the device's limit: a cap set per
            # launch could be lowered by a concurrent thread between another's setting and its launch
            kern.max_dynamic_shared_size_bytes = self._smem_optin - kern.shared_size_bytes
        d_ring = cupy.empty(1 if plan.in_smem else slots * plan.ring_bytes // 4, dtype=cupy.int32)
        null = np.uint64(0)
        fb_ptr, fe_ptr = d_free if ef else (null, null)
        x, o, e = pen
        if want_cigar:  # one workspace: backtrace rows, then path tokens (the CIGARs: a buffer per launch)
            d_rowbase = to_device(plan.rowbase, np.int64)
            ws = self._workspace(ws_bytes)
            n_bt = chunk * plan.slot_bt
            d_bt = ws[:n_bt]
            d_tok = ws[n_bt:n_bt + chunk * plan.tok_cap]
        else:
            d_bt = cupy.empty(1, dtype=cupy.uint8)
        launches = []
        for a in range(0, nl, chunk):
            sub = ids[a:a + chunk]
            m = len(sub)
            d_list = to_device(sub, np.int32)
            d_score = cupy.empty(m, dtype=cupy.int32)
            d_kend = cupy.empty(m, dtype=cupy.int32)
            d_counter = cupy.zeros(1, dtype=cupy.int32)
            self._mark("start")
            kern((min(slots, m),), (threads,), (
                d_raw, d_list, np.int32(m), d_meta[0], d_meta[1], d_meta[2], d_meta[3], fb_ptr, fe_ptr,
                np.int32(plan.fbmax), np.int32(x), np.int32(o), np.int32(e), np.int32(plan.s_cap),
                null if d_ucap is None else d_ucap, np.int32(plan.kcap), d_ring, d_bt, np.int64(plan.slot_bt),
                d_score, d_kend, d_counter), shared_mem=smem)
            self._mark("forward")
            if not want_cigar:
                launches.append((a, m, d_score, None, None, None))
                continue
            d_cig = cupy.empty(m * plan.cig_cap, dtype=cupy.uint32)
            d_ncig = cupy.empty(m, dtype=cupy.int32)
            d_span = cupy.empty(2 * m if ef else 1, dtype=cupy.int32)
            # few threads per block: the walks are latency-bound, and spread over every SM each
            # pair's sequence stays in its SM's L1 cache during the replay
            tpb = min(64, -(-m // (2 * self._sms)))
            self._mod.get_function("wfa_affine_cigar")(((m + tpb - 1) // tpb,), (tpb,), (
                d_raw, d_list, np.int32(m), d_meta[0], d_meta[1], d_meta[2], d_meta[3], fb_ptr, fe_ptr,
                np.int32(plan.fbmax), np.int32(x), np.int32(o), np.int32(e), np.int32(plan.kcap), d_rowbase, d_bt,
                np.int64(plan.slot_bt), d_tok, np.int32(plan.tok_cap), d_cig, np.int32(plan.cig_cap), d_score,
                d_kend, d_ncig, d_span if ef else null))
            self._mark("backtrace")
            launches.append((a, m, d_score, d_ncig, d_span, d_cig))

        gather = gather_kernel(self._mod.get_function("gather_ops"))

        def collect():
            for a, m, d_score, d_ncig, d_span, d_cig in launches:
                s_out[a:a + m] = d_score.get()
                if d_ncig is None:
                    continue
                cnt = d_ncig.get()
                cnt_out[a:a + m] = cnt
                if ef:
                    span_out[a:a + m] = d_span.get().reshape(m, 2)
                # compact the fixed-capacity rows on the device
                lens = np.maximum(cnt, 0).astype(np.int64)
                dst = np.zeros(m, np.int64)
                np.cumsum(lens[:-1], out=dst[1:])
                src = np.arange(m, dtype=np.int64) * plan.cig_cap
                off_out[a:a + m] = dst
                part_out[a:a + m] = len(cig_parts)
                cig_parts.append(gather([(d_cig, src, lens, dst)], int(lens.sum())))
                self._mark("compact")
            launches.clear()  # the launches' buffers go back to the pool
            return out

        return collect
