"""GPU engine 4: general scoring (kernels/dp.cu) -- global, local and semi-global alignment with a match
bonus or a substitution matrix and affine gaps, DNA or protein, scores and CIGARs as the cpu-dp engine
gives them (the same score; on ties the CIGAR may differ, both optimal).

One thread per pair: the pairs of a batch are sorted by length so that a warp's 32 pairs need about the
same room, and launched a group of warps at a time, so that the direction bits (4 per cell, for the
traceback) of a launch stay within DIR_BYTES. Pairs of more than MAX_CELLS cells or whose scores could
reach SCORE_LIMIT, and matrices of more than MAX_LETTERS letters, are left to cpu-dp: one thread walks a pair's cells one after another, so a
batch of a few long pairs keeps few threads busy (250 pairs of 10 kbp, scores only: 9.9 GCUPS on an
H100 against parasail's 27.7 on 16 cores; a pair spread over a warp or a block is the way on). Empty
sequences are written down here, as cpu-dp does.
"""

from __future__ import annotations

import numpy as np

from .. import scoring
from ..config import AlignConfig
from ..records import ENGINE_CODE, OK, AlignBatch, PairBatch, offsets_from_lengths, segment_index
from ._cuda import load_module
from ._device import BatchEngine, align_split
from ._staging import Staging
from .cpu_dp import _empty_side, _ranges

NAME = "gpu-dp"
MODES = {"global": 0, "local": 1, "semi-global": 2}
ROWS = 16  # query rows per stripe (dp.cu's ROWS): 16 cells per direction word
MAX_LETTERS = 32  # the matrix lives in shared memory
MAX_CELLS = 1 << 22  # larger pairs go to cpu-dp
SCORE_LIMIT = 1 << 28  # and pairs whose scores could reach it (dp.cu's -infinity is -2^29, int32 lanes)
DIR_BYTES = 2 << 30  # direction words per launch
BLOCK = 128


def _names() -> tuple:
    names = [f"dp_fill<{m}, {'true' if t else 'false'}>" for m in MODES.values() for t in (True, False)]
    return tuple(names + [f"dp_trace<{m}>" for m in MODES.values()] + ["dp_gather"])


def letter_table(cfg: AlignConfig, sub: scoring.Substitution) -> np.ndarray:
    """uint8[256]: a byte's letter index in sub (--unknown's mapping applied; characters the table
    lacks were refused by scoring.check_batch before)."""
    lut = np.zeros(256, np.uint8)
    lut[[ord(c) for c in sub.letters]] = np.arange(len(sub.letters), dtype=np.uint8)
    remap = scoring.input_map(sub, cfg.scoring.unknown)
    return lut if remap is None else lut[np.frombuffer(remap, np.uint8)]


