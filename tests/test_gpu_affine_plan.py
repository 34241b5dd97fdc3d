"""The affine engine's buffer plan (host side, no GPU): bounds that make the kernel exact."""

import numpy as np
import pytest

from gpualign.engines.gpu_affine import Plan, kbound, reduced


@pytest.mark.parametrize("pen", [(4, 6, 2), (1, 0, 1), (3, 5, 1), (6, 2, 2), (2, 12, 4)])
def test_reduced_penalties(pen):
    (x, o, e), g = reduced(*pen)
    assert (x * g, o * g, e * g) == pen
    assert np.gcd.reduce([x, o, e]) == 1


@pytest.mark.parametrize("pen", [(2, 3, 1), (1, 0, 1), (3, 5, 1), (3, 1, 1), (1, 6, 1)])
def test_kbound_covers_every_reachable_diagonal(pen):
    """Cheapest cost of reaching diagonal k is o + |k| e (one gap): kbound(s) must be >= every such |k|
    with cost <= s, and never more than the cap."""
    x, o, e = pen
    s = np.arange(0, 400)
    kb = kbound(s, o, e, 10_000)
    for k in range(0, 300):
        cheapest = 0 if k == 0 else o + k * e
        assert (kb[s >= cheapest] >= k).all()
    assert (kbound(s, o, e, 17) <= 17).all()


def test_plan_sizes():
    p = Plan(0.15, 1000, 40, (2, 3, 1), True)
    assert p.s_cap >= 3 + 40  # the forced gap of the length difference fits under the cap
    assert p.kcap <= 1000 and len(p.rowbase) == p.s_cap + 2
    assert p.rowbase[-1] == ((2 * kbound(np.arange(p.s_cap + 1), 3, 1, p.kcap) + 2) & ~1).sum()
    assert p.slot_bt * 2 == p.rowbase[-1] and (p.rowbase % 2 == 0).all()  # 4-bit cells, rows on bytes
    assert p.cig_cap >= 2 * 1 + 1 and p.tok_cap > 0 and p.in_smem
    assert p.threads in (64, 128, 256, 512) and p.resident_per_sm() >= 1 
    assert p.pair_bytes() == p.slot_bt + p.tok_cap + 4 * p.cig_cap
    q = Plan(0.15, 50_000, 0, (2, 3, 1), False)
    assert not q.in_smem and q.slot_bt == 0 and q.cig_cap == 0 


def test_record_level_books_scores_failures_and_cigars():
    """The bookkeeping both GPU engines share after each kernel level (numpy only)."""
    from gpualign.engines._device import record_level
    from gpualign.records import EXCEEDED, FAILED, OK

    score = np.full(6, -1, np.int32)
    status = np.full(6, EXCEEDED, np.uint8)
    parts = []
    ids = np.array([4, 1, 3], np.int32)
    done = record_level(ids, np.array([5, -1, 7]), np.array([2, 0, -1]), "ops", np.array([0, 2, 2]), score,
                        status, parts, True, scale=2)
    assert done.tolist() == [True, False, True]
    assert score.tolist() == [-1, -1, -1, 14, 10, -1]
    assert status.tolist() == [EXCEEDED, EXCEEDED, EXCEEDED, FAILED, OK, EXCEEDED]
    (pids, ops, off, cnt), = parts
    assert pids.tolist() == [4] and ops == "ops" and off.tolist() == [0] and cnt.tolist() == [2]
    record_level(np.array([0]), np.array([3]), None, None, None, score, status, parts, False)
    assert score[0] == 3 and status[0] == OK and len(parts) == 1
