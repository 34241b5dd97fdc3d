"""The affine engine's buffer plan (host side, no GPU): bounds that make the kernel exact."""

import numpy as np
import pytest

from gpualign.engines.affine_plan import Plan, end_reach, estimated_caps, forced_gap, kbound, reduced


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


def test_results_book_scores_failures_and_cigars():
    """The affine engine's per-pair bookkeeping across kernel levels (numpy buffers standing in for the
    device's), and the CIGARs brought into pair order at the end."""
    from gpualign.engines._results import Results
    from gpualign.records import EXCEEDED, FAILED, OK

    def gather(parts, total):
        dst = np.zeros(max(1, total), np.uint32)
        for src, src_off, lens, dst_off in parts:
            for a, ln, b in zip(src_off, lens, dst_off):
                dst[b:b + ln] = src[a:a + ln]
        return dst

    res = Results(6, True)
    ids = np.array([4, 1, 3], np.int32)
    level1 = np.array([41, 42, 99], np.uint32)  # pair 4: two ops at 0; pair 3 failed its replay
    done = res.record(ids, np.array([5, -1, 7]), np.array([2, 0, -1]), [level1], np.array([0, 2, 2]), scale=2)
    assert done.tolist() == [True, False, True]
    level2 = np.array([11, 12, 13, 21], np.uint32)  # pair 1: three ops at 0; pair 0: one op at 3
    res.record(np.array([1, 0], np.int32), np.array([3, 1]), np.array([3, 1]), [level2], np.array([0, 3]))
    out = res.finish(gather, "gpu-edit")
    assert out.score.tolist() == [1, 3, -1, 14, 10, -1]
    assert out.status.tolist() == [OK, OK, EXCEEDED, FAILED, OK, EXCEEDED]
    assert out.cigar_len.tolist() == [1, 3, 0, 0, 2, 0]
    assert out.cigar_off.tolist() == [0, 1, 4, 4, 4, 6]
    assert out.cigar.tolist() == [21, 11, 12, 13, 41, 42]
    assert list(out.reason) == [3]
    one = Results(2, True)  # one level, already in pair order: no gather
    one.record(np.arange(2, dtype=np.int32), np.array([0, 2]), np.array([1, 2]), [level2[:3]], np.array([0, 1]))
    out = one.finish(None, "gpu-affine")
    assert out.cigar.tolist() == [11, 12, 13] and out.cigar_off.tolist() == [0, 1]
    two = Results(3, True)  # one level in two launches: a buffer each, each pair's ops in its launch's
    two.record(np.array([2, 0, 1], np.int32), np.array([1, 1, 1]), np.array([1, 2, 1]), [level1, level2],
               np.array([2, 0, 3]), part=np.array([0, 1, 1]))
    out = two.finish(gather, "gpu-affine")
    assert out.cigar.tolist() == [11, 12, 21, 99] and out.cigar_off.tolist() == [0, 2, 3]
    assert out.cigar_len.tolist() == [2, 1, 1]
    dist = Results(2, False)
    dist.record(np.array([1], np.int32), np.array([3]))
    out = dist.finish(None, "gpu-edit")
    assert out.score.tolist() == [-1, 3] and out.status.tolist() == [EXCEEDED, OK] and not out.has_cigar


def test_longest_first_orders_by_length():
    from gpualign.engines.affine_plan import longest_first

    longest = np.array([5, 900, 7, 900, 1, 70_000, 40_000])
    assert longest_first(np.array([0, 1, 2, 3, 4]), longest).tolist() == [1, 3, 2, 0, 4]
    ids = longest_first(np.array([6, 5, 1]), longest)  # keys over 16 bits: coarsened, still ordered here
    assert ids.tolist() == [5, 6, 1] and ids.dtype == np.int32
    assert len(longest_first(np.zeros(0, np.int64), longest)) == 0


def test_length_groups_by_power_of_two():
    from gpualign.engines.affine_plan import length_groups

    longest = np.array([1000, 513, 1024, 0, 1, 2, 3, 1025, 700])
    got = [g.tolist() for g in length_groups(longest)]
    want = {}
    for i, ln in enumerate(longest):  # the rule: ceil(log2(max(length, 1)))
        want.setdefault(int(np.ceil(np.log2(max(ln, 1)))), []).append(i)
    assert got == [want[k] for k in sorted(want)]
    assert [g.tolist() for g in length_groups(np.array([600, 1000, 513]))] == [[0, 1, 2]]
    assert [g.tolist() for g in length_groups(np.zeros(0, np.int64))] == [[]]


def test_forced_gap():
    q, t = np.array([10, 10, 3, 0]), np.array([10, 14, 0, 0])
    assert forced_gap(q, t, 3, 1, False).tolist() == [0, 7, 6, 0]
    assert forced_gap(q, t, 3, 1, True).tolist() == [0, 0, 0, 0]


def test_estimated_caps_cover_the_sample():
    """With the top quantile each sampled pair's cap is at least its own score; the caps scale with
    length and add each pair's forced gap and one operation of slack."""
    rng = np.random.default_rng(0)
    ln = rng.integers(500, 1000, 200)
    gap = rng.integers(0, 20, 200)
    s = (ln * rng.uniform(0.05, 0.3, 200)).astype(np.int64) + gap
    caps = estimated_caps(s, ln, gap, ln, gap, worst=4, quantile=1.0)
    assert (caps >= s).all()
    rate = ((s - gap) / ln).max()
    assert caps[0] == np.ceil(rate * ln[0]) + gap[0] + 4
    assert (estimated_caps(s, ln, gap, ln, gap, 4, 0.5) <= caps).all()


