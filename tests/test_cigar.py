import numpy as np
import pytest

from gpualign import cigar as C
from gpualign.config import Penalties


def test_text_roundtrip_and_merge():
    ops = C.from_text("3=1X2I4=1D")
    assert C.to_text(ops, np.array([0]), np.array([len(ops)])) == ["3=1X2I4=1D"]
    assert C.to_text(C.pack([(7, 2), (7, 3), (1, 0), (8, 1)]), np.array([0]), np.array([2])) == ["5=1X"]
    with pytest.raises(ValueError):
        C.from_text("3=Q")


def test_score_by_hand():
    p = Penalties(4, 6, 2)
    # 1 mismatch (4) + a 2-base insertion (6+4) + a 1-base deletion (6+2)
    assert C.score_cigar(C.from_text("3=1X2I4=1D"), p) == 4 + 10 + 8
    assert C.score_cigar(C.from_text("2I3D"), p) == (6 + 4) + (6 + 6)


def test_check_catches_errors():
    q, t = b"ACGTTTACGT", b"ACGAACGTA"
    C.check_cigar(q, t, C.from_text("3=1X2I4=1D"))
    for bad in ("3=1X2I4=", "4=2I4=1D", "3=1=2I4=1D", "3M1X2I4=1D", "2=1X1X2I4=1D"):
        with pytest.raises(ValueError):
            C.check_cigar(q, t, C.from_text(bad) if bad != "2=1X1X2I4=1D" else
                          np.array([2 << 4 | 7, 1 << 4 | 8, 1 << 4 | 8, 2 << 4 | 1, 4 << 4 | 7, 1 << 4 | 2],
                                   np.uint32))


def test_n_rule_in_check():
    C.check_cigar(b"ANA", b"ANA", C.from_text("3="))
    with pytest.raises(ValueError):
        C.check_cigar(b"ANA", b"ANA", C.from_text("3="), n_mismatch=True)
    C.check_cigar(b"ANA", b"ANA", C.from_text("1=1X1="), n_mismatch=True)


def test_totals():
    ops = np.concatenate([C.from_text("3=1X2I4=1D"), C.from_text("5=")])
    tot = C.op_totals(ops, np.array([0, 5]), np.array([5, 1]))
    assert tot["matches"].tolist() == [7, 5]
    assert tot["mismatches"].tolist() == [1, 0]
    assert tot["ins"].tolist() == [2, 0] and tot["dels"].tolist() == [1, 0]


def test_gap_opens_counts_i_and_d_runs_per_pair():
    rng = np.random.default_rng(9)
    lens = rng.integers(0, 12, 200)
    ops = rng.choice([C.EQ, C.X, C.I, C.D], int(lens.sum()))
    cigar = (rng.integers(1, 50, len(ops)).astype(np.uint32) << 4) | ops.astype(np.uint32)
    off = np.concatenate([[0], np.cumsum(lens)[:-1]])
    want = [int(np.isin(cigar[a:a + n] & 15, (C.I, C.D)).sum()) for a, n in zip(off, lens)]
    assert C.gap_opens(cigar, off, lens).tolist() == want


def test_to_text_buffer_all_widths():
    """Bulk CIGAR text == per-op Python formatting, for lengths of 1 to 7 digits in any order (the bulk
    writer lets short lengths' spare digit land on the previous op's character, written last)."""
    from gpualign import cigar as C
    from gpualign.records import offsets_from_lengths

    rng = np.random.default_rng(7)
    lens = (10 ** rng.integers(0, 7, 5000) * rng.random(5000)).astype(np.uint32) + 1
    ops = rng.choice([0, 1, 2, 4, 7, 8], 5000).astype(np.uint32)
    packed = (lens << 4) | ops
    per = np.diff(np.sort(np.concatenate([[0, 5000], rng.integers(0, 5000, 900)])))  # ops per pair, some 0
    off = offsets_from_lengths(per)
    buf, start, size = C.to_text_buffer(packed, off, per)
    for i in range(len(per)):
        want = "".join(f"{ln}{'MIDNSHP=X'[op]}" for ln, op in zip(lens[off[i]:off[i] + per[i]],
                                                                  ops[off[i]:off[i] + per[i]]))
        assert buf[start[i]:start[i] + size[i]].tobytes().decode() == want
