"""The affine engine's plan: which pairs run together, at which score cap, in how much memory.

Levels. Pairs are grouped by length (within a factor 2); each group runs at the levels of LEVELS, a
level's score cap being f * longest * max(x, o+e) plus the gap the length difference forces. A pair
above the cap comes back ``exceeded`` and goes to the next level, then to the CPU engine (WFA2-lib)
through the router. Device memory for the backtrace is sized from the cap (Plan).

Estimated caps (level "E", groups of ESTIMATE_MIN pairs or more): a sample of the group (every
SAMPLE_EVERY-th pair) runs first at level 0; the CAP_QUANTILE quantile of its scores per base then gives
every other pair its own cap U (its length times that rate, plus its forced gap). The kernel prunes the
cells that cannot end within U (a diamond instead of a triangle) and the backtrace is sized from the
largest U. A pair whose score is above its U comes back exceeded and runs at RAISED times its U (level
E2, pruned the same way; where E2's largest cap stays below ESTIMATE_GAIN of level 0's), then at level 0:
the estimate decides speed only, never a result. (A pair takes as many score steps at any cap; the cap sets
how many cells each step keeps.) The engine keeps the rates of the latest HISTORY pairs per penalties, mode
and length class; once it holds HISTORY_MIN of them a group takes its caps from their quantile and skips
the sample.
"""

from __future__ import annotations

import math

import numpy as np

from .. import trace

LEVELS = (0.15, 0.6)  # score cap per level, in edits per base of the longest sequence (module doc)
SMEM_PER_SM = 227 * 1024
SMEM_RING_MAX = SMEM_PER_SM - 8 * 1024  # rings up to this size live in shared memory
BLOCK_SMEM = 1024 + 256  # shared memory a block takes besides its ring: the driver's 1 KB, the kernel's own (sh_step)
SHORT_MAX = 32767  # pairs up to this length keep int16 rings
ESTIMATE_MIN = 128  # groups of at least this many pairs get the estimated-cap level (module doc)
SAMPLE_EVERY = 64
CAP_QUANTILE = 0.99
ESTIMATE_GAIN = 0.8  # the estimated level runs only when its largest cap is below this share of level 0's
HISTORY = 4096  # score rates of the latest pairs kept per setting and length class (module doc)
HISTORY_MIN = 512  # rates needed before a group's caps come from them instead of a sample
RAISED = 1.5  # a pair above its estimated cap runs next at this multiple of it (level E2; module doc)


