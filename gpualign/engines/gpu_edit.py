"""GPU engine 1: eWFA edit-distance alignment of short pairs (kernels/ewfa.cu).

One warp per alignment, wavefronts and piggybacked backtrace in shared memory,
kernels specialised by the error bound E. Pairs go through the levels
(E32 -> E64 -> E128 with CIGAR; larger levels score-only); a pair beyond the
last level comes back ``exceeded`` and the router sends it on (CPU engine).
ACGT-only pairs use the 2-bit packed compare (packing runs on the GPU); pairs
with other characters use the byte compare of the same kernels, so N/IUPAC
and --n-mismatch are exact too.
"""

from __future__ import annotations

import numpy as np

from .. import pack
from ..config import AlignConfig
from ..records import ENGINE_CODE, EXCEEDED, FAILED, OK, AlignBatch, PairBatch, offsets_from_lengths, segment_index
from ._cuda import load_module

NAME = "gpu-edit"
CIGAR_LEVELS = (32, 64, 128)
DISTANCE_LEVELS = (32, 128, 512)
SMEM_TARGET = 96 * 1024  # shared memory per block we aim for (more warps per block when smaller)
MAX_LEN = 1 << 20  # longer pairs go to other engines


def _smem_words(e: int, bt: bool) -> int:
    d = 2 * e + 3
    w = e // 16 if bt else 0
    return 2 * d + 2 * d * w


def _names():
    names = ["pack2"]
    for bits in (2, 8):
        names += [f"ewfa_align<{e}, {bits}, true>" for e in CIGAR_LEVELS]
        names += [f"ewfa_align<{e}, {bits}, false>" for e in sorted(set(CIGAR_LEVELS + DISTANCE_LEVELS))]
        names.append(f"ewfa_cigar<{bits}>")
    return tuple(names)


