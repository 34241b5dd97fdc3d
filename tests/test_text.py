"""text.py: bulk-built lines equal Python's own formatting."""

import numpy as np
import pytest

from gpualign.text import Strings, join_lines


def test_join_lines_equals_python_formatting():
    rng = np.random.default_rng(3)
    n = 500
    ints = rng.integers(-10**12, 10**12, n) // (10 ** rng.integers(0, 12, n))
    ints[:5] = [0, -1, 9, 10, -10]
    small = rng.integers(0, 1000, n)
    names = ["".join(rng.choice(list("ab_:.|x0"), int(k))) for k in rng.integers(0, 12, n)]
    names[0] = ""
    got = join_lines([Strings.of(names), ints, b"+", (b"AS:i:", -small), (b"cg:Z:", Strings.of(names[::-1])),
                      small], n)
    want = "".join(f"{a}\t{b}\t+\tAS:i:{-c}\tcg:Z:{d}\t{c}\n"
                   for a, b, c, d in zip(names, ints.tolist(), small.tolist(), names[::-1]))
    assert got == want.encode()


def test_strings_take_and_errors():
    s = Strings.of(["x", "yy", "", "zzz"])
    assert join_lines([s.take(np.array([3, 0, 2]))], 3) == b"zzz\nx\n\n"
    assert join_lines([b"a", b"b"], 0) == b""
    with pytest.raises(ValueError):
        Strings.of(["a\nb"])
