"""GPU engine 2: gap-affine WFA of pairs of any length (kernels/wfa_affine.cu).

One thread block per alignment, threads over diagonals, a ring of the last max(x, o+e) + 1 M rows
and e + 1 I/D rows (shared memory when it fits, else a per-block slot in device memory), one
backtrace byte per cell in a per-block slot, a work queue over resident blocks (longest pairs
first). It serves the affine metric, and the edit metric (x=1, o=0, e=1) for pairs the eWFA
levels cannot hold.

Bounds: pairs are grouped by length (within a factor 2); each group runs at the levels of
LEVELS, a level's score cap being f * longest * max(x, o+e) plus the gap the length difference
forces. A pair above the cap comes back ``exceeded`` and goes to the next level, then to the CPU
engine (WFA2-lib) through the router. Device memory for the backtrace is sized from the cap,
within a share of the free memory; a level that cannot hold even one block is skipped.
"""

from __future__ import annotations

import math

import numpy as np

from ..config import AlignConfig
from ..records import EXCEEDED, FAILED, OK, AlignBatch, PairBatch
from ._cuda import load_module
from ._device import Staging, align_split, assemble

NAME = "gpu-affine"
LEVELS = (0.15, 0.6)  # score cap per level, in edits per base of the longest sequence (see module doc)
SMEM_RING_MAX = 96 * 1024  # rings up to this size live in shared memory
SMEM_PER_SM = 227 * 1024
MEMORY_SHARE = 0.5  # of the free device memory, for backtrace slots and rings
CIGAR_CHUNK_BYTES = 1 << 30  # per-pair CIGAR capacity of one launch, at most


