"""kernels/bp_long.cu (the banded bit-parallel edit distance of `genome`) run on the CPU (tests/emu): its distance
against edlib's and its last column (col_out) against a plain DP, over strip edges, bands, warps and rings that
wrap. The GPU tests run it through the engine (tests/test_genome*.py); these check the kernel's bit logic in CI."""

import numpy as np
import pytest

import emu
from gpualign.engines.gpu_long import BPAD, _bp_geometry, band
from gpualign.hirschberg import last_column
from test_genome import mutate, rand

pytestmark = pytest.mark.skipif(not emu.available(), reason="no g++ to compile the kernels for the CPU")

edlib = pytest.importorskip("edlib")


def _run(qc, tc, sigma, klo, khi, warps, shift=None, col=False, deal=0):
    """One launch as engines/gpu_long._bp_launch makes it: (D[n][m] or None, col_out or None, the tops words (per
    slot the last top score and start handed down), the cells the strips computed). deal: the kernel's (the
    emulation runs every warp in one block: strip s on warp s mod warps)."""
    n, m = len(qc), len(tc)
    rows = min(n, m + khi) if col else n
    nstrips, full = (int(v) for v in _bp_geometry(rows, khi - klo + 1))
    if shift is None or (1 << shift) * warps < full or (1 << shift) + 1 >= full:
        shift = 31  # (a wrapping ring needs R * warps >= a strip's words: the kernel's rule)
    slot_words = full if shift == 31 else (1 << shift) + 1
    acode = np.full(nstrips * 1024 + 64, sigma, np.uint8)
    acode[:min(n, nstrips * 1024)] = qc[:nstrips * 1024]
    bcode = np.full(BPAD + m + BPAD + 128, 128 * sigma, np.uint16)
    bcode[BPAD:BPAD + m] = tc.astype(np.uint16) * 128
    nslots = warps + 1
    ring = np.zeros(nslots * slot_words, np.uint64)
    tops = np.zeros(2 * nslots, np.uint64)
    ctl = np.zeros(4, np.int32)  # ticket, result, cells (uint64)
    out = np.full(n + 1, -7, np.int32) if col else None
    kern = emu.Module("bp_long").get_function("bp_long")
    kern((1,), (32 * warps,), (acode, bcode, np.int32(n), np.int32(m), np.int32(sigma), np.int32(klo), np.int32(khi),
                               np.int32(nstrips), np.int32(nslots), np.int32(slot_words), np.int32(shift), ring, tops,
                               ctl, ctl[1:], out if col else np.uint64(0), ctl[2:].view(np.uint64),
                               np.int32(deal)))
    return (None if col else int(ctl[1])), out, tops, int(ctl[2:].view(np.uint64)[0])


def _pair(seed: int, n: int, rate: float):
    """A random string of n bases and a copy with edits at rate (test_genome's rand and mutate), as arrays."""
    a = rand(n, seed)
    return np.frombuffer(a, np.uint8).copy(), np.frombuffer(mutate(a, rate, seed + 1), np.uint8).copy()


def _codes(a, b):
    both = sorted(set(a.tolist()) & set(b.tolist()))
    table = np.full(256, len(both), np.uint8)
    table[both] = np.arange(len(both))
    return table[a], table[b], len(both)


CASES = [  # (n, rate, warps, ring shift or None, band slack over the distance)
    (1, 0.0, 1, None, 0), (31, 0.3, 1, None, 0), (1023, 0.05, 2, None, 0), (1024, 0.1, 3, None, 3),
    (1025, 0.1, 1, None, 0), (2048, 0.02, 4, 7, 0), (2049, 0.3, 2, 7, 10), (3000, 0.1, 4, 7, 0),
    (2500, 0.5, 3, None, 0),
]


