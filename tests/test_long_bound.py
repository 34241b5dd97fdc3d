"""long_bound: the anchored upper bound that seeds the long-string kernel's pruning (CPU engine here;
the GPU path is checked in test_genome.py). A bound below the distance would make the kernel wrong,
so every case checks U >= edlib's distance, and the anchors' own invariants."""

import edlib
import numpy as np
import pytest

from gpualign import long_bound as LB
from gpualign.config import AlignConfig
from gpualign.engines import CpuEngine
from test_genome import mutate, rand

CFG = AlignConfig(distance_only=True, device="cpu", threads=2)


def u8(b: bytes) -> np.ndarray:
    return np.frombuffer(b, np.uint8)


def repeat_rich(n: int, seed: int) -> bytes:
    unit = rand(300, seed)
    rng = np.random.default_rng(seed)
    return b"".join(unit if rng.random() < 0.5 else rand(300, seed + i + 1) for i in range(n // 300))


def rearranged(n: int, seed: int) -> tuple[bytes, bytes]:
    """A block moved and another reverse-complemented: anchors off the main path must not break U."""
    q = rand(n, seed)
    t = mutate(q, 0.02, seed + 1)
    c = len(t) // 5
    rc = t[2 * c:3 * c][::-1].translate(bytes.maketrans(b"ACGT", b"TGCA"))
    return q, t[3 * c:4 * c] + t[:2 * c] + rc + t[4 * c:]


CASES = {
    "1pct": lambda: (rand(200_000, 1), mutate(rand(200_000, 1), 0.01, 2)),
    "10pct": lambda: (rand(150_000, 3), mutate(rand(150_000, 3), 0.10, 4)),
    "30pct": lambda: (rand(60_000, 5), mutate(rand(60_000, 5), 0.30, 6)),
    "unrelated": lambda: (rand(40_000, 7), rand(41_000, 8)),
    "unequal": lambda: (rand(80_000, 9), mutate(rand(80_000, 9), 0.02, 10)[:50_000]),
    "n_runs": lambda: (rand(30_000, 11)[:10_000] + b"N" * 5_000 + rand(30_000, 11)[15_000:],
                       mutate(rand(30_000, 11), 0.03, 12)),
    "repeats": lambda: (repeat_rich(60_000, 13), mutate(repeat_rich(60_000, 13), 0.05, 14)),
    "rearranged": lambda: rearranged(100_000, 15),
    "short": lambda: (b"ACGTACGTAC", b"ACGTTCGTAC"),
    "empty": lambda: (b"", rand(500, 16)),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_bound_is_an_upper_bound(case):
    q, t = CASES[case]()
    d = edlib.align(q, t, task="distance")["editDistance"] if q and t else max(len(q), len(t))
    r = LB.upper_bound(u8(q), u8(t), [CpuEngine(2)], CFG)
    assert d <= r["bound"] <= max(len(q), len(t))
    if case in ("1pct", "10pct", "unequal"):  # close strings: the anchored path is (near) optimal
        assert r["bound"] <= 1.02 * d and r["anchors"] > 100


@pytest.mark.parametrize("case", ["1pct", "10pct", "n_runs"])
def test_gaps_gathered_or_in_place_alike(case, monkeypatch):
    """The gaps sent to the aligner gathered, or in place in the two strings: the same bound and gap costs."""
    q, t = (u8(s) for s in CASES[case]())
    got = []
    for share in (0.0, 2.0):
        monkeypatch.setattr(LB, "GATHER_BELOW", share)
        got.append(LB.upper_bound(q, t, [CpuEngine(2)], CFG))
    assert got[0]["bound"] == got[1]["bound"] and got[0]["aligned"] == got[1]["aligned"] > 0
    assert all(np.array_equal(a, b) for a, b in zip(got[0]["path"], got[1]["path"]))


@pytest.mark.parametrize("case", sorted(CASES))
def test_anchors_are_colinear_exact_matches(case):
    q, t = CASES[case]()
    a_q, a_t = LB.anchors(u8(q), u8(t))
    assert np.all(np.diff(a_q) >= LB.K) and np.all(np.diff(a_t) >= LB.K)
    for x, y in zip(a_q.tolist(), a_t.tolist()):
        assert q[x:x + LB.K] == t[y:y + LB.K] and set(q[x:x + LB.K]) <= set(b"ACGT")
    qs, ql, ts, tl = LB.gaps(a_q, a_t, len(q), len(t))
    assert ql.min(initial=0) >= 0 and tl.min(initial=0) >= 0
    assert ql.sum() + LB.K * len(a_q) == len(q) and tl.sum() + LB.K * len(a_t) == len(t)


def test_colinear_drops_backward_and_chance_anchors():
    a_q = np.arange(8) * 320  # even blocks of K: the thinning keeps them all
    a_t = a_q + np.array([0, 1, 90_000, 1, 2, -1_500, 3, 4])  # one far-off, one going backwards
    kq, kt = LB._colinear(a_q, a_t)
    assert np.all(np.diff(kq) >= LB.K) and np.all(np.diff(kt) >= LB.K)
    assert 90_640 not in kt.tolist() and 100 not in kt.tolist() and len(kq) >= 4


def test_bound_with_n_mismatch_rule():
    """--n-mismatch rewrites non-ACGT to codes that match nothing (1 in queries, 2 in targets): no anchor
    may hold them and the gaps holding them must still be costed as mismatches."""
    from gpualign.genome_pair import apply_rule as _apply_rule

    q = rand(40_000, 21)[:15_000] + b"N" * 3_000 + rand(40_000, 21)[18_000:]
    t = mutate(rand(40_000, 21), 0.03, 22)
    t = t[:20_000] + b"NNNNRYN" * 200 + t[21_400:]
    qa, ta = _apply_rule(u8(q), u8(t), True)
    d = edlib.align(qa.tobytes(), ta.tobytes(), task="distance")["editDistance"]
    r = LB.upper_bound(qa, ta, [CpuEngine(2)], CFG)
    assert d <= r["bound"] <= 1.05 * d and r["anchors"] > 10


def test_raw_anchors_are_the_sampled_kmers_found_once_in_each_string():
    # an oracle by dictionaries: every ACGT 16-mer, sampled by the same hash, counted in each string
    q = rand(3_000, 21) + b"N" + rand(3_000, 21)[:1_500] + repeat_rich(3_000, 22)
    t = mutate(q, 0.05, 23)

    def once(s):
        seen = {}
        for i in range(len(s) - LB.K + 1):
            w = s[i:i + LB.K]
            if set(w) <= set(b"ACGT"):
                code = 0
                for b in w:
                    code = (code << 2) | int(LB.CODE2[b])
                if ((code * 0x9E3779B1) & 0xFFFFFFFF) >> (32 - LB.SAMPLE_BITS) == 0:
                    seen.setdefault(w, []).append(i)
        return {w: p[0] for w, p in seen.items() if len(p) == 1}

    oq, ot = once(q), once(t)
    want = sorted((p, ot[w]) for w, p in oq.items() if w in ot)
    aq, at = LB.raw_anchors(u8(q), u8(t))
    assert len(want) > 20 and list(zip(aq.tolist(), at.tolist())) == want
