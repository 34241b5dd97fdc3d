"""PAF candidates as columns (io.paf.Candidates, Fetched) and the one-expression parse of a well-formed line:
each checked against a plain rule written here, not against itself."""

import pickle

import numpy as np
import pytest

from gpualign.io import paf as P
from gpualign.io import paf_device


def _by_hand(ln: int, line: str):
    """What a PAF line must give: its Candidate (tags without the stale ones and empty columns), or the error
    text's start (None for a line that is skipped)."""
    line = line.rstrip("\r\n")
    if not line or line.startswith("#"):
        return None
    f = line.split("\t")
    nums = (1, 2, 3, 6, 7, 8, 9, 10, 11)
    if len(f) < 12 or any(not (f[k].isascii() and f[k].isdigit()) for k in nums) or "\r" in line:
        return "error"
    v = [int(f[k]) for k in range(12) if k in nums]
    ql, qs, qe, tl, ts, te, mq = v[0], v[1], v[2], v[3], v[4], v[5], v[8]
    if f[4] not in "+-" or len(f[4]) != 1 or not (qs <= qe <= ql and ts <= te <= tl) or mq > 255:
        return "error"
    tags = [t for t in f[12:] if t and t[:2] not in ("cm", "s1", "s2", "dv", "ms", "nn", "MD", "NM", "AS", "de", "cg",
                                                        "cs", "rl", "zd")]
    return P.Candidate(ln, f[0], ql, qs, qe, f[4], f[5], tl, ts, te, mq, tags)


LINES = [
    "r1\t150\t0\t150\t+\tchr1\t1000\t10\t160\t140\t150\t60\ttp:A:P\tcm:i:20\ts1:i:100\tNM:i:3\tzz:Z:keep",
    "r2\t150\t5\t150\t-\tchr1\t1000\t0\t1000\t140\t150\t255",
    "r3\t150\t0\t150\t+\tchr1\t1000\t0\t0\t0\t0\t0\t",
    "r 4 with spaces\t10\t0\t10\t+\tc h r\t10\t0\t10\t10\t10\t7\t\ttp:A:S\t",
    "r5\t150\t0\t151\t+\tchr1\t1000\t0\t10\t1\t1\t60",
    "r6\t150\t0\t150\t+\tchr1\t1000\t0\t10\t1\t1\t256",
    "r7\t150\t0\t150\t*\tchr1\t1000\t0\t10\t1\t1\t6",
    "r8\t+150\t0\t150\t+\tchr1\t1000\t0\t10\t1\t1\t6",
    "r9\t150\t0\t150\t+\tchr1\t1000\t0\t10\t1\t1",
    "r10\t150\t0\t150\t+\tchr1\t1000\t0\t10\t1\tx\t6",
    "r11\t١٥٠\t0\t150\t+\tchr1\t1000\t0\t10\t1\t1\t6",
    "réad\t150\t0\t150\t+\tchr1\t1000\t0\t10\t1\t1\t6\ttp:A:P",
    "r12\t150\t0\t150\t+\tchr1\t1000\t20\t10\t1\t1\t6",
    "r13\t150\t0\t150\t+\tchr1\t1000\t0\t10\t1\t1\t6\r",
    "r14\t150\t0\t150\t+\tch\rr1\t1000\t0\t10\t1\t1\t6",
    "",
    "# a comment",
    "\t0\t0\t0\t+\t\t0\t0\t0\t0\t0\t0",
]


def test_parse_lines_as_the_rules_say():
    got = list(P.parse_lines("c.paf", enumerate((x + "\n" for x in LINES), 1)))
    want = [w for w in (_by_hand(i, x) for i, x in enumerate(LINES, 1)) if w is not None]
    assert len(got) == len(want)
    for g, w in zip(got, want):
        if w == "error":
            assert isinstance(g, P.CandidateError) and str(g).startswith("c.paf: line ")
        else:
            assert g == w and type(g) is P.Candidate


def test_candidates_columns_round_trip():
    cands = [c for c in P.parse_lines("c.paf", enumerate(LINES, 1)) if isinstance(c, P.Candidate)]
    cols = P.Candidates(cands)
    assert len(cols) == len(cands) and list(cols) == cands
    assert [cols[i] for i in range(len(cands))] == cands
    assert all(type(x) is int for x in cols[0][2:5])
    assert list(cols[1:3]) == cands[1:3] and list(cols[5:5]) == []
    assert list(pickle.loads(pickle.dumps(cols))) == cands
    assert list(P.Candidates([])) == [] and len(P.Candidates()) == 0


