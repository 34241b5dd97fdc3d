"""The divergence of two long strings, estimated in milliseconds: their edit distance over the longer
length, without computing it.

`gpualign genome` prints it (the CPU notice's "sampled divergence", with the time it expects) and
decides with it: the CPU method (engines/cpu_long.py) and the GPU kernel, its band and whether the
anchored bound is worth computing (genome.kernel_options). Only speed and the notice depend on it.

- Pairs of up to EXACT_CELLS DP cells: the exact value (edlib, at most ~25 ms).
- Longer pairs: the mean over WINDOWS, less the highest and the lowest, of a query window's cost per
  base against the target where it lies, plus the shifts between consecutive windows' places (large
  indels the windows step over). A window is looked for in the target within REACH of its relative
  place by the SEED_K-mers they share (the diagonal band most of them fall on), else taken at its
  relative place; it is aligned there in edlib's infix mode with one window of slack either side
  (shifts by small indels cost nothing in it, as they cost next to nothing in the whole alignment).
  A window whose best placement costs RELATED_BELOW or more lies against unrelated sequence (a
  rearrangement): its cost end to end in place is what the whole alignment pays there (~52% for
  random DNA).
- Never below |n - m| / max(n, m), under which the distance cannot be.

Measured (2-core host, 40-140 ms; the windows at their relative places alone, before: ~2 ms):
uniform edits, 200 kbp to 2 Mbp, true 0.9-29%: within 2 points (before: 1.8% read as 4.9%, 0.9% as
3.2%, 8.5% as 11.2%); 1 Mbp of 50 kbp segments of log-normal divergence with four 2-20 kbp indels,
true 8.4-12.5%: 6.1-11.4% (before: 44-52%); the rearranged real E. coli pair: 52.0% against 51.5%;
the real virus and mtDNA pairs: exact (before: 0.0% and 37%). tests/test_genome_cli.py.
"""

from __future__ import annotations

import numpy as np

from .pack import CODE2

EXACT_CELLS = 1 << 30
WINDOW = 4000
WINDOWS = (0.1, 0.3, 0.5, 0.7, 0.9)  # where the windows lie, as fractions of each string
RELATED_BELOW = 0.44  # random DNA: ~0.49 for a window in infix mode against three windows' length
SEED_K = 11  # k-mers looked up in a table of 4^SEED_K entries (16 MB), made once per estimate
REACH = 1 << 16  # target bases searched for a window's k-mers on either side of its relative place
MAX_OCCURRENCES = 8  # k-mers more frequent than this in the searched stretch (repeats) are not used
DIAGONAL_BIN = 256  # k-mer hits are counted per band of this many diagonals
MIN_HITS = 16  # hits in the best band for a placement (random k-mers: ~0.3 per band; 30% edits: ~80)


def estimate(q: bytes, t: bytes) -> float:
    """The estimated edit distance of q and t (folded bytes) over max(len(q), len(t)), in [0, 1]."""
    import edlib

    n, m = len(q), len(t)
    top = max(n, m)
    if min(n, m) == 0:
        return 1.0 if top else 0.0
    if n * m <= EXACT_CELLS:
        return edlib.align(q, t, mode="NW", task="distance")["editDistance"] / top
    w = min(WINDOW, n, m)
    rates, shifts = [], []
    table = np.full(1 << 2 * SEED_K, -1, np.int32)  # k-mer -> its place in the window (_place)
    for frac in WINDOWS:
        a, b = int((n - w) * frac), int((m - w) * frac)
        window = q[a:a + w]
        lo = max(0, b - REACH)
        found = _place(window, t[lo:b + w + REACH], table)
        at = b if found is None else lo + found
        cost = edlib.align(window, t[max(0, at - w):at + 2 * w], mode="HW", task="distance")["editDistance"] / w
        if cost >= RELATED_BELOW:
            cost = edlib.align(window, t[b:b + w], mode="NW", task="distance")["editDistance"] / w
        elif found is not None:
            shifts.append(at - b)
        rates.append(cost)
    jumps = float(np.abs(np.diff(shifts)).sum()) if len(shifts) > 1 else 0.0
    return min(1.0, max(float(np.sort(rates)[1:-1].mean()) + jumps / top, abs(n - m) / top))


def _kmers(s: bytes) -> np.ndarray:
    """The 2-bit codes of s's SEED_K-mers, -1 for those holding anything but A/C/G/T."""
    code = CODE2[np.frombuffer(s, np.uint8)]
    count = len(code) - SEED_K + 1
    if count <= 0:
        return np.zeros(0, np.int64)
    out = np.zeros(count, np.int64)
    for j in range(SEED_K):
        out = (out << 2) | (code[j:j + count] & 3)
    bad = np.concatenate([[0], np.cumsum(code > 3)])
    out[bad[SEED_K:] - bad[:-SEED_K] > 0] = -1
    return out


def _place(window: bytes, stretch: bytes, table: np.ndarray) -> int | None:
    """Where window starts in stretch: the diagonal band that most of their shared k-mers fall on (k-mers
    once in the window, at most MAX_OCCURRENCES times in stretch; its median hit), or None when no band
    holds MIN_HITS. table: all -1 (4^SEED_K entries), left so."""
    a, b = _kmers(window), _kmers(stretch)
    codes, where, count = np.unique(a, return_index=True, return_counts=True)
    keep = (count == 1) & (codes >= 0)
    codes, where = codes[keep], where[keep]
    table[codes] = where
    try:
        found = table[np.maximum(b, 0)]
        hit = np.flatnonzero((found >= 0) & (b >= 0))
    finally:
        table[codes] = -1
    i = found[hit]
    hit = hit[np.bincount(i, minlength=len(a))[i] <= MAX_OCCURRENCES]
    if len(hit) < MIN_HITS:
        return None
    diag = hit - found[hit] + len(a)  # >= 0
    bins = np.bincount(diag // DIAGONAL_BIN)
    best = int(bins.argmax())
    if bins[best] < MIN_HITS:
        return None
    return max(0, int(np.median(diag[diag // DIAGONAL_BIN == best])) - len(a))
