"""The bulk-built PAF and TSV writers against a line-by-line Python rendering of the same results
(failed pairs, empty sequences, non-ASCII names, distance-only, both metrics)."""

import io

import numpy as np
import pytest

from gpualign import cigar as C
from gpualign.config import AlignConfig
from gpualign.engines.cpu_wfa import CpuWfaEngine
from gpualign.output.paf import PafWriter
from gpualign.output.tsv import TsvWriter
from gpualign.records import EXCEEDED, FAILED, OK, STATUS_NAMES, PairBatch


def _batch():
    rng = np.random.default_rng(5)
    qs = [bytes(rng.choice(list(b"ACGT"), int(k))) for k in rng.integers(0, 60, 300)]
    ts = [bytes(b"".join([q[: len(q) // 2], b"T", q[len(q) // 2 + 1:]])) if q else b"" for q in qs]
    qs[:3], ts[:3] = [b"", b"ACGT", b""], [b"ACG", b"", b""]
    names = [f"q{i}" if i % 7 else f"é{i}|x" for i in range(len(qs))]
    return PairBatch.from_sequences(qs, ts, q_names=names, t_names=[f"t{i}" for i in range(len(qs))])


def _expected(batch, res, fmt, metric):
    text = C.to_text(res.cigar, res.cigar_off, res.cigar_len) if res.has_cigar else [""] * res.n
    lines = []
    for i in range(batch.n):
        ok = res.status[i] == OK
        ops = res.cigar[res.cigar_off[i]: res.cigar_off[i] + res.cigar_len[i]]
        ln = (ops >> 4).astype(int)
        matches = int(ln[(ops & 15) == C.EQ].sum())
        nm = int(ln[np.isin(ops & 15, (C.X, C.I, C.D))].sum())
        q, t, s = int(batch.q_len[i]), int(batch.t_len[i]), int(res.score[i])
        if fmt == "paf":
            if ok:
                lines.append(f"{batch.q_names[i]}\t{q}\t0\t{q}\t+\t{batch.t_names[i]}\t{t}\t0\t{t}\t{matches}\t"
                             f"{matches + nm}\t255\tNM:i:{nm}\tAS:i:{-s}\tcg:Z:{text[i]}\n")
            continue
        if not ok:
            score = dist = cig = "*"
        elif res.has_cigar:
            score, dist, cig = s, nm, text[i] or "*"
        else:
            score, dist, cig = s, (s if metric == "edit" else "*"), "*"
        lines.append(f"{batch.q_names[i]}\t{batch.t_names[i]}\t{q}\t{t}\t{score}\t{dist}\t{cig}\t"
                     f"{STATUS_NAMES[res.status[i]]}\n")
    return "".join(lines).encode()


@pytest.mark.parametrize("metric", ["edit", "affine"])
@pytest.mark.parametrize("distance_only", [False, True])
def test_writers_equal_line_by_line(metric, distance_only):
    batch = _batch()
    res = CpuWfaEngine(1).align(batch, AlignConfig(device="cpu", metric=metric, distance_only=distance_only))
    res.status[10::37] = FAILED
    res.status[11::41] = EXCEEDED
    for fmt, writer in (("paf", PafWriter), ("tsv", TsvWriter)):
        out = io.BytesIO()
        w = writer(out, metric=metric)
        start = len(out.getvalue())
        w.write(batch, res)
        assert out.getvalue()[start:] == _expected(batch, res, fmt, metric), fmt
