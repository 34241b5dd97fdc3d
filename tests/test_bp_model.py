"""The banded bit-parallel algorithm of kernels/bp_long.cu, as transcribed in bp_model.py, against edlib:
small words and few lanes per strip so that short random pairs cross many strips, band edges and
strip starts; every band that holds the distance gives it exactly, a too narrow one never undercuts it;
the same for two halves met in the middle (the host's split)."""

import edlib
import numpy as np
import pytest

import bp_model
from gpualign.engines.gpu_long import band


def _pair(rng, n, kind):
    a = bytes(rng.choice(list(b"ACGT"), n))
    if kind == "unrelated":
        return a, bytes(rng.choice(list(b"ACGTN"), int(rng.integers(0, 160))))
    b = bytearray(a)
    for _ in range(int(rng.integers(0, max(1, n // 3)))):
        p = int(rng.integers(0, len(b) + 1))
        op = rng.random()
        if op < 0.33 and p < len(b):
            b[p] = int(rng.choice(list(b"ACGTN")))
        elif op < 0.66:
            b.insert(p, int(rng.choice(list(b"ACGT"))))
        elif p < len(b):
            del b[p]
    return a, bytes(b)


def _edit(a, b):
    return edlib.align(a, b)["editDistance"] if a and b else max(len(a), len(b))


@pytest.mark.parametrize("word,lanes", [pytest.param(4, 2, marks=pytest.mark.slow), (8, 3),
                                        pytest.param(5, 4, marks=pytest.mark.slow), (32, 1),
                                        pytest.param(3, 5, marks=pytest.mark.slow)])
def test_model_equals_edlib(word, lanes):
    rng = np.random.default_rng(word * 10 + lanes)
    for trial in range(16):
        a, b = _pair(rng, int(rng.integers(0, 160)), "unrelated" if trial % 4 == 0 else "related")
        if trial % 7 == 0:
            a, b = b, a
        d = _edit(a, b)
        top = max(len(a), len(b))
        for upper in sorted({d, d + 1, d + 9, top}):
            upper = max(upper, abs(len(a) - len(b)))
            assert bp_model.distance(a, b, upper, word, lanes) == d, (len(a), len(b), upper)
            if len(b) >= 2:  # two halves met in the middle
                assert bp_model.split_distance(a, b, upper, word, lanes) == d, (len(a), len(b), upper)
        if d > abs(len(a) - len(b)):  # a band too narrow: never below the distance (the host then widens it)
            assert bp_model.distance(a, b, d - 1, word, lanes) >= d
            if len(b) >= 2:
                assert bp_model.split_distance(a, b, d - 1, word, lanes) >= d


def test_band_shape():
    for n, m, u in ((100, 100, 10), (100, 60, 40), (60, 100, 41), (5, 5, 0), (7, 3, 4)):
        klo, khi = band(n, m, u)
        ks = [k for k in range(-n - m, n + m + 1) if abs(k) + abs(k - (n - m)) <= u]
        assert (klo, khi) == (min(ks), max(ks))
