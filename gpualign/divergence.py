"""The divergence of two long strings, estimated in milliseconds: their edit distance over the longer
length, without computing it.

`gpualign genome` prints it (the CPU notice's "sampled divergence", with the time it expects) and
decides with it: the CPU method (engines/cpu_long.py) and the GPU kernel, its band and whether the
anchored bound is worth computing (genome_pair.kernel_options). Only speed and the notice depend on it.

- Pairs of up to EXACT_SMALL DP cells, or up to EXACT_CELLS where the windows below expect edlib's
  work (longer length x distance) under EXACT_WORK: the exact value (edlib).
- Otherwise the mean over WINDOWS, less the highest and the lowest, of a query window's cost per
  base against the target where it lies, plus the shifts between consecutive windows' places (large
  indels the windows step over). A window is looked for in the target within REACH of its relative
  place by the SEED_K-mers they share (the diagonal band most of them fall on: the window's k-mers
  at every base in a table made once per process, the target's at every 4th base looked up), else
  taken at its relative place; it is aligned there in edlib's infix mode with SLACK, or WIDE_SLACK
  when not placed, either side (shifts by small indels cost nothing in it, as they cost next to
  nothing in the whole alignment). A window whose best placement costs RELATED_BELOW or more (edlib
  stops there) lies against unrelated sequence (a rearrangement): its cost end to end in place is
  what the whole alignment pays there (~52% for random DNA).
- Never below |n - m| / max(n, m), under which the distance cannot be.

Time (2-core host, CPU time, median of 11 calls): 5 Mbp at 1% and 10%, 48 Mbp at 8.4%, 3.2 Mbp at
47% edits: 3.5-4 ms; the real E. coli pair: 6.5 ms; the exact ones: at most ~10 ms (32 kbp at 10%).
Accuracy: uniform edits, 200 kbp to 2 Mbp, true 0.9-29%: within 3 points, mostly 1 (before the
k-mer placement: 1.8% read as 4.9%, 0.9% as 3.2%, 8.5% as 11.2%); 1 Mbp of 50 kbp segments of
log-normal divergence with four 2-20 kbp indels, true 8.4-12.5%: 6.1-11.4% (before: 44-52%); the
rearranged real E. coli pair: 52.4% against 51.5%; the real virus and mtDNA pairs: exact (before:
0.0% and 37%). tests/test_genome_cli.py.
"""

from __future__ import annotations

import threading

import numpy as np

from .pack import CODE2

EXACT_SMALL = 1 << 24  # pairs of up to this many DP cells: the exact distance (edlib, ~1 ms at most)
EXACT_CELLS = 1 << 30  # pairs of up to this many: exact too where the windows expect it cheap:
EXACT_WORK = 6 * 10 ** 7  # their longer length x distance at most (edlib: ~5 ms on a 2-core host)
WINDOW = 2000  # bases of a window whose cost is measured
SEED_WINDOW = 4000  # bases around it whose k-mers place it
WINDOWS = (0.1, 0.3, 0.5, 0.7, 0.9)  # where the windows lie, as fractions of each string
RELATED_BELOW = 0.44  # random DNA: ~0.486 for a window in infix mode against 3-5 windows' length
SEED_K = 11  # k-mers looked up in a table of 4^SEED_K entries (8 MB), made once per process
REACH = 1 << 15  # target bases searched for a window's k-mers on either side of its relative place
MAX_OCCURRENCES = 4  # k-mers more frequent than this among the stretch's sampled ones (repeats) are not used
DIAGONAL_BIN = 256  # k-mer hits are counted per band of this many diagonals
MIN_HITS = 8  # hits in the best band for a placement (random k-mers: ~0.03 per band; 30% edits: ~20)
SLACK = DIAGONAL_BIN  # target bases either side of a placed window
WIDE_SLACK = WINDOW  # target bases either side of a window not placed (indels shift it)