def reduced(x: int, o: int, e: int) -> tuple[tuple[int, int, int], int]:
    """Penalties divided by their common divisor (fewer, equivalent score steps) and the divisor."""
    g = math.gcd(x, math.gcd(o, e))
    return (x // g, o // g, e // g), g


def kbound(s: np.ndarray, o: int, e: int, kcap: int) -> np.ndarray:
    """Widest diagonal |k| a cell of score s can have (kernel's kbound)."""
    s = np.asarray(s, dtype=np.int64)
    k = np.where(s < o + e, 0, (s - o) // max(e, 1))
    return np.minimum(k, kcap)


@trace.traced("length_groups")
def length_groups(longest: np.ndarray) -> list:
    """Pair ids grouped by ceil(log2(length)) (lengths within a factor 2 share a plan), shortest
    group first; one group at once when the batch's extremes share a class (the common case)."""
    lo, hi = int(longest.min(initial=1)), int(longest.max(initial=1))
    if (max(lo, 1) - 1).bit_length() == (max(hi, 1) - 1).bit_length():
        return [np.arange(len(longest))]
    group = np.ceil(np.log2(np.maximum(longest, 1))).astype(np.int64)
    return [np.nonzero(group == g)[0] for g in np.nonzero(np.bincount(group))[0]]


def forced_gap(q_len: np.ndarray, t_len: np.ndarray, o: int, e: int, ends_free: bool) -> np.ndarray:
    """The least score the length difference forces (a gap of |n - m|; none when target ends are free)."""
    diff = np.abs(q_len.astype(np.int64) - t_len)
    return np.zeros_like(diff) if ends_free else np.where(diff > 0, o + e * diff, 0)


def score_rates(s: np.ndarray, length: np.ndarray, gap: np.ndarray) -> np.ndarray:
    """(score - forced gap) per base of the longest sequence; infinite where s < 0 (above every cap tried)."""
    return np.where(s >= 0, (s - gap) / np.maximum(length, 1), np.inf)


def estimated_caps(sample_s: np.ndarray, sample_len: np.ndarray, sample_gap: np.ndarray, longest: np.ndarray,
                   gap: np.ndarray, worst: int, quantile: float = CAP_QUANTILE):
    """Per-pair score caps from a sample's scores (reduced units, -1 = above the sample's cap): see
    caps_from_rates."""
    return caps_from_rates(score_rates(sample_s, sample_len, sample_gap), longest, gap, worst, quantile)


def caps_from_rates(rates: np.ndarray, longest: np.ndarray, gap: np.ndarray, worst: int,
                    quantile: float = CAP_QUANTILE):
    """Per-pair score caps: the quantile of the rates (score_rates of a sample or of earlier pairs)
    times each pair's length, plus its forced gap and one operation of slack. None when the rates say
    too little (none, or more than 1 - quantile of them infinite)."""
    if len(rates) == 0:
        return None
    q = float(np.quantile(rates, quantile, method="lower"))
    if not np.isfinite(q):
        return None
    return (np.ceil(max(q, 0.0) * longest) + gap + worst).astype(np.int64)


def end_reach(q_len: np.ndarray, t_len: np.ndarray, free: np.ndarray | None) -> np.ndarray:
    """Per pair, how far its end diagonals lie outside its start diagonals: |m - n| end to end; ends-free
    (starts k in [0, fb], ends in [m - n - fe, m - n]) the larger of m - n - fb and n - m + fe, at least 0."""
    d = t_len.astype(np.int64) - q_len
    if free is None:
        return np.abs(d)
    return np.maximum(np.maximum(d - free[:, 0], free[:, 1] - d), 0)


@trace.traced("longest_first")
def longest_first(ids: np.ndarray, longest: np.ndarray) -> np.ndarray:
    """ids (int32) by decreasing length, the order in which resident blocks take them (long pairs
    first balance the load). Sorted by a 16-bit key (radix sort, much faster than a 64-bit one),
    coarsened when the lengths spread wider: only speed depends on the order."""
    ln = longest[ids]
    if len(ln) == 0:
        return ids.astype(np.int32)
    key = ln.max() - ln
    shift = max(0, int(key.max()).bit_length() - 16)
    return ids[np.argsort((key >> shift).astype(np.uint16), kind="stable")].astype(np.int32)


class Plan:
    """Buffer sizes for one group at one level."""

    def __init__(self, f: float, longest: int, maxdiff: int, pen: tuple[int, int, int], want_cigar: bool,
                 fbmax: int = 0, s_cap: int | None = None, dmax: int | None = None):
        """fbmax: the most free target bases at the start of any pair (ends-free; 0 end to end): every
        row holds that many more diagonals. s_cap: given instead of f (the estimated level).
        dmax: the farthest any pair's end diagonals lie from its start diagonals (end_reach; maxdiff
        when not given)."""
        x, o, e = pen
        self.fbmax = int(fbmax)
        worst = max(x, o + e)
        if s_cap is None:
            s_cap = int(math.ceil(f * longest * worst)) + (o + e * maxdiff if maxdiff else 0) + 2 * worst
        self.s_cap = int(s_cap)
        # A live cell is reachable (s >= o + e * distance from the start diagonals) and can still end
        # within the cap (s + e * distance to the end diagonals <= s_cap: the kernel's diamond), so it
        # lies at most ((s_cap - o) / e + dmax) / 2 from the start diagonals: half the triangle's width.
        dmax = int(maxdiff if dmax is None else dmax)
        self.kcap = int(min(longest, (max(0, self.s_cap - o) // e + dmax + 1) // 2 + 1))
        self.rm, self.ri = worst + 1, e + 1
        cells = (self.rm + 2 * self.ri) * (2 * self.kcap + 3 + self.fbmax)
        # int16 rings in shared memory when the pair length and the size allow, else int32 in device memory
        self.in_smem = longest <= SHORT_MAX and 2 * cells <= SMEM_RING_MAX
        self.ring_bytes = (2 if self.in_smem else 4) * cells
        # backtrace rows: 4-bit cells, each row rounded up to whole bytes (kernel: rb)
        widths = (2 * kbound(np.arange(self.s_cap + 1), o, e, self.kcap) + 2 + self.fbmax) & ~1
        self.rowbase = np.zeros(self.s_cap + 2, np.int64)
        np.cumsum(widths, out=self.rowbase[1:])
        max_ops = self.s_cap // min(x, e)
        self.slot_bt = int(self.rowbase[-1]) // 2 if want_cigar else 0
        self.tok_cap = 2 * max_ops + 8 if want_cigar else 0
        self.cig_cap = min(2 * max_ops + 1, 4 * longest + 1) if want_cigar else 0
        # a power of 2 (64..1024) near an eighth of the widest wavefront (2 kcap): smaller blocks beat
        # fuller ones (docs/notes/benchmark-history.md)
        self.threads = int(min(1024, max(64, 1 << max(1, self.kcap // 4).bit_length() - 1)))

    def pair_bytes(self) -> int:
        """Device memory per pair of a launch (backtrace rows, path tokens, CIGAR)."""
        return self.slot_bt + self.tok_cap + 4 * self.cig_cap

    def resident_per_sm(self) -> int:
        """Blocks per SM: shared-memory rings by occupancy; device-memory rings (long pairs) 2 per SM,
        so that the rings in use stay in L2."""
        by_threads = 2048 // self.threads
        by_mem = SMEM_PER_SM // (self.ring_bytes + BLOCK_SMEM) if self.in_smem else 2
        return max(0, min(32, by_threads, by_mem))
