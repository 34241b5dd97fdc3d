"""io/paf_bulk.py (a chunk of PAF lines parsed as a whole) against io/paf.parse_lines (a line at a time): the same
candidates wherever the chunk is taken, and a chunk left to parse_lines wherever a line would not be."""

import numpy as np
import pytest

from gpualign.io import paf as P
from gpualign.io import paf_bulk as B

TAGS = ["tp:A:P", "tp:A:S", "cm:i:12", "s1:i:230", "s2:i:0", "dv:f:0.0021", "rl:i:57", "NM:i:3", "cg:Z:5M",
        "zz:Z:kept", "A", "AS", "ASx:i:1", "x", "de:f:0.1", "MD:Z:5", "nn:i:0", "cs:Z::5", "zd:i:1", "ms:i:9"]


def _line(rng) -> str:
    ql = int(rng.integers(0, 10 ** int(rng.integers(1, 19))))
    qs = int(rng.integers(0, ql + 1))
    qe = int(rng.integers(qs, ql + 1))
    tl = int(rng.integers(0, 10 ** int(rng.integers(1, 19))))
    ts = int(rng.integers(0, tl + 1))
    te = int(rng.integers(ts, tl + 1))
    names = ["r1", "read 2 x", "", "#r", "q\x01", "chr1", "a:b|c", "N" * 40]
    cols = [names[int(rng.integers(0, len(names)))], str(ql), str(qs), str(qe), "+-"[int(rng.integers(0, 2))],
            names[int(rng.integers(0, len(names)))], str(tl), str(ts), str(te), str(int(rng.integers(0, 999))),
            str(int(rng.integers(0, 999))), str(int(rng.integers(0, 256)))]
    k = int(rng.integers(0, 6))
    tags = [TAGS[int(i)] for i in rng.integers(0, len(TAGS), k)]
    if rng.random() < 0.1:
        tags.insert(int(rng.integers(0, len(tags) + 1)), "")  # a stray tab
    return "\t".join(cols + tags)


def _break(line: str, rng) -> str:
    """line with one fault parse_lines names (or a form it takes on its slow path)."""
    f = line.split("\t")
    k = int(rng.integers(0, 12))
    col = int(rng.choice([1, 2, 3, 6, 7, 8, 9, 10, 11]))
    return [
        "\t".join(f[:11]),  # 11 columns
        "\t".join(f[:col] + ["-1"] + f[col + 1:]),
        "\t".join(f[:col] + [" 7"] + f[col + 1:]),
        "\t".join(f[:col] + ["\u0667"] + f[col + 1:]),  # a non-ASCII digit
        "\t".join(f[:col] + ["1" * 19] + f[col + 1:]),  # past int64
        "\t".join(f[:col] + [""] + f[col + 1:]),
        "\t".join(f[:4] + ["."] + f[5:]),
        "\t".join(f[:11] + ["256"] + f[12:]),
        "\t".join(f[:2] + [str(int(f[3]) + 1)] + f[3:]) if int(f[3]) < 10 ** 17 else line + "\r",
        line + "\r",
        "\t".join(f[:1] + ["\u00e9"] + f[2:]),
        "r\udcff\t" + line,
    ][k]


def _lines(rng, n: int, faults: int = 0) -> list:
    lines = [_line(rng) + "\n" for _ in range(n)]
    for _ in range(faults):
        i = int(rng.integers(0, n))
        lines[i] = _break(lines[i].rstrip("\n"), rng) + "\n"
    for i in rng.integers(0, n, n // 20):  # blank, comment and CRLF-ended lines
        lines[int(i)] = ["\n", "# a comment\n", lines[int(i)].rstrip("\n") + "\r\n"][int(rng.integers(0, 3))]
    if rng.random() < 0.5:
        lines[-1] = lines[-1].rstrip("\n")  # the file's last line, without its LF
    return lines


def _by_lines(lines: list, first: int):
    items = list(P.parse_lines("x.paf", enumerate(lines, first)))
    return [x for x in items if isinstance(x, P.Candidate)], [x for x in items if not isinstance(x, P.Candidate)]


@pytest.mark.parametrize("seed", range(40))
def test_chunks_parse_as_line_by_line(seed):
    rng = np.random.default_rng(seed)
    lines = _lines(rng, int(rng.integers(1, 300)), faults=int(rng.integers(0, 3)) if seed % 2 else 0)
    first = int(rng.integers(1, 10 ** 6))
    want, faults = _by_lines(lines, first)
    got = B.parse(lines, first)
    if got is None:  # left to parse_lines: only a chunk with a fault, or without a candidate
        assert faults or not want
        return
    assert not faults
    assert len(got) == len(want)
    assert list(got) == want
    for f in P.Candidate._fields:
        col = getattr(got, f)
        assert (col.dtype == np.int64) if f in P._INTS else isinstance(col, list)


def test_clean_chunks_are_taken():
    """Chunks without a fault, a CR or a non-ASCII byte never go to parse_lines (the fast path is used)."""
    rng = np.random.default_rng(99)
    for _ in range(20):
        lines = [_line(rng) + "\n" for _ in range(int(rng.integers(1, 200)))]
        lines = [x for x in lines if all(len(c) <= 18 for c in x.split("\t")[1:12])]
        if lines:
            got = B.parse(lines, 1)
            assert got is not None and list(got) == _by_lines(lines, 1)[0]


def test_faults_leave_the_chunk_to_parse_lines():
    rng = np.random.default_rng(5)
    for _ in range(200):
        lines = [_line(rng) + "\n" for _ in range(20)]
        i = int(rng.integers(0, 20))
        lines[i] = _break(lines[i].rstrip("\n"), rng) + "\n"
        want, faults = _by_lines(lines, 1)
        got = B.parse(lines, 1)
        assert got is None or (not faults and list(got) == want)
    assert B.parse(["\n", "# c\n"], 1) is None and B.parse([], 1) is None


def test_non_ascii_names_go_line_by_line():
    """A name with a non-ASCII letter is a good line, left to parse_lines (the chunk as a whole)."""
    lines = ["r\u00e9\t10\t0\t10\t+\tt\t20\t0\t10\t10\t10\t60\ttp:A:P\n", "r2\t10\t0\t10\t+\tt\t20\t0\t10\t10\t10\t60\n"]
    assert B.parse(lines, 1) is None and len(_by_lines(lines, 1)[0]) == 2
    assert list(B.parse(lines[1:], 2)) == _by_lines(lines[1:], 2)[0]