_BYTES = -(-SEED_K // 4)  # packed bytes that hold a k-mer at a multiple of 4
_table: np.ndarray | None = None  # k-mer -> its place in the seed window, -1 elsewhere (between uses too)
_table_lock = threading.Lock()


def estimate(q, t) -> float:
    """The estimated edit distance of q and t (folded, bytes or any uint8 buffer such as a numpy array:
    read in place) over max(len(q), len(t)), in [0, 1]."""
    import edlib

    q, t = memoryview(q).cast("B"), memoryview(t).cast("B")
    n, m = len(q), len(t)
    top = max(n, m)
    if min(n, m) == 0:
        return 1.0 if top else 0.0
    rate = _windows(q, t) if n * m > EXACT_SMALL else 0.0
    if n * m <= EXACT_CELLS and rate * top * top <= EXACT_WORK:
        return edlib.align(bytes(q), bytes(t), mode="NW", task="distance")["editDistance"] / top
    return rate


def _windows(q: memoryview, t: memoryview) -> float:
    """The estimate from WINDOWS (the module's docstring)."""
    import edlib

    n, m = len(q), len(t)
    top = max(n, m)
    w, sw = min(WINDOW, n, m), min(SEED_WINDOW, n, m)
    inset = (sw - w) // 2  # the cost window's offset in the seed window
    rates, shifts = [], []
    for frac in WINDOWS:
        a, b = int((n - sw) * frac), int((m - sw) * frac)
        lo = max(0, b - REACH)
        found = _place(q[a:a + sw], t[lo:b + sw + REACH])
        window = bytes(q[a + inset:a + inset + w])
        at = (b if found is None else lo + found) + inset
        slack = WIDE_SLACK if found is None else SLACK
        cost = edlib.align(window, bytes(t[max(0, at - slack):at + w + slack]), mode="HW", task="distance",
                           k=int(RELATED_BELOW * w))["editDistance"]
        if cost < 0:  # RELATED_BELOW or more
            cost = edlib.align(window, bytes(t[b + inset:b + inset + w]), mode="NW", task="distance")["editDistance"]
        elif found is not None:
            shifts.append(at - b - inset)
        rates.append(cost / w)
    jumps = float(np.abs(np.diff(shifts)).sum()) if len(shifts) > 1 else 0.0
    return min(1.0, max(float(np.sort(rates)[1:-1].mean()) + jumps / top, abs(n - m) / top))


def _kmers(s) -> np.ndarray:
    """The 2-bit codes of s's SEED_K-mers at every 4th base (read from the bases packed 4 a byte),
    2^32 - 1 for those holding anything but A/C/G/T (or followed by it within the last packed byte)."""
    count = (len(s) - 4 * _BYTES) // 4 + 1
    if count <= 0:
        return np.zeros(0, np.uint32)
    words = np.frombuffer(s, np.uint32, count + _BYTES - 1)  # 4 bases each, the first in the low byte
    two = (words >> 1) & 0x03030303  # A C T G -> 0 1 2 3 (pack.CODE2's codes)
    packed = ((two << 6) | (two >> 4) | (two >> 14) | (two >> 24)) & 0xFF  # the first base in the high bits
    out = packed[:count] << 8 * (_BYTES - 1)
    for j in range(1, _BYTES):
        out |= packed[j:j + count] << 8 * (_BYTES - 1 - j)
    out >>= 2 * (4 * _BYTES - SEED_K)
    if bytes(s[:4 * len(words)]).translate(None, b"ACGT"):
        other = (CODE2[np.frombuffer(s, np.uint8, 4 * len(words))] > 3).reshape(-1, 4).any(1)
        for j in range(_BYTES):
            out[other[j:j + count]] = np.iinfo(np.uint32).max
    return out


def _place(window, stretch) -> int | None:
    """Where window starts in stretch: the diagonal band that most of their shared k-mers fall on (the
    window's k-mers at every base, once in it; the stretch's at every 4th base, at most MAX_OCCURRENCES
    times among those; the band's median hit), or None when no band holds MIN_HITS."""
    global _table
    size = 1 << 2 * SEED_K
    phases = [_kmers(window[r:]) for r in range(4)]
    codes = np.concatenate(phases)
    where = np.concatenate([np.arange(r, r + 4 * len(c), 4, dtype=np.int16) for r, c in enumerate(phases)])
    where, codes = where[codes < size], codes[codes < size]
    b = _kmers(stretch)
    with _table_lock:
        if _table is None:
            _table = np.full(size, -1, np.int16)
        _table[codes] = where
        try:
            _table[codes[_table[codes] != where]] = -1  # k-mers twice or more in the window
            found = _table[b & (size - 1)]
        finally:
            _table[codes] = -1
    found[b >= size] = -1
    hit = np.flatnonzero(found >= 0)
    i = found[hit]
    hit = hit[np.bincount(i, minlength=len(window))[i] <= MAX_OCCURRENCES]
    if len(hit) < MIN_HITS:
        return None
    diag = 4 * hit - found[hit] + len(window)  # >= 0
    bins = np.bincount(diag // DIAGONAL_BIN)
    best = int(bins.argmax())
    if bins[best] < MIN_HITS:
        return None
    return max(0, int(np.median(diag[diag // DIAGONAL_BIN == best])) - len(window))
