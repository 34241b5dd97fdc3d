"""GPU engine 1: eWFA edit-distance alignment of short pairs (kernels/ewfa.cu).

One warp per alignment, wavefronts and piggybacked backtrace in shared memory,
kernels specialised by the error bound E. Pairs go through the levels
(E32 -> E64 -> E128 with CIGAR; larger levels score-only); a pair beyond the
last level comes back ``exceeded`` and the router sends it on (the affine GPU
engine with edit penalties, then the CPU engine).
ACGT-only pairs use the 2-bit packed compare (packing runs on the GPU); pairs
with other characters use the byte compare of the same kernels, so N/IUPAC
and --n-mismatch are exact too.
"""

from __future__ import annotations

import numpy as np

from .. import trace
from ..config import AlignConfig
from ..gpu import arrays
from ..gpu.kernels import load_module
from ..gpu.staging import Staging
from ..records import AlignBatch, PairBatch
from ._device import BatchEngine, align_split
from ._results import SlotResults

NAME = "gpu-edit"
CIGAR_LEVELS = (32, 64, 128)
DISTANCE_LEVELS = (32, 128, 512)
SMEM_TARGET = 96 * 1024  # shared memory per block we aim for (more warps per block when smaller)
MAX_LEN = 1 << 20  # longer pairs go to other engines
SAMPLE_EVERY = 8  # batches between two samples of where to start; the batches between start where the one
# before them would have (next_level): a sample's launch and its wait for the device saved, speed only at stake


def _smem_words(e: int, bt: bool) -> int:
    d = 2 * e + 3
    w = e // 16 if bt else 0
    return 2 * d + 2 * d * w


KERNELS = ("ewfa.cu", ("pack2", "ewfa_cigar", "book_level", "gather_slots", "ewfa_align", "cigar_measure",
                      "cigar_write"), ())  # (file, names, defines): every kernel this engine loads (engines/variants.py)