@pytest.mark.parametrize("n,rate,warps,shift,slack", CASES)
def test_distance_against_edlib(n, rate, warps, shift, slack):
    a, b = _pair(n * 7 + warps, n, rate)
    if n > 2:  # a byte that matches nothing (--n-mismatch's N: the symbol sigma)
        a[n // 2] = ord("N")
    d = edlib.align(a.tobytes(), b.tobytes(), task="distance")["editDistance"]
    qc, tc, sigma = _codes(a, b)
    klo, khi = band(len(a), len(b), d + slack)
    got = _run(qc, tc, sigma, klo, khi, warps, shift)[0]
    assert got == d


@pytest.mark.parametrize("n,warps,shift", [(700, 1, None), (1024, 2, None), (2100, 3, 7), (2600, 4, 8)])
def test_last_column_against_the_dp(n, warps, shift):
    """col_out with the whole matrix as the band: every row's D[i][m], i >= 1 (Hirschberg's splits meet on it)."""
    a, b = _pair(n + warps, n, 0.15)
    qc, tc, sigma = _codes(a, b)
    klo, khi = band(len(a), len(b), len(a) + len(b))
    _, col, *_ = _run(qc, tc, sigma, klo, khi, warps, shift, col=True)
    assert (col[1:] == last_column(qc, tc)[1:]).all()  # (row 0, D[0][m] = m, is the host's)


@pytest.mark.parametrize("n,m,warps,shift", [(4100, 1500, 3, 7), (1100, 4000, 4, 7), (40, 3000, 1, None),
                                              (3000, 5000, 2, 7), (6100, 4200, 4, 8)])
def test_rectangular_pairs_in_narrow_bands(n, m, warps, shift):
    """One string a piece of the other (|n - m| up to 2,960): asymmetric bands, rings that wrap, the top scores
    handed down where strips start past column 1; the distance as edlib's, and the last column of the band's
    strips (rows up to m + khi) no lower than the DP's, exact at row n."""
    long_ = rand(max(n, m), n + 3 * m)
    at = abs(n - m) // 3
    short = mutate(long_[at:at + min(n, m)], 0.05, n + 3 * m + 1)
    a, b = (np.frombuffer(x, np.uint8).copy() for x in ((long_, short) if n > m else (short, long_)))
    d = edlib.align(a.tobytes(), b.tobytes(), task="distance")["editDistance"]
    qc, tc, sigma = _codes(a, b)
    klo, khi = band(len(a), len(b), d)
    got = _run(qc, tc, sigma, klo, khi, warps, shift)[0]
    assert got == d
    _, col, *_ = _run(qc, tc, sigma, klo, khi, warps, shift, col=True)
    true = last_column(qc, tc)
    computed = col[1:] != -7
    assert (col[1:][computed] >= true[1:][computed]).all() and col[len(qc)] == d


@pytest.mark.parametrize("n,warps,shift", [(2100, 2, None), (3100, 3, 7)])
def test_two_halves_meet_at_the_distance(n, warps, shift):
    """bp_distance's split: the last columns of the left half forward and of the right half backward, in the band
    of the distance, meet (min over rows of their sum) at the distance."""
    a, b = _pair(n, n, 0.08)
    d = edlib.align(a.tobytes(), b.tobytes(), task="distance")["editDistance"]
    qc, tc, sigma = _codes(a, b)
    klo, khi = band(len(qc), len(tc), d)
    assert _halves_meet(qc, tc, sigma, klo, khi, warps, shift)[0] == d


def _halves_meet(qc, tc, sigma, klo, khi, warps, shift):
    """bp_distance's split as two launches: the left half of tc forwards, the right half backwards, each giving its
    last column; (min over rows of their sum, each half's tops words)."""
    half = len(tc) // 2
    cols, tops = [], []
    for q, t in ((qc, tc[:half]), (qc[::-1].copy(), tc[half:][::-1].copy())):
        _, col, top, _ = _run(q, t, sigma, klo, khi, warps, shift, col=True)
        col = col.astype(np.int64)
        col[col == -7] = 1 << 30  # (rows no strip wrote: out of the band, or in a stopped strip)
        col[0] = len(t)
        cols.append(col)
        tops.append(top)
    return int((cols[0] + cols[1][::-1]).min()), tops


def _band_cells(nstrips: int, m: int, klo: int, khi: int) -> int:
    """The cells the strips of a band compute without the pruning (kernels/bp_long.cu's strip_columns)."""
    r0 = np.arange(nstrips, dtype=np.int64) * 1024 + 1
    cs, ce = np.maximum(1, r0 - khi), np.minimum(m, r0 + 1023 - klo)
    return int(np.maximum(ce - cs + 1, 0).sum()) * 1024


def _starts(tops):
    """The start offsets handed down (columns past a strip's band start), one per ring slot."""
    return (tops[1::2] & np.uint64(0xFFFFFFFF)).astype(np.int64)


@pytest.mark.parametrize("n,rate,warps,shift,slack", [
    (30000, 0.1, 8, None, 0), (20000, 0.3, 5, 7, 0), (12000, 0.5, 4, 8, 0), (20000, 0.1, 4, 7, 400),
    (16000, 0.08, 3, None, 5000), (9000, 0.2, 2, 8, -40), (12000, 0.3, 4, 7, -1300), (12000, 0.1, 4, None, -700),
    (20000, 0.5, 6, 7, -2000), (13770, 0.35, 3, 8, 3500)])
@pytest.mark.parametrize("deal", [0, 1])
def test_pruned_strips_against_edlib(n, rate, warps, shift, slack, deal):
    """Wide enough for the pruning to cut (strips that start past their band's start, and stop before its end):
    the distance as edlib's whenever the band's bound holds it, and never below it when it does not (slack < 0:
    a bound under the distance, whole strips stop before the next one's band starts: the next one still ends). The
    last: a band so wide that the strips below the first hand no start down (their band starts at column 1) and
    rings that wrap. deal: strips dealt to the warps in turn instead of taken from the ticket."""
    a, b = _pair(n * 3 + warps, n, rate)
    d = edlib.align(a.tobytes(), b.tobytes(), task="distance")["editDistance"]
    qc, tc, sigma = _codes(a, b)
    klo, khi = band(len(a), len(b), d + slack)
    got, _, tops, cells = _run(qc, tc, sigma, klo, khi, warps, shift, deal=deal)
    assert 0 < cells < _band_cells(-(-len(qc) // 1024), len(tc), klo, khi)  # (the strips' own count)
    if slack >= 0:
        assert got == d
        assert _starts(tops).max() > 0  # (some strip started past its band's first column)
    else:
        assert got >= d


@pytest.mark.parametrize("n,m,rate,warps,shift", [(24000, 21000, 0.15, 6, 7), (15000, 19000, 0.3, 4, None)])
def test_pruned_halves_meet_at_the_distance(n, m, rate, warps, shift):
    """bp_distance's split with the pruning: the rows a stopped strip leaves unwritten are none of the optimal
    paths', so the two last columns still meet at the distance."""
    a, _ = _pair(n * 5 + m, n, 0.0)
    b = np.frombuffer(mutate(a.tobytes()[:m] if m <= n else a.tobytes() + rand(m - n, m), rate, n + m), np.uint8)
    d = edlib.align(a.tobytes(), b.tobytes(), task="distance")["editDistance"]
    qc, tc, sigma = _codes(a, b.copy())
    klo, khi = band(len(qc), len(tc), d)
    met, tops = _halves_meet(qc, tc, sigma, klo, khi, warps, shift)
    assert met == d
    assert all(_starts(t).max() > 0 for t in tops)


@pytest.mark.parametrize("n,m,rate,seed,slack,warps,shift", [
    (1555, 1606, 0.02, 885070322, 4, 1, 7),  # the next strip's start past its band's first column, no check under it
    (13770, 13844, 0.35, 287379080, 3570, 3, 8),  # starts at column 1 below the first strip: rings from word 0
    (15271, 17874, 0.02, 12569229, -287, 6, 7),  # (bounds under the distance:) a ring's words written before the
    (5971, 7003, 0.55, 613908761, -1519, 3, 7),  # next strip's start is known: handed down at once
])
def test_pruning_cases_found_by_a_random_sweep(n, m, rate, seed, slack, warps, shift):
    """Pairs on which an earlier form of the pruning went wrong (a distance 4 too high; a ring overwritten before it
    was read: a deadlock), or that reach a rare branch, from a sweep of random sizes, rates, bounds, warps and rings
    against edlib."""
    a = rand(n, seed)
    b = mutate(a[:m] if m <= n else a + rand(m - n, seed + 7), rate, seed + 1)
    d = edlib.align(a, b, task="distance")["editDistance"]
    qc, tc, sigma = _codes(np.frombuffer(a, np.uint8), np.frombuffer(b, np.uint8))
    u = max(abs(len(a) - len(b)), d + slack)
    klo, khi = band(len(a), len(b), u)
    got = _run(qc, tc, sigma, klo, khi, warps, shift)[0]
    assert got == d if u >= d else got >= d
