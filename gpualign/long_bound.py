"""An upper bound on the edit distance of two long strings, from exact k-mer anchors.

The long-string kernel prunes a diagonal k at score s once s + |k - kf| exceeds an upper bound U on
the distance; the closer U is to the distance d, the fewer cells it computes (about d^2/2 instead of
d^2 when U is near d). Any path through the edit matrix gives such a bound; this module builds one:

1. k-mers (K = 16, A/C/G/T only) sampled by a hash of their content (the same positions in both
   strings keep a shared k-mer), kept where the k-mer occurs exactly once in each string: anchors.
2. Anchors sorted along the query, thinned to one per even block of K query bases, kept where a
   neighbour lies on a nearby diagonal (isolated ones are chance matches), then pairs that overlap or
   go backwards dropped until the chain is colinear and anchors are K apart on both strings.
3. The path: each anchor an exact match (cost 0), each gap between anchors (and the ends) aligned
   exactly by a pairs engine (the GPU eWFA engine, or the CPU engine); a gap that engine cannot take
   costs max(len_q, len_t), which is always achievable.

The sum is the cost of a real alignment, so U >= d whatever the anchors: a poor anchor chain only
weakens the pruning, never the result. The k-mer work runs with numpy, or on the device
(engines/gpu_anchors.py).
"""

from __future__ import annotations

import time

import numpy as np

from .pack import CODE2

K = 16
SAMPLE_BITS = 3  # keep 1/8 of k-mer positions (by content hash, so both strings keep the same k-mers)
GATHER_BELOW = 0.5  # gaps holding less than this share of the stretches they lie in are gathered for the aligner,
# else those stretches sent (48 Mbp at 8.4%: 84% of the bases in gaps, gathered in ~40x the time of one copy)
MAX_GAP = 4096  # gaps longer than this are not aligned (cost max(len_q, len_t))
_HASH = np.uint32(0x9E3779B1)


def _kmers(s: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(codes, positions) of the sampled k-mers of s (a uint8 array) that hold only ACGT."""
    n = len(s)
    if n < K:
        return np.zeros(0, np.uint32), np.zeros(0, np.int64)
    code = CODE2[s]  # 2-bit codes, 255 for anything but A/C/G/T
    bad = np.concatenate([np.zeros(1, np.int32), np.cumsum(code > 3, dtype=np.int32)])
    c = (code & 3).astype(np.uint32)
    width = 1
    while width < K:  # codes of windows of 2, 4, 8, 16 bases
        c = (c[:-width] << np.uint32(2 * width)) | c[width:]
        width *= 2
    ok = (bad[K:] - bad[:-K]) == 0
    ok &= ((c * _HASH) >> np.uint32(32 - SAMPLE_BITS)) == 0
    pos = np.nonzero(ok)[0]
    return c[pos], pos


def _unique(codes: np.ndarray, pos: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The k-mers occurring once, sorted by code."""
    order = np.argsort(codes)
    sc, sp = codes[order], pos[order]
    if len(sc) == 0:
        return sc, sp
    diff = sc[1:] != sc[:-1]
    one = np.ones(1, dtype=bool)
    single = np.concatenate([one, diff]) & np.concatenate([diff, one])
    return sc[single], sp[single]


def raw_anchors(q: np.ndarray, t: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The sampled k-mers occurring once in q and once in t: (query starts, target starts) by query start
    (int64). engines/gpu_anchors.anchors finds the same on the device."""
    cq, pq = _unique(*_kmers(np.asarray(q)))
    ct, pt = _unique(*_kmers(np.asarray(t)))
    if len(cq) == 0 or len(ct) == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    at = np.minimum(np.searchsorted(ct, cq), len(ct) - 1)
    hit = ct[at] == cq
    a_q, a_t = pq[hit], pt[at[hit]]
    order = np.argsort(a_q)
    return a_q[order].astype(np.int64), a_t[order].astype(np.int64)


def anchors(q, t, find=raw_anchors) -> tuple[np.ndarray, np.ndarray]:
    """Colinear exact K-mer matches: (query starts, target starts), increasing, K apart (host arrays).
    find: raw_anchors, or engines/gpu_anchors.anchors (the same, on the device)."""
    return _colinear(*find(q, t))


def _colinear(a_q: np.ndarray, a_t: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    blk = a_q // K  # at most one anchor per even block of K query bases: K apart along the query
    first = np.concatenate([[True], blk[1:] != blk[:-1]]) & (blk % 2 == 0)
    a_q, a_t = a_q[first], a_t[first]
    diag = a_t - a_q
    if len(diag) > 2:  # drop anchors whose diagonal agrees with neither neighbour (chance matches)
        near = np.abs(np.diff(diag)) <= np.maximum(32, np.diff(a_q) // 4)
        keep = np.concatenate([[False], near]) | np.concatenate([near, [False]])
        a_q, a_t = a_q[keep], a_t[keep]
    for _ in range(64):  # drop both ends of every step that overlaps or goes backwards
        bad = (np.diff(a_q) < K) | (np.diff(a_t) < K)
        if not bad.any():
            return a_q, a_t
        drop = np.concatenate([bad, [False]]) | np.concatenate([[False], bad])
        a_q, a_t = a_q[~drop], a_t[~drop]
    return _greedy(a_q, a_t)


def _greedy(a_q: np.ndarray, a_t: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Fallback (rarely reached): keep each anchor that follows the last kept one."""
    keep = []
    lq = lt = -K
    for i, (x, y) in enumerate(zip(a_q.tolist(), a_t.tolist())):
        if x - lq >= K and y - lt >= K:
            keep.append(i)
            lq, lt = x, y
    return a_q[keep], a_t[keep]


def gaps(a_q: np.ndarray, a_t: np.ndarray, n: int, m: int):
    """The unanchored pieces of the path: (q_start, q_len, t_start, t_len) arrays, ends included."""
    qs = np.concatenate([[0], a_q + K])
    ts = np.concatenate([[0], a_t + K])
    qe = np.concatenate([a_q, [n]])
    te = np.concatenate([a_t, [m]])
    return qs, qe - qs, ts, te - ts


def upper_bound(q: np.ndarray, t: np.ndarray, chain, cfg, find=raw_anchors) -> dict:
    """U >= the edit distance of q and t (uint8 arrays, folded, rule applied): dict(bound, anchors,
    aligned (gaps aligned by the chain), seconds, path). chain: pairs engines for distance-only edit
    pairs. path = (anchor query starts, anchor target starts, each gap's cost): the path behind the
    bound (gaps() gives the gaps' coordinates), an optimal alignment's pieces when bound = distance."""
    from .records import OK, PairBatch
    from .route import run_chain

    t0 = time.perf_counter()
    n, m = len(q), len(t)
    a_q, a_t = anchors(q, t, find)
    qs, ql, ts, tl = gaps(a_q, a_t, n, m)
    cost = np.maximum(ql, tl)
    todo = np.nonzero((ql > 0) & (tl > 0) & (cost <= MAX_GAP))[0]
    aligned = 0
    if len(todo):
        batch = PairBatch.of_pieces(q, t, qs[todo], ql[todo], ts[todo], tl[todo], GATHER_BELOW)
        res, _ = run_chain(batch, chain, cfg)
        ok = res.status == OK
        cost[todo[ok]] = res.score[ok]
        aligned = int(ok.sum())
    return dict(bound=int(cost.sum()), anchors=len(a_q), aligned=aligned, seconds=time.perf_counter() - t0,
                path=(a_q, a_t, cost))
