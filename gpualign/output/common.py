"""What every writer derives from an AlignBatch, computed in bulk."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import cigar as C
from ..records import OK, AlignBatch


@dataclass
class Columns:
    """Per-pair values shared by the writers (lists, ready to format)."""

    ok: list
    score: list
    cigar: list  # text, "" when absent
    matches: list
    mismatches: list
    ins: list
    dels: list
    nm: list
    block: list


def cigar_text(res: AlignBatch) -> tuple:
    """The CIGARs as text (buffer, start, length per pair): the engine's own, else built here."""
    if res.cigar_text is not None:
        return res.cigar_text
    return C.to_text_buffer(res.cigar, res.cigar_off, res.cigar_len)


def cigar_stats(res: AlignBatch, gap_opens: bool = False) -> dict:
    """Per pair, int64: matches (= bases), mismatches, ins, dels, and with gap_opens the I/D runs: the
    engine's own counts, else counted here."""
    if res.cigar_stats is not None:
        s = res.cigar_stats
        return {"matches": s[:, 0], "mismatches": s[:, 1], "ins": s[:, 2], "dels": s[:, 3], "gap_opens": s[:, 4]}
    tot = C.op_totals(res.cigar, res.cigar_off, res.cigar_len)
    if gap_opens:
        tot["gap_opens"] = C.gap_opens(res.cigar, res.cigar_off, res.cigar_len)
    return tot


def columns(res: AlignBatch) -> Columns:
    if res.has_cigar:
        tot = cigar_stats(res)
        text = C.text_list(*cigar_text(res))
    else:
        z = np.zeros(res.n, np.int64)
        tot = dict(matches=z, mismatches=z, ins=z, dels=z)
        text = [""] * res.n
    nm = tot["mismatches"] + tot["ins"] + tot["dels"]
    block = nm + tot["matches"]
    return Columns((res.status == OK).tolist(), res.score.tolist(), text,
                   tot["matches"].tolist(), tot["mismatches"].tolist(), tot["ins"].tolist(),
                   tot["dels"].tolist(), nm.tolist(), block.tolist())


def aligned_ranges(batch, res: AlignBatch) -> tuple:
    """(q_start, q_end, t_start, t_end), int64 per pair (AlignBatch.ranges)."""
    return res.ranges(batch.q_len, batch.t_len)


def empty_alignment(batch, res: AlignBatch) -> np.ndarray:
    """bool per pair: an alignment with CIGAR that aligns no base at all (a local alignment whose best
    score is <= 0, a semi-global one of an empty query)."""
    if not res.has_cigar or res.q_start is None:
        return np.zeros(res.n, dtype=bool)
    qs, qe, ts, te = aligned_ranges(batch, res)
    return (res.status == OK) & (qe == qs) & (te == ts)