def start_level(levels: tuple, sample_scores: np.ndarray) -> int:
    """First level to try: the smallest that holds 80% of a sample's scores (exceeding ones count as
    beyond every level). Only speed depends on it: pairs above it still escalate."""
    if len(sample_scores) == 0:
        return levels[0]
    s = np.sort(np.where(sample_scores < 0, np.iinfo(np.int32).max, sample_scores))
    q = s[-(-4 * (len(s) - 1) // 5)]  # the 80% quantile, the higher of two neighbours (np.quantile's "higher")
    for e in levels:
        if q <= e:
            return e
    return levels[-1]


def next_level(levels: tuple, first: int, done_at: dict, n: int) -> int:
    """The next batch's first level from this one's, which started at `first`: the smallest from there at
    which 80% of its n pairs were done (done_at: level -> pairs done there), as start_level reads a sample.
    Pairs done at `first` may have needed less: only a sample can tell (SAMPLE_EVERY)."""
    acc = 0
    for e in levels[levels.index(first):]:
        acc += done_at.get(e, 0)
        if 5 * acc >= 4 * n:
            return e
    return levels[-1]


def _all_within(batch: PairBatch, top: int) -> bool:
    """Does every pair have |q_len - t_len| <= top and both lengths <= MAX_LEN? (the batch's length bounds)"""
    q_min, q_max, t_min, t_max = batch.length_bounds()
    return max(q_max, t_max) <= MAX_LEN and max(q_max - t_min, t_max - q_min) <= top


class GpuEditEngine(BatchEngine):
    name = NAME
    pinned_input = True  # batches' sequence bytes in page-locked memory (engines.host_allocator)

    def __init__(self, first_level: int | None = None):
        """first_level: first level to try (None = chosen per batch from a sample; tests force 32)."""
        self._mod = None
        self._staging = Staging()
        self.first_level = first_level
        self.last_counts: dict = {}  # pairs per kernel level of the last align() call
        self._start: dict = {}  # levels -> (the next batch's first level, batches left before a sample)
        self._smem_set: set = set()  # dynamic shared memory sizes the kernel has been allowed

    def _module(self):
        if self._mod is None:
            self._mod = load_module(*KERNELS)
            import cupy

            self._sms = cupy.cuda.Device().attributes["MultiProcessorCount"]
        return self._mod

    def start(self) -> None:
        self._start = {}
        super().start()

    def warm(self, cfg: AlignConfig) -> None:
        super().warm(cfg)
        self._start = {}  # (learnt from the warm-up's pairs else)

    def levels(self, cfg: AlignConfig) -> tuple:
        return DISTANCE_LEVELS if cfg.distance_only else CIGAR_LEVELS

    def accepts_cfg(self, cfg: AlignConfig) -> bool:
        return cfg.metric == "edit" and not cfg.ends_free_target

    def accepts(self, batch: PairBatch, cfg: AlignConfig) -> np.ndarray:
        if not self.accepts_cfg(cfg):
            return np.zeros(batch.n, dtype=bool)
        top = max(self.levels(cfg))
        ql, tl = batch.q_len, batch.t_len
        if batch.n and _all_within(batch, top):
            return np.ones(batch.n, dtype=bool)  # every pair, from the length bounds (no pass over the pairs)
        longest = np.maximum(ql, tl)
        return (np.abs(ql - tl) <= top) & (longest <= MAX_LEN)

    def prefetch(self, batch: PairBatch, cfg: AlignConfig) -> None:
        """As BatchEngine.prefetch; the batch's length bounds, which accepts() reads, are computed here
        too (on the queueing thread, off the aligner's path)."""
        if self.accepts_cfg(cfg):
            batch.length_bounds()
        super().prefetch(batch, cfg)

    # -- the device work -------------------------------------------------------------
    @trace.traced("edit upload")
    def _upload(self, batch: PairBatch, cfg: AlignConfig):
        """Raw bytes (pinned, one copy) and the 2-bit packing made on the device."""
        import cupy

        d_raw, d_meta = self._staging.upload(batch, cfg)
        nwords = len(d_raw) // 16
        d_packed = cupy.empty(nwords + 2, dtype=cupy.uint32)
        d_packed[-2:].data.memset_async(0, 8)  # (a cupy fill costs a kernel and its Python side)
        self._mod.get_function("pack2")((min(4096, (nwords + 255) // 256),), (256,),
                                        (d_raw.view(cupy.uint32), d_packed, np.int32(nwords)))
        return d_packed, d_raw.view(cupy.uint32), d_meta

    def align(self, batch: PairBatch, cfg: AlignConfig) -> AlignBatch:
        """Device out-of-memory halves the batch (down to a few pairs, then CPU rescue); batches over
        MAX_BATCH_BASES (32-bit offsets on the device) are split first. last_counts adds up every
        device run of this call."""
        self.last_counts = {}
        return align_split(self._align_device, batch, cfg)

    def _align_device(self, batch: PairBatch, cfg: AlignConfig) -> AlignBatch:
        mod = self._module()
        n = batch.n
        want_cigar = not cfg.distance_only
        d_packed, d_raw, d_meta = self._upload(batch, cfg)
        dev = (d_packed, d_raw, d_meta[0], d_meta[1], d_meta[2], d_meta[3])
        levels = self.levels(cfg)
        learnt = self._start.get(levels)
        if self.first_level is not None:  # the smallest level that holds first_level
            first = next((e for e in levels if e >= self.first_level), levels[-1])
        elif learnt is not None and learnt[1] > 0:  # where the batch before would have started
            first = learnt[0]
        else:  # a small distance-only sample at the top level picks where to start
            # evenly spread over the batch, made on the device: a host-to-device copy now would queue
            # behind the next batch's upload
            sample = arrays.arange(0, n, max(1, n // 1024), np.int32)[:1024]
            scores = self._run_level(levels[-1], dev, sample, len(sample), False)[0]
            first = start_level(levels, scores.get())
            learnt = (first, SAMPLE_EVERY)

        res = SlotResults(mod, n, want_cigar)
        todo, left = arrays.arange(0, n, dtype=np.int32), n  # pair ids still to align, on the device
        done_at = {}
        for e in levels[levels.index(first):]:
            if left == 0:
                break
            s, mode, ops, cnt = self._run_level(e, dev, todo, left, want_cigar)
            todo = res.book(todo, left, s, mode, cnt, ops, 2 * e + 1)
            left, two_bit, other = res.settle()
            done_at[e] = two_bit + other
            for key, v in ((f"gpu-edit:E{e}", two_bit), (f"gpu-edit:E{e}-bytes", other)):
                if v:
                    self.last_counts[key] = self.last_counts.get(key, 0) + v
        if self.first_level is None and n:
            self._start[levels] = (next_level(levels, first, done_at, n), learnt[1] - 1)
        return res.finish(NAME)

    @trace.traced("edit level")
    def _run_level(self, e, dev, ids, nl, want_cigar):
        """One level over the pair ids[:nl] (device int32). Returns device arrays per entry: score (-1
        beyond e), compare mode (2 or 8) and, with CIGARs, the ops (2e + 1 slots per entry: s edits
        make at most 2s + 1 runs) and each entry's op count (-1: replay failed)."""
        import cupy

        mod = self._mod
        d_packed, d_raw, d_qpos, d_qlen, d_tpos, d_tlen = dev
        d_score = cupy.empty(nl, dtype=cupy.int32)
        d_mode = cupy.empty(nl, dtype=cupy.uint8)
        w = e // 16
        d_bt = cupy.empty(nl * w if want_cigar else 1, dtype=cupy.uint32)
        kern = mod.get_function("ewfa_align")  # one kernel for every level (E and BT are arguments)
        per_warp = 4 * _smem_words(e, want_cigar)
        warps = max(1, min(8, SMEM_TARGET // per_warp))
        smem = warps * per_warp
        if smem > 48 * 1024 and smem not in self._smem_set:  # (the attribute read is a driver call)
            if smem > kern.max_dynamic_shared_size_bytes:
                kern.max_dynamic_shared_size_bytes = smem
            self._smem_set.add(smem)
        grid = max(1, min((nl + warps - 1) // warps, self._sms * 64))
        kern((grid,), (32 * warps,), (np.int32(e), np.int32(want_cigar), d_packed, d_raw, ids, np.int32(nl), d_qpos,
                                      d_qlen, d_tpos, d_tlen, d_score, d_mode, d_bt), shared_mem=smem)
        if not want_cigar:
            return d_score, d_mode, None, None
        stride = 2 * e + 1
        d_cnt = cupy.empty(nl, dtype=cupy.int32)
        d_cig = cupy.empty(nl * stride, dtype=cupy.uint32)
        mod.get_function("ewfa_cigar")(((nl + 127) // 128,), (128,),
                                       (d_packed, d_raw, ids, np.int32(nl), d_qpos, d_qlen, d_tpos, d_tlen,
                                        d_score, d_mode, d_bt, np.int32(w), np.int32(stride), d_cig, d_cnt))
        return d_score, d_mode, d_cig, d_cnt