class GpuEditEngine:
    name = NAME

    def __init__(self):
        self._mod = None
        self.last_counts: dict = {}

    def _module(self):
        if self._mod is None:
            self._mod = load_module("ewfa.cu", _names())
            import cupy

            self._sms = cupy.cuda.Device().attributes["MultiProcessorCount"]
        return self._mod

    def levels(self, cfg: AlignConfig) -> tuple:
        return DISTANCE_LEVELS if cfg.distance_only else CIGAR_LEVELS

    def accepts_cfg(self, cfg: AlignConfig) -> bool:
        return cfg.metric == "edit"

    def accepts(self, batch: PairBatch, cfg: AlignConfig) -> np.ndarray:
        if not self.accepts_cfg(cfg):
            return np.zeros(batch.n, dtype=bool)
        top = max(self.levels(cfg))
        longest = np.maximum(batch.q_len, batch.t_len)
        return (np.abs(batch.q_len - batch.t_len) <= top) & (longest <= MAX_LEN)

    # -- the device work -------------------------------------------------------------
    def align(self, batch: PairBatch, cfg: AlignConfig) -> AlignBatch:
        import cupy

        mod = self._module()
        n = batch.n
        want_cigar = not cfg.distance_only
        seq = pack.compare_view(batch, cfg.n_mismatch)
        padded = np.zeros((len(seq) + 127) // 64 * 64 + 64, dtype=np.uint8)
        padded[: len(seq)] = seq
        d_raw = cupy.asarray(padded).view(cupy.uint32)
        nwords = len(padded) // 16
        d_packed = cupy.zeros(nwords + 2, dtype=cupy.uint32)
        mod.get_function("pack2")((min(4096, (nwords + 255) // 256),), (256,), (d_raw, d_packed, np.int32(nwords)))
        meta = np.empty((4, n), dtype=np.int32)
        meta[0], meta[1], meta[2], meta[3] = batch.q_off, batch.q_len, batch.t_off, batch.t_len
        d_meta = cupy.asarray(meta)
        d_qpos, d_qlen, d_tpos, d_tlen = (d_meta[i] for i in range(4))
        acgt = pack.all_acgt(batch)

        score = np.full(n, -1, np.int32)
        status = np.full(n, EXCEEDED, np.uint8)
        cig_parts = []  # (pair ids, flat ops, offsets, counts)
        counts: dict = {}
        todo = {2: np.nonzero(acgt)[0].astype(np.int32), 8: np.nonzero(~acgt)[0].astype(np.int32)}
        for e in self.levels(cfg):
            for bits, d_seq in ((2, d_packed), (8, d_raw)):
                ids = todo[bits]
                if len(ids) == 0:
                    continue
                got = self._run_level(mod, e, bits, d_seq, ids, d_qpos, d_qlen, d_tpos, d_tlen, want_cigar)
                s, ops, off, cnt = got
                done = s >= 0
                score[ids[done]] = s[done]
                status[ids[done]] = OK
                if want_cigar:
                    bad = done & (cnt < 0)
                    status[ids[bad]] = FAILED
                    good = done & (cnt >= 0)
                    cig_parts.append((ids[good], ops, off[good], cnt[good]))
                counts[f"gpu-edit:E{e}{'' if bits == 2 else '-bytes'}"] = int(done.sum())
                todo[bits] = ids[~done]
        self.last_counts = {k: v for k, v in counts.items() if v}
        return self._assemble(n, score, status, cig_parts, want_cigar)

    def _run_level(self, mod, e, bits, d_seq, ids, d_qpos, d_qlen, d_tpos, d_tlen, want_cigar):
        import cupy

        nl = len(ids)
        d_list = cupy.asarray(ids)
        d_score = cupy.empty(nl, dtype=cupy.int32)
        w = e // 16
        d_bt = cupy.empty(nl * w if want_cigar else 1, dtype=cupy.uint32)
        kern = mod.get_function(f"ewfa_align<{e}, {bits}, {'true' if want_cigar else 'false'}>")
        per_warp = 4 * _smem_words(e, want_cigar)
        warps = max(1, min(8, SMEM_TARGET // per_warp))
        smem = warps * per_warp
        if smem > 48 * 1024:
            kern.max_dynamic_shared_size_bytes = smem
        grid = max(1, min((nl + warps - 1) // warps, self._sms * 64))
        kern((grid,), (32 * warps,), (d_seq, d_list, np.int32(nl), d_qpos, d_qlen, d_tpos, d_tlen, d_score, d_bt),
             shared_mem=smem)
        s = d_score.get()
        if not want_cigar:
            return s, None, None, None
        cap = np.where(s >= 0, 2 * s.astype(np.int64) + 1, 0)
        off = offsets_from_lengths(cap)
        d_off = cupy.asarray(off)
        d_cig = cupy.empty(max(1, int(cap.sum())), dtype=cupy.uint32)
        d_cnt = cupy.empty(nl, dtype=cupy.int32)
        cig = mod.get_function(f"ewfa_cigar<{bits}>")
        cig(((nl + 127) // 128,), (128,), (d_seq, d_list, np.int32(nl), d_qpos, d_qlen, d_tpos, d_tlen, d_score, d_bt,
                                        np.int32(w), d_off, d_cig, d_cnt))
        return s, d_cig.get(), off, d_cnt.get()

    @staticmethod
    def _assemble(n, score, status, parts, want_cigar) -> AlignBatch:
        engine = np.full(n, ENGINE_CODE[NAME], np.uint8)
        res = AlignBatch(score, status, engine, np.zeros(0, np.uint32), np.zeros(n, np.int64),
                         np.zeros(n, np.int64), want_cigar)
        res.reason = {int(i): "GPU CIGAR replay did not reach the end (internal error)"
                      for i in np.nonzero(status == FAILED)[0]}
        if not want_cigar or not parts:
            return res
        lens = np.zeros(n, np.int64)
        srcs = []
        base = 0
        src_off = np.zeros(n, np.int64)
        for ids, ops, off, cnt in parts:
            lens[ids] = cnt
            src_off[ids] = off + base
            srcs.append(ops)
            base += len(ops)
        flat = np.concatenate(srcs)
        res.cigar = flat[segment_index(src_off, lens)]
        res.cigar_len = lens
        res.cigar_off = offsets_from_lengths(lens)
        return res
