"""The affine engine's launches: kernels queued in memory-bounded chunks, the turn that lets two
batches overlap on the device, and the shared workspace.

Two batches align at once (GpuAffineEngine.concurrent), each on a CUDA stream of its own. The estimated
levels, nearly all of the kernel time, run one batch at a time (_turn), with one workspace kept for
them from batch to batch (_workspace): a batch queues its levels and lets the next batch queue its own
behind them, then collects its results and does its host work while the device runs the next batch's.
Results are kept on the host and transfers page-lock nothing: with several threads, each new
page-locked buffer held up the other threads' CUDA calls (so to_device copies with ndarray.set).
"""

from __future__ import annotations

import contextlib

import numpy as np

from .. import trace
from ..gpu.staging import to_device
from ._results import gather_kernel
from .affine_plan import Plan

MEMORY_SHARE = 0.5  # of the free device memory, for backtrace slots and rings
WORKSPACE_MAX = 32 << 30  # backtrace + CIGAR memory of one launch at most (_launch sizes it; the engine's default)


def template_flag(flag) -> str:
    return "true" if flag else "false"


class Launcher:
    """GpuAffineEngine's launching half (needs its _mod, _sms, _smem_optin, _local, _ws, _turn_lock,
    _turn_done, workspace_max, tune and _mark)."""

    @contextlib.contextmanager
    def _turn(self):
        """The estimated levels (nearly all of a batch's kernel time) of one batch at a time: the holder
        queues them (its stream first waits for the last holder's: the workspace is theirs in turn) and
        lets go; their results are collected after the turn. So the next batch's estimated levels are
        queued while the device still runs these, and the holder's host work between its levels, its
        last few launches (fixed levels) and its result copies overlap the next batch's kernels."""
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
        # what the level needs, rounded up (repeated sizes: the pool hands back the same block) to a power of
        # two below 1 GiB, else to whole GiB; within the budget and the engine's cap (whole GiB when possible)
        need = nl * plan.pair_bytes()
        need = -(-need >> 30) << 30 if need > 1 << 30 else 1 << max(12, (need - 1).bit_length())
        ws_bytes = min(budget, self.workspace_max, need)
        ws_bytes = (ws_bytes >> 30 << 30 if ws_bytes >= 1 << 30 else ws_bytes >> 12 << 12) if want_cigar else 0
        chunk = min(nl, ws_bytes // max(1, plan.pair_bytes())) if want_cigar else nl
        if slots <= 0 or chunk <= 0:  # not even one pair fits: every pair goes on (next level / CPU)
            return lambda: out
        ef = d_free is not None
        flags = ", ".join(template_flag(f) for f in (want_cigar, ef, plan.in_smem))
        kern = self._mod.get_function(f"wfa_affine<{flags}>")
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
