"""`gpualign genome` without --distance-only: an optimal alignment (packed CIGAR) of one long pair.

GPU: the distance from the kernel genome_pair.kernel_options picks (the bit-parallel one gives a first
Hirschberg split with it); when the anchored upper bound (long_bound.py) equals the distance, its path
of anchors and gaps is an optimal one and gives the pieces, else Hirschberg splits from the whole pair.
hirschberg.align_path splits the pieces further (gpu_long.BpSplitter, a level's pieces side by side)
and the batched engines (eWFA, affine WFA with edit penalties, the CPU rescue) align the leaves. CPU: edlib's path mode or WFA2-lib BiWFA (cpu_long.path), in a child process.
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


def leaf_chain(cfg: AlignConfig) -> list:
    """The batched engines that align the leaves of gpu_path (close with close_chain)."""
    from .engines import select_engines

    return select_engines(AlignConfig(metric="edit", device="gpu", threads=cfg.threads))[0]


def close_chain(chain: list) -> None:
    for e in chain:
        e.close()


def anchored_pieces(n: int, m: int, path) -> hirschberg.Pieces:
    """The pieces of long_bound's path (its anchors, exact matches of K bases, and the gaps between them
    with their costs), in order. When the bound equals the distance every piece's cost is its own
    distance (a cheaper piece would give a cheaper whole), so the pieces are an optimal path's."""
    from .long_bound import K, gaps

    a_q, a_t, cost = path
    qs, ql, ts, tl = gaps(np.asarray(a_q, np.int64), np.asarray(a_t, np.int64), n, m)
    k = len(a_q)
    qa, ta = np.empty(2 * k + 1, np.int64), np.empty(2 * k + 1, np.int64)
    qb, tb, d = np.empty_like(qa), np.empty_like(qa), np.zeros(2 * k + 1, np.int64)
    qa[0::2], qb[0::2], ta[0::2], tb[0::2], d[0::2] = qs, qs + ql, ts, ts + tl, cost
    qa[1::2], ta[1::2] = a_q, a_t
    qb[1::2], tb[1::2] = np.asarray(a_q) + K, np.asarray(a_t) + K
    return hirschberg.Pieces(qa, qb, ta, tb, d)


def gpu_path(q: np.ndarray, t: np.ndarray, cfg: AlignConfig, plan, bound: dict | None, progress=None,
             chain=None):
    """(distance, packed CIGAR, stats) on the GPU, or None when the bit-parallel kernel cannot take
    the strings (more than 31 distinct symbols). plan: genome_pair.kernel_options; bound: long_bound's dict
    (gpu_bound(..., detail=True)) or None. The distance comes from the kernel the plan picks (the
    bit-parallel one also gives the first split); when it equals the anchored bound, the bound's path
    gives the pieces (how = "anchors"), else Hirschberg starts from the whole pair (how = "split").
    stats: how, cells (bit-parallel DP cells), levels, leaves, first_s (distance and first split),
    split_s (the other levels' splits), leaves_s. chain: the engine chain that aligns the leaves (leaf_chain's,
    kept by the caller for its pairs), or None: one started and closed for this pair."""
    from .engines import gpu_long

    n, m = len(q), len(t)
    t0 = time.perf_counter()
    upper = bound["bound"] if bound else None
    cut = None
    if plan.kernel == "wfa":
        r = gpu_long.distance(q, t, upper=upper, warp_extend=plan.warp_extend, progress=progress)
    else:
        r = gpu_long.bp_distance(q, t, upper=upper, guess=plan.band_guess, split=m >= 2, progress=progress)
        if r is None:
            return None
        cut = r.get("cut")
    d = r["distance"]
    if bound and bound["bound"] == d:
        how, pieces = "anchors", anchored_pieces(n, m, bound["path"])
    elif cut is not None:
        i, j, d1 = cut
        how = "split"
        pieces = hirschberg.Pieces(*(np.array(v, np.int64) for v in ([0, i], [i, n], [0, j], [j, m], [d1, d - d1])))
    else:
        how, pieces = "split", hirschberg.Pieces.one(n, m, d)
    first_s = time.perf_counter() - t0
    try:
        splitter = gpu_long.BpSplitter(q, t)
    except ValueError:  # more than 31 distinct symbols
        return None
    own = chain is None
    if own:
        chain = leaf_chain(cfg)
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
        if own:
            close_chain(chain)
    return d, ops, dict(how=how, cells=r["cells"] + splitter.cells, levels=len(levels),
                        leaves=levels[-1]["pieces"], first_s=first_s, split_s=levels[-1]["at"] - t0 - first_s,
                        leaves_s=sum(leaves_s))
