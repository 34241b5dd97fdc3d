"""`gpualign genome` without --distance-only: an optimal alignment (packed CIGAR) of one long pair.

GPU: the bit-parallel kernel gives the distance and a first Hirschberg split at once (bp_distance,
two halves met in the middle); hirschberg.align_path splits the pieces further (gpu_long.BpSplitter,
a level's pieces side by side) and the batched engines (eWFA, affine WFA with edit penalties, the CPU
rescue) align the leaves. CPU: edlib's path mode or WFA2-lib BiWFA (cpu_long.path), in a child process.
The strings carry the character rule already (genome._apply_rule), so every comparison is on bytes.
"""

from __future__ import annotations

import time

import numpy as np

from . import hirschberg
from .config import AlignConfig
from .records import OK, PairBatch, offsets_from_lengths, segment_index


def leaf_aligner(chain, cfg: AlignConfig):
    """align_leaves for hirschberg.align_path: the leaves through the engine chain (edit metric, CIGARs),
    in batches of at most cfg.batch_bases bases; each leaf must come back at its known distance."""
    from .route import run_chain

    leaf_cfg = AlignConfig(metric="edit", device=cfg.device, threads=cfg.threads, batch_bases=cfg.batch_bases,
                           batch_pairs=cfg.batch_pairs)

    def align_leaves(q: np.ndarray, t: np.ndarray, p: hirschberg.Pieces):
        n, m = p.qb - p.qa, p.tb - p.ta
        size = np.cumsum(n + m)
        ops, lens = [], []
        start = 0
        while start < len(p):
            base = size[start - 1] if start else 0
            stop = max(start + 1, int(np.searchsorted(size, base + leaf_cfg.batch_bases, side="right")))
            stop = min(stop, start + leaf_cfg.batch_pairs, len(p))
            idx = np.arange(start, stop)
            seq = np.concatenate([q[segment_index(p.qa[idx], n[idx])], t[segment_index(p.ta[idx], m[idx])]])
            res, _ = run_chain(PairBatch.from_joined(seq, n[idx], m[idx]), chain, leaf_cfg)
            bad = (res.status != OK) | (res.score != p.d[idx])
            if bad.any():
                k = int(np.argmax(bad))
                raise RuntimeError(f"alignment path: a leaf of {int(n[idx][k])} x {int(m[idx][k])} came back "
                                   f"{res.reason.get(k, 'at ' + str(int(res.score[k])))}, its distance is "
                                   f"{int(p.d[idx][k])}")
            ops.append(res.cigar[segment_index(res.cigar_off, res.cigar_len)])
            lens.append(res.cigar_len)
            start = stop
        ln = np.concatenate(lens)
        return np.concatenate(ops), offsets_from_lengths(ln), ln

    return align_leaves


def gpu_path(q: np.ndarray, t: np.ndarray, cfg: AlignConfig, upper: int | None, guess: int, progress=None):
    """(distance, packed CIGAR, stats) on the GPU, or None when the bit-parallel kernel cannot take
    the strings (more than 31 distinct symbols). stats: cells (bit-parallel DP cells), levels, leaves,
    first_s (the distance and first split), split_s (the other levels' splits), leaves_s."""
    from .engines import gpu_long, select_engines

    n, m = len(q), len(t)
    t0 = time.perf_counter()
    r = gpu_long.bp_distance(q, t, upper=upper, guess=guess, split=m >= 2, progress=progress)
    if r is None:
        return None
    d = r["distance"]
    if r.get("cut") is None:  # (an empty string: no split)
        pieces = hirschberg.Pieces.one(n, m, d)
    else:
        i, j, d1 = r["cut"]
        pieces = hirschberg.Pieces(*(np.array(v, np.int64) for v in ([0, i], [i, n], [0, j], [j, m], [d1, d - d1])))
    first_s = time.perf_counter() - t0
    splitter = gpu_long.BpSplitter(q, t)
    chain, _ = select_engines(AlignConfig(metric="edit", device="gpu", threads=cfg.threads))
    levels = []

    def report(info):
        levels.append(dict(info, at=time.perf_counter()))
        if progress is not None:
            progress(info)

    align = leaf_aligner(chain, cfg)
    leaves_s = []

    def timed_leaves(*args):
        t1 = time.perf_counter()
        out = align(*args)
        leaves_s.append(time.perf_counter() - t1)
        return out

    try:
        ops = hirschberg.align_path(q, t, pieces, splitter, timed_leaves, report)
    finally:
        for e in chain:
            getattr(e, "close", lambda: None)()
    return d, ops, dict(cells=r["cells"] + splitter.cells, levels=len(levels), leaves=levels[-1]["pieces"],
                        first_s=first_s, split_s=levels[-1]["at"] - t0 - first_s, leaves_s=sum(leaves_s))
