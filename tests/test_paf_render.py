"""`gpualign paf`'s PAF lines built in bulk (RealignedPafLines.render) against the same lines made one at a time
(render_rows, the --cs path), and the de:f tag's rounding against Python's."""

import dataclasses

import numpy as np
import pytest

from gpualign import cigar as C
from gpualign.config import AlignConfig
from gpualign.engines import select_engines
from gpualign.io.paf import Candidate, Candidates
from gpualign.output.realigned import RealignedPafLines, fixed4
from gpualign.records import FAILED, RANK_KEY, PairBatch

TAGS = ["tp:A:P", "tp:A:S", "tp:A:I", "tp:A:i", "tp:A:", "tp:A:PP", "tp:Z:P", "cm:i:12", "s1:i:230", "s2:i:0",
        "dv:f:0.0021", "rl:i:57", "zz:Z:tp:A:P", "xtp:A:P", "tp:A:\u00e9", "tp:A:P\u00e9"]


def _batch(rng, n: int, ends_free: bool):
    """n candidates (random sequences, strands, names with spaces and non-ASCII letters, tag lists from TAGS,
    ranks), aligned by the CPU engine; some pairs empty (no CIGAR) and some failed."""
    qs, ts, cands = [], [], []
    for i in range(n):
        lq, lt = (0, 0) if i % 17 == 5 else (int(rng.integers(1, 60)), int(rng.integers(1, 60)))
        qs.append(bytes(b"ACGT"[x] for x in rng.integers(0, 4, lq)))
        ts.append(bytes(b"ACGT"[x] for x in rng.integers(0, 4, lt)))
        tags = [TAGS[k] for k in rng.choice(len(TAGS), int(rng.integers(0, 5)), replace=False)]
        qlen = lq + int(rng.integers(0, 9))
        tlen = lt + int(rng.integers(0, 2 ** 40))
        cands.append(Candidate(i, f"r{i} é" if i % 3 else f"read{i}", qlen, 0, lq, "+-"[i % 2], f"chr {i % 4}",
                               tlen, 0, lt, int(rng.integers(0, 61)), tags))
    batch = PairBatch.from_sequences(qs, ts, 0, [c.qname for c in cands], [c.tname for c in cands])
    cfg = AlignConfig(device="cpu", threads=1).with_(ends_free_target=ends_free).validate()
    res = select_engines(cfg)[0][0].align(batch, cfg)
    for i in range(3, n, 11):
        res.status[i] = FAILED
        res.reason[i] = "x"
    ranks = rng.integers(0, 3, n).astype(np.int8)
    batch.meta = {"cands": Candidates(cands), "win_start": rng.integers(0, 2 ** 40, n),
                  "full_query": [None] * n, "full_qual": [None] * n, RANK_KEY: ranks}
    return batch, res


@pytest.mark.parametrize("ends_free", [False, True])
def test_bulk_lines_are_the_row_by_row_lines(ends_free):
    rng = np.random.default_rng(5 + ends_free)
    batch, res = _batch(rng, 400, ends_free)
    lines = RealignedPafLines(cs=False)
    data, n = lines.render(batch, res)
    assert (data, n) == lines.render_rows(batch, res)
    assert n == int((res.status != FAILED).sum()) and n > 300
    text = data.decode()
    assert "\tcg:Z:\t" not in text and "\tcg:Z:\n" not in text  # an empty alignment: no cg:Z
    assert "tp:A:S" in text and "tp:A:P" in text and "tp:A:I" not in text  # every tp:A value the new rank's
    assert "zz:Z:tp:A:P" in text and "tp:Z:P" in text  # only a tag that is tp:A
    # with the engine's CIGAR text and counts, as a GPU engine gives them
    tot = C.op_totals(res.cigar, res.cigar_off, res.cigar_len)
    stats = np.stack([tot["matches"], tot["mismatches"], tot["ins"], tot["dels"],
                      C.gap_opens(res.cigar, res.cigar_off, res.cigar_len)], axis=1)
    rich = dataclasses.replace(res, cigar_text=C.to_text_buffer(res.cigar, res.cigar_off, res.cigar_len),
                               cigar_stats=stats)
    assert lines.render(*lines.prepare(batch, rich)) == (data, n)
    # no rank decided (all primary), and every pair failed
    del batch.meta[RANK_KEY]
    assert lines.render(batch, res) == lines.render_rows(batch, res)
    res.status[:] = FAILED
    assert lines.render(batch, res) == (b"", 0)


def test_bulk_lines_without_tags_or_secondaries():
    rng = np.random.default_rng(11)
    batch, res = _batch(rng, 50, True)
    for c in range(len(batch.meta["cands"])):
        batch.meta["cands"].tags[c] = []
    batch.meta[RANK_KEY][:] = 0
    lines = RealignedPafLines(cs=False)
    assert lines.render(batch, res) == lines.render_rows(batch, res)


def test_fixed4_is_pythons_rounding():
    """Every fraction num/den with den < 200, the ties (1/32: on a double, so half to even; 1/20000, 3/20000:
    not on one, so the double's side), and large random ones."""
    pairs = [(a, b) for b in range(1, 200) for a in range(b + 1)]
    pairs += [(1, 32), (3, 32), (1, 20000), (3, 20000), (5, 100000), (1, 2), (0, 0), (7, 0)]
    rng = np.random.default_rng(3)
    den = rng.integers(1, 2 ** 36, 20000)
    pairs += list(zip((den * rng.random(20000)).astype(np.int64).tolist(), den.tolist()))
    num, den = (np.array(x, np.int64) for x in zip(*pairs))
    got = fixed4(num, den)
    want = [f"{a / b if b else 0.0:.4f}" for a, b in pairs]
    assert [bytes(got.buf[s:s + n]).decode() for s, n in zip(got.start, got.length)] == want
