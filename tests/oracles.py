"""Independent judges: edlib (edit distance) and parasail (gap-affine), plus checks of results."""

from __future__ import annotations

import re

import edlib
import numpy as np
import parasail

from gpualign import cigar as C
from gpualign.config import Penalties

_NON_ACGT = re.compile(rb"[^ACGT]")


def rule(q: bytes, t: bytes, n_mismatch: bool) -> tuple[bytes, bytes]:
    """Case-fold, and for --n-mismatch make non-ACGT unmatchable ('1' in q, '2' in t)."""
    q, t = q.upper(), t.upper()
    if n_mismatch:
        q, t = _NON_ACGT.sub(b"1", q), _NON_ACGT.sub(b"2", t)
    return q, t


def edit(q: bytes, t: bytes, n_mismatch: bool = False) -> int:
    q, t = rule(q, t, n_mismatch)
    if not q or not t:
        return max(len(q), len(t))
    return edlib.align(q, t, mode="NW", task="distance")["editDistance"]


def affine(q: bytes, t: bytes, p: Penalties, n_mismatch: bool = False) -> int:
    q, t = rule(q, t, n_mismatch)
    if not q or not t:
        n = max(len(q), len(t))
        return p.gap_open + n * p.gap_extend if n else 0
    alphabet = "".join(sorted(set((q + t).decode())))
    m = parasail.matrix_create(alphabet, 0, -p.mismatch)
    # parasail charges open + (k-1)*extend for a gap of k: open = o + e, extend = e
    return -parasail.nw(q.decode(), t.decode(), p.gap_open + p.gap_extend, p.gap_extend, m).score


def oracle(q: bytes, t: bytes, metric: str, p: Penalties, n_mismatch: bool = False) -> int:
    return edit(q, t, n_mismatch) if metric == "edit" else affine(q, t, p, n_mismatch)


def check_against(batch, res, cfg, want, check_every: int = 1) -> None:
    """Every pair OK with the score want[i]; every check_every-th CIGAR consumes both sequences exactly
    (ends-free: the query and the aligned target window [t_start, t_end), inside the free margins),
    agrees with the bases (=/X under the character rule) and costs exactly want[i]."""
    from gpualign.records import OK

    want = np.asarray(want)
    assert (res.status == OK).all(), {k: v for k, v in list(res.reason.items())[:3]}
    bad = np.nonzero(res.score != want)[0]
    assert len(bad) == 0, [(int(i), batch.query(int(i))[:60], batch.target(int(i))[:60], int(res.score[i]),
                            int(want[i])) for i in bad[:5]]
    if res.has_cigar:
        pen = cfg.effective_penalties
        for i in range(0, batch.n, check_every):
            ops = res.cigar[res.cigar_off[i] : res.cigar_off[i] + res.cigar_len[i]]
            target = batch.target(i)
            if res.t_start is not None:
                t0, t1 = int(res.t_start[i]), int(res.t_end[i])
                if batch.t_free is not None:
                    assert t0 <= batch.t_free[i, 0] and t1 >= len(target) - batch.t_free[i, 1], (i, t0, t1)
                target = target[t0:t1]
            C.check_cigar(batch.query(i), target, ops, cfg.n_mismatch)
            assert C.score_cigar(ops, pen) == want[i], (i, C.to_text(ops, np.array([0]), np.array([len(ops)])))


def check_results(batch, res, cfg, queries=None, targets=None) -> None:
    """Every score equals the oracle's; every CIGAR is valid and scores what the engine said."""
    want = [oracle(batch.query(i), batch.target(i), cfg.metric, cfg.penalties, cfg.n_mismatch)
            for i in range(batch.n)]
    check_against(batch, res, cfg, want)