@pytest.mark.parametrize("mode,pad", [("global", 0), ("ends-free", 0), ("ends-free", 100), ("ends-free", 1 << 20)])
def test_windows_equal_window(mode, pad):
    rng = np.random.default_rng(3)
    cands = []
    for i in range(300):
        tl = int(rng.integers(1, 5000))
        ts = int(rng.integers(0, tl + 1))
        te = int(rng.integers(ts, tl + 1))
        qs = int(rng.integers(0, 11))
        qe = qs if i % 4 == 0 else int(rng.integers(qs, 11))  # (empty query ranges: an empty window, ends-free)
        cands.append(P.Candidate(i, f"r{i}", 10, qs, qe, "+", "t", tl, ts, te, 60, []))
    ws, we, free = P.windows(P.Candidates(cands), mode, pad)
    for c, a, b, f in zip(cands, ws.tolist(), we.tolist(), free.tolist()):
        w = P.window(c, mode, pad)
        assert (a, b, tuple(f)) == (w[0], w[1], tuple(w[2]))


def test_line_ends_placed_on_arrays():
    cases = [(10, 0, 10, 11), (0, 5, 1, 1), (30, 3, 10, 12), (30, 3, 10, 13), (5, 5, 10, 40), (6, 5, 10, 40)]
    want = [n == 0 or p0 + n <= pl or w - pl in (1, 2) for n, p0, pl, w in cases]
    got = paf_device.line_ends_placed(*(np.array(x) for x in zip(*cases)))
    assert got.tolist() == want


@pytest.mark.parametrize("crlf", [False, True])
def test_rows_and_raw_bounds_equal_span(tmp_path, crlf):
    """IndexedFasta.rows with faidx.raw_bounds place many ranges as fetch's _raw_bounds places each one, and the
    file's bytes there are fetch's bases (records of one line, wrapped, of one base, CRLF)."""
    from gpualign.io import faidx

    rng = np.random.default_rng(5)
    end = "\r\n" if crlf else "\n"
    lengths, text = [], []
    for i in range(40):
        n, w = int(rng.integers(1, 400)), int(rng.integers(1, 90))
        seq = "".join(rng.choice(list("ACGT"), n))
        text.append(f">s{i}{end}" + end.join(seq[k:k + w] for k in range(0, n, w)) + end)
        lengths.append(n)
    path = tmp_path / "r.fa"
    path.write_bytes("".join(text).encode())
    fa = faidx.IndexedFasta(str(path))
    names, starts, ends, want = [], [], [], []
    for _ in range(500):
        i = int(rng.integers(0, 40))
        a = int(rng.integers(0, lengths[i] + 1))
        b = int(rng.integers(a, lengths[i] + 1))
        names.append(f"s{i}")
        starts.append(a)
        ends.append(b)
        offset, per_line, width, _ = fa._index[f"s{i}"]
        want.append(faidx._raw_bounds(offset, per_line, width, a, b))  # (fetch's own, a range at a time)
    a, b = faidx.raw_bounds(fa.rows(names), np.array(starts), np.array(ends))
    assert list(zip(a.tolist(), b.tolist())) == want
    data = path.read_bytes()  # the bytes they name are the bases fetch gives, line ends left out
    for name, x, y, s, e in zip(names, a.tolist(), b.tolist(), starts, ends):
        assert data[x:y].replace(b"\r", b"").replace(b"\n", b"") == fa.fetch(name, s, e)
    fa.close()


def test_raw_segments_refuse_numbers_past_int64(tmp_path):
    """A PAF length of 2^63 or more: the GPU layout's segments are refused (None), so the host path names the
    line's fault or skips it, as for any other length that does not match."""
    from gpualign import realign_readers as R

    (tmp_path / "t.fa").write_text(">t\n" + "ACGT" * 50 + "\n")
    (tmp_path / "q.fa").write_text(">r1\n" + "ACGT" * 10 + "\n")
    R._init(str(tmp_path / "q.fa"), str(tmp_path / "t.fa"), "ends-free", 10, False, False)
    good = P.Candidate(1, "r1", 40, 0, 40, "+", "t", 200, 0, 40, 60, [])
    assert R._raw([good]) is not None
    assert R._raw([good, good._replace(line=2, qlen=1 << 64, qe=40)]) is None