def test_estimated_caps_refuse_a_poor_sample():
    """No caps from an empty sample, or when more of it exceeded its level than the quantile allows."""
    ln = np.full(100, 1000)
    assert estimated_caps(np.zeros(0, np.int64), ln[:0], ln[:0], ln, ln * 0, 4) is None
    s = np.full(100, 100)
    s[:2] = -1  # 2% exceeded > 1 - 0.99
    assert estimated_caps(s, ln, ln * 0, ln, ln * 0, 4, 0.99) is None
    s[1] = 100  # 1%: the quantile is still a finite score
    assert estimated_caps(s, ln, ln * 0, ln, ln * 0, 4, 0.99) is not None


@pytest.mark.parametrize("pen", [(2, 3, 1), (1, 0, 1), (5, 1, 3), (3, 5, 1), (1, 6, 1)])
def test_kcap_holds_every_live_cell(pen):
    """The kernel computes, at score s, the diagonals reachable from the start diagonals [0, fb]
    (unclamped: up to (s - o) / e away) that can still reach the end diagonals [m - n - fe, m - n]
    within the cap U (the diamond). The plan's kcap must hold all of them (k - fb <= kcap, -k <= kcap)."""
    x, o, e = pen
    rng = np.random.default_rng(sum(pen))
    for _ in range(300):
        n, m = (int(v) for v in rng.integers(0, 400, 2))
        ends_free = bool(rng.integers(0, 2))
        fb, fe = (int(v) for v in rng.integers(0, 50, 2)) if ends_free else (0, 0)
        fb, fe = min(fb, m), min(fe, m)
        cap = int(rng.integers(0, 600))
        free = np.array([[fb, fe]]) if ends_free else None
        reach = int(end_reach(np.array([n]), np.array([m]), free)[0])
        plan = Plan(0.0, max(n, m), abs(n - m), pen, False, fb, cap, reach)
        ke_lo, ke_hi = m - n - fe, m - n
        for s in range(cap + 1):
            kb = 0 if s < o + e else (s - o) // e
            r = (cap - s) // e
            lo, hi = max(-kb, -n, ke_lo - r), min(kb + fb, m, ke_hi + r)
            if lo <= hi:
                assert hi - fb <= plan.kcap and -lo <= plan.kcap, (n, m, fb, fe, cap, s, lo, hi, plan.kcap)


def test_results_past_int32_left_for_the_next_engine():
    """A level's score times the penalties' common factor past int32 (one base against 214,748 at 10,000
    each: 214,749 x 10,000): it was stored wrapped (an int32 product), a negative score written as OK. Now the
    pair stays EXCEEDED, for the CPU engine, which fails it with its reason."""
    from gpualign.engines._results import Results
    from gpualign.records import EXCEEDED, OK

    res = Results(3, want_cigar=False)
    done = res.record([0, 1, 2], np.array([214_749, 5, -1], np.int32), scale=10_000)
    assert done.tolist() == [False, True, False]
    assert res.status.tolist() == [EXCEEDED, OK, EXCEEDED] and res.score[1] == 50_000


def test_raised_level_takes_the_pairs_with_raised_caps(monkeypatch):
    """Level E2 (gpu_affine._raised_level) runs the pairs with a raised cap (>= 0) at the largest of them,
    each pair capped at its own, and hands on what it could not hold with the pairs it did not take; it
    does not run where its cap reaches ESTIMATE_GAIN of level 0's, nor where no pair has a raised cap."""
    from types import SimpleNamespace

    import gpualign.engines.gpu_affine as GA

    monkeypatch.setattr(GA, "to_device", lambda a, dtype: np.asarray(a, dtype))
    longest = np.array([100, 400, 300, 200, 500, 250])
    raised = np.array([10, -1, 30, 40, -1, -1])
    calls = []

    def plan_for(ids, f, s_cap=None):
        return SimpleNamespace(s_cap=int(s_cap) if s_cap is not None else 100 * int(f * 10), ids=ids)

    def level(key, ids, plan, d_ucap=None):
        calls.append((key, ids.tolist(), plan.s_cap, None if d_ucap is None else d_ucap.tolist()))
        return ids[d_ucap[ids] < 35], None  # the pairs "above" E2: raised cap under 35 here

    engine = SimpleNamespace(levels=(0.15, 0.6))
    todo = np.array([0, 1, 2, 3, 4])
    left = GA.GpuAffineEngine._raised_level(engine, todo, raised, longest, plan_for, level)
    assert calls == [("gpu-affine:E2", [2, 3, 0], 40, [10, 0, 30, 40, 0, 0])]  # longest first, each its own cap
    assert sorted(left.tolist()) == [0, 1, 2, 4]
    calls.clear()
    none = GA.GpuAffineEngine._raised_level(engine, np.array([1, 4]), raised, longest, plan_for, level)
    assert none.tolist() == [1, 4]
    engine = SimpleNamespace(levels=(0.05, 0.6))  # level 0's cap 0: E2's 40 reaches its gain
    assert GA.GpuAffineEngine._raised_level(engine, todo, raised, longest, plan_for, level).tolist() == todo.tolist()
    assert calls == []