def reduced(x: int, o: int, e: int) -> tuple[tuple[int, int, int], int]:
    """Penalties divided by their common divisor (fewer, equivalent score steps) and the divisor."""
    g = math.gcd(x, math.gcd(o, e))
    return (x // g, o // g, e // g), g


def kbound(s: np.ndarray, o: int, e: int, kcap: int) -> np.ndarray:
    """Widest diagonal |k| a cell of score s can have (kernel's kbound)."""
    s = np.asarray(s, dtype=np.int64)
    k = np.where(s < o + e, 0, (s - o) // max(e, 1))
    return np.minimum(k, kcap)


class Plan:
    """Buffer sizes for one group at one level."""

    def __init__(self, f: float, longest: int, maxdiff: int, pen: tuple[int, int, int], want_cigar: bool):
        x, o, e = pen
        worst = max(x, o + e)
        self.s_cap = int(math.ceil(f * longest * worst)) + (o + e * maxdiff if maxdiff else 0) + 2 * worst
        self.kcap = int(min(max(0, (self.s_cap - o) // e), longest))
        self.rm, self.ri = worst + 1, e + 1
        self.ring_bytes = 4 * (self.rm + 2 * self.ri) * (2 * self.kcap + 3)
        widths = 2 * kbound(np.arange(self.s_cap + 1), o, e, self.kcap) + 1
        self.rowbase = np.zeros(self.s_cap + 2, np.int64)
        np.cumsum(widths, out=self.rowbase[1:])
        max_ops = self.s_cap // min(x, e)
        self.slot_bt = int(self.rowbase[-1]) if want_cigar else 0
        self.tok_cap = 2 * max_ops + 8 if want_cigar else 0
        self.cig_cap = min(2 * max_ops + 1, 4 * longest + 1) if want_cigar else 0
        self.in_smem = self.ring_bytes <= SMEM_RING_MAX
        # about half the widest wavefront per thread sweep (a power of 2, 64..1024)
        self.threads = int(min(1024, max(64, 1 << max(1, self.kcap // 2).bit_length() - 1)))

    def slot_bytes(self) -> int:
        return self.slot_bt + self.tok_cap + (0 if self.in_smem else self.ring_bytes)

    def resident_per_sm(self) -> int:
        """Blocks per SM: shared-memory rings by occupancy; device-memory rings (long pairs) 2 per SM,
        so that the rings in use stay in L2."""
        by_threads = 2048 // self.threads
        by_mem = SMEM_PER_SM // (self.ring_bytes + 1024) if self.in_smem else 2
        return max(0, min(32, by_threads, by_mem))


class GpuAffineEngine:
    name = NAME

    def __init__(self, levels: tuple = LEVELS):
        """levels: score caps (edits per base, see module doc); tests force small ones to exercise rescue."""
        self._mod = None
        self._staging = Staging()
        self.levels = tuple(levels)
        self.last_counts: dict = {}
        self.tune: dict = {}  # benchmark overrides of the plan: threads, per_sm

    def _module(self):
        if self._mod is None:
            self._mod = load_module("wfa_affine.cu", ("wfa_affine<true>", "wfa_affine<false>", "gather_ops"))
            import cupy

            self._sms = cupy.cuda.Device().attributes["MultiProcessorCount"]
        return self._mod

    def accepts_cfg(self, cfg: AlignConfig) -> bool:
        return not cfg.ends_free_target

    def accepts(self, batch: PairBatch, cfg: AlignConfig) -> np.ndarray:
        return np.full(batch.n, self.accepts_cfg(cfg), dtype=bool)

    def align(self, batch: PairBatch, cfg: AlignConfig) -> AlignBatch:
        self.last_counts = {}
        return align_split(self._align_device, batch, cfg)

    def _align_device(self, batch: PairBatch, cfg: AlignConfig) -> AlignBatch:
        self._module()
        p = cfg.effective_penalties
        pen, g = reduced(p.mismatch, p.gap_open, p.gap_extend)
        want_cigar = not cfg.distance_only
        d_raw, d_meta = self._staging.upload(batch, cfg)
        n = batch.n
        score = np.full(n, -1, np.int32)
        status = np.full(n, EXCEEDED, np.uint8)
        parts = []
        longest = np.maximum(batch.q_len, batch.t_len)
        group = np.ceil(np.log2(np.maximum(longest, 1))).astype(np.int64)
        for cls in np.unique(group):
            todo = np.nonzero(group == cls)[0]
            todo = todo[np.argsort(-longest[todo], kind="stable")].astype(np.int32)  # longest first
            for li, f in enumerate(self.levels):
                if len(todo) == 0:
                    break
                diff = np.abs(batch.q_len[todo] - batch.t_len[todo])
                plan = Plan(f, int(longest[todo].max()), int(diff.max()), pen, want_cigar)
                s, cnt, d_cig, off = self._run(plan, pen, d_raw, d_meta, todo, want_cigar)
                done = s >= 0
                score[todo[done]] = s[done] * g
                status[todo[done]] = OK
                if want_cigar:
                    bad = done & (cnt < 0)
                    status[todo[bad]] = FAILED
                    good = done & (cnt >= 0)
                    parts.append((todo[good], d_cig, off[good], cnt[good]))
                key = f"{NAME}:L{li}"
                self.last_counts[key] = self.last_counts.get(key, 0) + int(done.sum())
                todo = todo[~done]
        return assemble(self._mod.get_function("gather_ops"), NAME, n, score, status, parts, want_cigar)

    def _run(self, plan: Plan, pen, d_raw, d_meta, ids: np.ndarray, want_cigar: bool):
        """One level over ids. Returns per id: reduced score (-1 exceeded), CIGAR op count, and the
        compacted device CIGAR buffer with per-id offsets."""
        import cupy

        nl = len(ids)
        pool = cupy.get_default_memory_pool()
        free = cupy.cuda.runtime.memGetInfo()[0] + pool.free_bytes()
        threads = self.tune.get("threads", plan.threads)
        per_sm = self.tune.get("per_sm", plan.resident_per_sm())
        slots = min(nl, self._sms * per_sm, int(MEMORY_SHARE * free) // max(1, plan.slot_bytes()))
        s_out = np.full(nl, -1, np.int32)
        cnt_out = np.zeros(nl, np.int32)
        off_out = np.zeros(nl, np.int64)
        if slots <= 0:  # not even one block fits: every pair goes on (next level / CPU)
            return s_out, cnt_out, cupy.zeros(1, cupy.uint32), off_out
        kern = self._mod.get_function(f"wfa_affine<{'true' if want_cigar else 'false'}>")
        smem = plan.ring_bytes if plan.in_smem else 0
        if smem > 48 * 1024:
            kern.max_dynamic_shared_size_bytes = smem
        d_ring = cupy.empty(1 if plan.in_smem else slots * plan.ring_bytes // 4, dtype=cupy.int32)
        d_rowbase = cupy.asarray(plan.rowbase)
        d_bt = cupy.empty(max(1, slots * plan.slot_bt), dtype=cupy.uint8)
        d_tok = cupy.empty(max(1, slots * plan.tok_cap), dtype=cupy.uint8)
        x, o, e = pen
        chunk = max(1, CIGAR_CHUNK_BYTES // max(1, 4 * plan.cig_cap)) if want_cigar else nl
        cig_parts, base = [], 0
        for a in range(0, nl, chunk):
            sub = ids[a:a + chunk]
            m = len(sub)
            d_list = cupy.asarray(sub)
            d_score = cupy.empty(m, dtype=cupy.int32)
            d_ncig = cupy.zeros(m, dtype=cupy.int32)
            d_cig = cupy.empty(max(1, m * plan.cig_cap), dtype=cupy.uint32)
            d_counter = cupy.zeros(1, dtype=cupy.int32)
            grid = min(slots, m)
            kern((grid,), (threads,), (
                d_raw, d_list, np.int32(m), d_meta[0], d_meta[1], d_meta[2], d_meta[3],
                np.int32(x), np.int32(o), np.int32(e), np.int32(plan.s_cap), np.int32(plan.kcap),
                np.int32(1 if plan.in_smem else 0), d_ring, d_rowbase, d_bt, np.int64(plan.slot_bt),
                d_tok, np.int32(plan.tok_cap), d_cig, np.int32(plan.cig_cap), d_score, d_ncig, d_counter),
                shared_mem=smem)
            s_out[a:a + m] = d_score.get()
            if want_cigar:  # compact the fixed-capacity rows on the device
                cnt = d_ncig.get()
                cnt_out[a:a + m] = cnt
                lens = np.maximum(cnt, 0).astype(np.int64)
                dst = np.zeros(m, np.int64)
                np.cumsum(lens[:-1], out=dst[1:])
                total = int(lens.sum())
                d_dst = cupy.empty(max(1, total), dtype=cupy.uint32)
                src = np.arange(m, dtype=np.int64) * plan.cig_cap
                self._mod.get_function("gather_ops")(((m + 127) // 128,), (128,), (
                    d_cig, cupy.asarray(src), cupy.asarray(lens.astype(np.int32)), cupy.asarray(dst), d_dst,
                    np.int32(m)))
                off_out[a:a + m] = dst + base
                base += len(d_dst)
                cig_parts.append(d_dst)
        d_all = cig_parts[0] if len(cig_parts) == 1 else cupy.concatenate(cig_parts) if cig_parts else \
            cupy.zeros(1, cupy.uint32)
        return s_out, cnt_out, d_all, off_out