def warp_plan(ql: np.ndarray, tl: np.ndarray, order: np.ndarray, want: bool):
    """order padded to whole warps (-1), and per warp: its longest target, its boundary rows' and
    direction words' sizes."""
    pad = -len(order) % 32
    slots = np.concatenate([order, np.full(pad, -1, np.int64)])
    lanes = slots.reshape(-1, 32)
    valid = lanes >= 0
    maxn = np.where(valid, tl[np.maximum(lanes, 0)], 0).max(axis=1)
    stripes = -(-np.where(valid, ql[np.maximum(lanes, 0)], 0).max(axis=1) // ROWS)
    bound = (maxn + 1) * 32
    words = stripes * maxn * 32 if want else np.zeros_like(maxn)
    return slots, maxn, bound, words


def launches(words: np.ndarray) -> list[tuple[int, int]]:
    """Warp ranges [w0, w1) whose direction words fit DIR_BYTES (at least one warp each)."""
    out, w0, total = [], 0, 0
    for w, x in enumerate((words * 8).tolist()):
        if w > w0 and total + x > DIR_BYTES:
            out.append((w0, w))
            w0, total = w, 0
        total += x
    if w0 < len(words):
        out.append((w0, len(words)))
    return out


def _exclusive(x: np.ndarray) -> np.ndarray:
    out = np.zeros(len(x), np.int64)
    np.cumsum(x[:-1], out=out[1:])
    return out


class GpuDpEngine(BatchEngine):
    """General scoring (cfg.general) on the GPU: the pairs within its size limits."""

    name = NAME
    pinned_input = True  # batches' bytes in page-locked memory (engines.host_allocator), staged ahead

    def __init__(self):
        self._mod = None
        self._staging = Staging()
        self._tables: dict = {}  # cfg -> its substitution table (a matrix file is read once)

    def _module(self):
        if self._mod is None:
            self._mod = load_module("dp.cu", _names())
        return self._mod

    def _table(self, cfg: AlignConfig) -> scoring.Substitution:
        sub = self._tables.get(cfg)
        if sub is None:
            sub = self._tables[cfg] = scoring.substitution(cfg)
        return sub

    def accepts_cfg(self, cfg: AlignConfig) -> bool:
        return cfg.general and len(self._table(cfg).letters) <= MAX_LETTERS

    def accepts(self, batch: PairBatch, cfg: AlignConfig) -> np.ndarray:
        if not self.accepts_cfg(cfg):
            return np.zeros(batch.n, dtype=bool)
        p = cfg.effective_penalties  # |a path's score| <= (n + m) (max |S| + o + e)
        per_base = int(np.abs(self._table(cfg).array()).max()) + p.gap_open + p.gap_extend
        ql, tl = batch.q_len.astype(np.int64), batch.t_len.astype(np.int64)
        return (ql * tl <= MAX_CELLS) & ((ql + tl) * per_base < SCORE_LIMIT)

    def align(self, batch: PairBatch, cfg: AlignConfig) -> AlignBatch:
        return align_split(self._align_device, batch, cfg)

    def _align_device(self, batch: PairBatch, cfg: AlignConfig) -> AlignBatch:
        import cupy

        mod = self._module()
        sub = self._table(cfg)
        mode, want = MODES[cfg.scoring.mode], not cfg.distance_only
        gaps = cfg.parasail_gaps()
        n = batch.n
        ql, tl = batch.q_len.astype(np.int64), batch.t_len.astype(np.int64)
        live = np.flatnonzero((ql > 0) & (tl > 0))
        order = live[np.lexsort((tl[live], ql[live]))]
        slots, maxn, bound, words = warp_plan(ql, tl, order, want)
        d_raw, d_meta = self._staging.upload(batch, cfg)  # (prefetched while the batch before aligned)
        d = dict(zip(("qoff", "qlen", "toff", "tlen"), d_meta))
        d_codes = cupy.asarray(letter_table(cfg, sub))[d_raw]  # letter indices, made on the device
        d_matrix = cupy.asarray(np.ascontiguousarray(sub.array().T).astype(np.int32))  # [target][query]
        k = len(sub.letters)
        d_score, d_i, d_j = (cupy.zeros(n, cupy.int32) for _ in range(3))
        d_count, d_qs, d_ts = (cupy.zeros(n, cupy.int32) for _ in range(3))
        seg = np.zeros(n, np.int64)  # where each pair's ops start in the gathered CIGARs
        pieces, base = [], 0
        for w0, w1 in launches(words):
            sel = slots[w0 * 32:w1 * 32]
            nt = len(sel)
            args = (d_codes, cupy.asarray(sel.astype(np.int32)), np.int32(nt), d["qoff"], d["qlen"], d["toff"],
                    d["tlen"], cupy.asarray(maxn[w0:w1].astype(np.int32)), cupy.asarray(_exclusive(bound[w0:w1])),
                    cupy.asarray(_exclusive(words[w0:w1])))
            d_bh = cupy.empty(int(bound[w0:w1].sum()), cupy.int32)
            d_bv = cupy.empty_like(d_bh)
            d_dir = cupy.empty(max(1, int(words[w0:w1].sum())), cupy.uint64)
            grid = (-(-nt // BLOCK),)
            mod.get_function(f"dp_fill<{mode}, {'true' if want else 'false'}>")(
                grid, (BLOCK,), (*args, d_matrix, np.int32(k), np.int32(gaps[0]), np.int32(gaps[1]),
                                 d_bh, d_bv, d_dir, d_score, d_i, d_j), shared_mem=4 * k * k)
            del d_bh, d_bv
            if not want:
                continue
            room = np.where(sel >= 0, ql[np.maximum(sel, 0)] + tl[np.maximum(sel, 0)], 0)
            d_off = cupy.asarray(_exclusive(room))
            d_ops = cupy.empty(max(1, int(room.sum())), cupy.uint32)
            mod.get_function(f"dp_trace<{mode}>")(grid, (BLOCK,), (*args, d_dir, d_i, d_j, d_off, d_ops, d_count,
                                                                   d_qs, d_ts))
            del d_dir
            cnt = np.where(sel >= 0, cupy.asnumpy(d_count)[np.maximum(sel, 0)], 0).astype(np.int64)
            dst = _exclusive(cnt)
            d_out = cupy.empty(max(1, int(cnt.sum())), cupy.uint32)
            mod.get_function("dp_gather")(grid, (BLOCK,), (args[1], np.int32(nt), d_off, d_count,
                                                           cupy.asarray(dst), d_ops, d_out))
            seg[sel[sel >= 0]] = base + dst[sel >= 0]
            pieces.append(cupy.asnumpy(d_out)[:int(cnt.sum())])
            base += int(cnt.sum())
        score = cupy.asnumpy(d_score)
        clen = cupy.asnumpy(d_count).astype(np.int64)
        ends = np.stack([cupy.asnumpy(x).astype(np.int64) for x in (d_qs, d_i, d_ts, d_j)], axis=1)
        for p in np.flatnonzero((ql == 0) | (tl == 0)).tolist():  # empty sequences: written down here
            score[p], run = _empty_side(cfg.scoring.mode, int(ql[p]), int(tl[p]), gaps)
            ends[p] = (0, ql[p], 0, tl[p]) if run or cfg.scoring.mode == "global" else 0
            if want and run:
                pieces.append(np.array([ln << 4 | op for op, ln in run], np.uint32))
                seg[p], clen[p] = base, len(run)
                base += len(run)
        if not want:
            clen[:] = 0
        flat = np.concatenate(pieces) if pieces else np.zeros(0, np.uint32)
        cigar = flat[segment_index(seg, clen)] if want else np.zeros(0, np.uint32)
        rng = ends if want else _ranges(cfg.scoring.mode, False, None, None, clen, ql, tl)
        res = AlignBatch(score.astype(np.int32), np.full(n, OK, np.uint8), np.full(n, ENGINE_CODE[NAME], np.uint8),
                         cigar, offsets_from_lengths(clen), clen, want, {})
        res.q_start, res.q_end, res.t_start, res.t_end = (rng[:, c].copy() for c in range(4))
        return res
