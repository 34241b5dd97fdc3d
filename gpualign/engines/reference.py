"""Plain O(nm) dynamic programming in numpy: the obviously-correct oracle.

Scores only, global alignment, same character rule and penalty convention as
the engines. Rows are computed with a prefix-minimum, so the cost is O(nm)
numpy work and O(n) Python iterations: meant for inputs up to a few kbp.
"""

from __future__ import annotations

import numpy as np

from ..config import Penalties
from ..pack import equal

INF = np.int64(1) << 60


def _arrays(query: bytes, target: bytes):
    return np.frombuffer(query, dtype=np.uint8), np.frombuffer(target, dtype=np.uint8)


def edit_distance(query: bytes, target: bytes, n_mismatch: bool = False) -> int:
    q, t = _arrays(query, target)
    m = len(t)
    ar = np.arange(m + 1, dtype=np.int64)
    prev = ar.copy()
    for i in range(1, len(q) + 1):
        cost = (~equal(np.full(m, q[i - 1], np.uint8), t, n_mismatch)).astype(np.int64)
        tmp = np.empty(m + 1, dtype=np.int64)
        tmp[0] = i
        tmp[1:] = np.minimum(prev[1:] + 1, prev[:-1] + cost)
        prev = np.minimum.accumulate(tmp - ar) + ar
    return int(prev[m])


def affine_score(query: bytes, target: bytes, p: Penalties, n_mismatch: bool = False, t_begin_free: int = 0,
                 t_end_free: int = 0) -> int:
    """Gotoh: mismatch x, a gap of length l costs o + l*e, match 0. Global, except that up to
    t_begin_free / t_end_free target bases may be skipped for free at the start / end (ends-free)."""
    q, t = _arrays(query, target)
    n, m = len(q), len(t)
    x, o, e = p.mismatch, p.gap_open, p.gap_extend
    ar = np.arange(m + 1, dtype=np.int64)
    fb = min(t_begin_free, m)
    H = np.where(ar <= fb, 0, o + (ar - fb) * e)
    F = np.full(m + 1, INF, dtype=np.int64)
    for i in range(1, n + 1):
        F = np.minimum(F + e, H + o + e)
        G = np.empty(m + 1, dtype=np.int64)
        G[0] = o + i * e
        cost = np.where(equal(np.full(m, q[i - 1], np.uint8), t, n_mismatch), 0, x)
        G[1:] = np.minimum(H[:-1] + cost, F[1:])
        pref = np.minimum.accumulate(G - ar * e)
        E = np.full(m + 1, INF, dtype=np.int64)
        E[1:] = pref[:-1] + o + ar[1:] * e
        H = np.minimum(G, E)
    return int(H[max(0, m - t_end_free):].min())


def score(query: bytes, target: bytes, metric: str, p: Penalties, n_mismatch: bool = False) -> int:
    if metric == "edit":
        return edit_distance(query, target, n_mismatch)
    return affine_score(query, target, p, n_mismatch)
