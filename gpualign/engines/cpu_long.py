"""CPU distance for very long strings: WFA2-lib score-only (BiWFA, O(s) memory) or edlib.

WFA costs about O(n + d^2) and edlib O(n * d / 64): WFA wins for close strings, edlib for distant
ones. The divergence estimate (divergence.py) picks: above ``EDLIB_ABOVE`` edlib runs, else WFA2-lib.
Either way the result is exact.
"""

from __future__ import annotations

import numpy as np

from ..divergence import estimate as estimate_divergence

EDLIB_ABOVE = 0.08


def choose(q: bytes, t: bytes) -> str:
    return "edlib" if estimate_divergence(q, t) > EDLIB_ABOVE else "wfa"


# the expected time, for the user (one core of a 2-core host, Python 3.11): edlib 1 Mbp at 10%, 8.6 s;
# WFA2-lib BiWFA 1-2 Mbp at 0.5-1%, 0.2 s
EDLIB_ND_PER_S = 1.1e10  # length x distance per second
WFA_D2_PER_S = 5e8  # distance^2 per second
WFA_N_PER_S = 1e9  # bases per second (the matching runs)


def plan(q: bytes, t: bytes, method: str = "auto") -> tuple[str, float, float]:
    """(method, sampled divergence, expected seconds) of distance(q, t, method): "trivial" where a side is
    empty. edlib's time is bounded by the whole matrix's (a 1 kbp record against a 1 Mbp one: 0.1 s, not the
    band's minutes)."""
    if not q or not t:
        return "trivial", 0.0 if q == t else 1.0, 0.0
    rate = estimate_divergence(q, t)
    if method == "auto":
        method = "edlib" if rate > EDLIB_ABOVE else "wfa"
    n = max(len(q), len(t))
    d = rate * n
    seconds = min(n * d, len(q) * len(t)) / EDLIB_ND_PER_S if method == "edlib" else \
        d * d / WFA_D2_PER_S + n / WFA_N_PER_S
    return method, rate, seconds


def distance(q: bytes, t: bytes, method: str = "auto") -> tuple[int, str]:
    """Exact Levenshtein distance of two byte strings (already folded / rule-applied)."""
    if not q or not t:
        return max(len(q), len(t)), "trivial"
    if method == "auto":
        method = choose(q, t)
    if method == "edlib":
        import edlib

        return int(edlib.align(q, t, mode="NW", task="distance")["editDistance"]), "edlib"
    from pywfa import WavefrontAligner

    from .cpu_wfa import wfa_text

    al = WavefrontAligner(distance="levenshtein", span="end-to-end", heuristic=None, scope="score",
                          memory_mode="biwfa", max_steps=0, max_memory=0)
    s = al.wavefront_align(wfa_text(t), wfa_text(q))
    if al.status != 0:
        raise RuntimeError(f"WFA2-lib stopped with status {al.status}")
    return int(abs(s)), "wfa"


# the alignment path costs more than the distance: edlib's Hirschberg recursion runs its DP about twice,
# BiWFA about twice (measured on the 2-core host: 200 kbp pairs, 1-10%)
PATH_FACTOR = 2.5


def path(q: bytes, t: bytes, method: str = "auto") -> tuple[np.ndarray, str]:
    """An optimal alignment of two byte strings (already folded / rule-applied) as a packed CIGAR, in
    O(n + m) memory: edlib's path mode (Hirschberg's recursion inside) or WFA2-lib BiWFA."""
    from ..cigar import D, I, pack_runs

    if not q or not t:
        return pack_runs([D, I], [len(t), len(q)]), "trivial"
    if method == "auto":
        method = choose(q, t)
    if method == "edlib":
        import edlib

        from ..cigar import from_text

        return from_text(edlib.align(q, t, mode="NW", task="path")["cigar"]), "edlib"
    from pywfa import WavefrontAligner

    from .cpu_wfa import sam_codes, wfa_text

    from ..config import AlignConfig

    al = WavefrontAligner(**AlignConfig(metric="edit").to_pywfa_kwargs(long_pairs=True))
    al.wavefront_align(wfa_text(t), wfa_text(q))
    if al.status != 0:
        raise RuntimeError(f"WFA2-lib stopped with status {al.status}")
    runs = np.array(al.cigartuples, dtype=np.int64).reshape(-1, 2)  # (WFA op, length), WFA's I/D orientation
    return pack_runs(sam_codes(runs[:, 0]), runs[:, 1]), "wfa"
